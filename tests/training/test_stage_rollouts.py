"""Stage 1, teacher rollouts (training.rollouts): the versioned week record."""

from __future__ import annotations

from simulator import spec


def test_rollout_record_is_versioned_and_complete(records):
    rec = records[0]
    assert rec["format"] == "rhythm-rollouts/1"
    assert (
        len(rec["observations"]) == spec.EPISODE_STEPS + 1
        and len(rec["actions"]) == spec.EPISODE_STEPS
    )
    assert [o["t"] for o in rec["observations"]] == list(range(spec.EPISODE_STEPS + 1))
    assert rec["observations"][1]["last_action"] == rec["actions"][0]
    assert 0.0 <= rec["grade"]["final_score"] <= 1.0 and len(rec["belief_truth"]) == 3
