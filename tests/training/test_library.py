"""The training library modules the stages share: weeks files and the policy that plays them
(training/weeks.py), and what a dataset or a checkpoint folder says about its prompt format
(training/batches.py, training/checkpoints.py)."""

from __future__ import annotations

import json

import pytest

from simulator import spec
from simulator.env import RhythmEnv
from training.batches import prompt_format_of
from training.checkpoints import checkpoint_prompt_format
from training.weeks import FORMAT, read_rollouts, teacher_policy, write_weeks


def _week(job: tuple[list[int], str]) -> list[str]:
    """A worker: one record line per seed, graded as a week of the named policy would be."""
    seeds, teacher = job
    return [
        json.dumps(
            {
                "format": FORMAT,
                "seed": s,
                "teacher": teacher,
                "grade": {"final_score": s / 100, "belief_mae": None if s % 2 else s / 1000},
            }
        )
        for s in seeds
    ]


@pytest.mark.parametrize("workers", [1, 2])
def test_weeks_are_written_in_job_order_and_read_back(tmp_path, workers):
    path = tmp_path / "weeks.jsonl"
    jobs = [([7, 3], "bayes"), ([10], "heuristic"), ([4, 1, 8], "bayes")]
    seen: list[int] = []
    done, scores, maes = write_weeks(path, _week, jobs, workers, "grade", seen.append)
    # progress counts the weeks of each job as it finishes (in any order with two workers)
    assert done == 6 and seen == sorted(seen) and seen[-1] == 6 and len(seen) == 3
    assert not (tmp_path / "weeks.jsonl.units").exists()  # the units folder is gone
    assert scores == [0.07, 0.03, 0.10, 0.04, 0.01, 0.08]
    assert maes == [0.01, 0.004, 0.008]  # odd seeds have no belief
    records = list(read_rollouts(path))
    assert [r["seed"] for r in records] == [7, 3, 10, 4, 1, 8]
    assert [r["teacher"] for r in records][2] == "heuristic"


def test_reading_weeks_of_another_format_names_the_line(tmp_path):
    path = tmp_path / "weeks.jsonl"
    lines = _week(([1, 2], "bayes")) + [json.dumps({"format": "rhythm-dataset/1", "seed": 3})]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"weeks.jsonl:3: expected format rhythm-rollouts/1"):
        list(read_rollouts(path))


def test_teacher_policy_is_a_registered_policy_by_name():
    env = RhythmEnv()
    obs, _ = env.reset(seed=5)
    bayes, heuristic = teacher_policy("bayes"), teacher_policy("heuristic")
    bayes.reset(5)
    heuristic.reset(5)
    action, belief = bayes.act(obs)
    assert 0 <= int(action) < spec.N_ACTIONS and len(belief) == 3  # the agent believes
    assert heuristic.act(obs)[1] is None  # the baseline does not
    with pytest.raises(KeyError):
        teacher_policy("no-such-policy")


def test_prompt_formats_of_datasets_and_checkpoints(tmp_path):
    assert prompt_format_of(tmp_path) == "rhythm v1"  # made before the field existed
    assert checkpoint_prompt_format(tmp_path) == "rhythm v1"
    (tmp_path / "stats.json").write_text(json.dumps({"prompt_format": "rhythm v4"}))
    (tmp_path / "checkpoint.json").write_text(json.dumps({"prompt_format": "rhythm v4"}))
    assert prompt_format_of(tmp_path) == "rhythm v4"
    assert checkpoint_prompt_format(tmp_path) == "rhythm v4"
    (tmp_path / "stats.json").write_text(json.dumps({"prompt_format": "rhythm v2"}))
    with pytest.raises(ValueError, match="'rhythm v2' was retired"):
        prompt_format_of(tmp_path)
    (tmp_path / "checkpoint.json").write_text(json.dumps({"prompt_format": "rhythm v9"}))
    with pytest.raises(ValueError, match="unknown prompt format 'rhythm v9'"):
        checkpoint_prompt_format(tmp_path)


def test_the_evaluation_report_keeps_the_sections_other_scripts_wrote(tmp_path):
    from training.evaluate import keep_sections

    md = tmp_path / "results.md"
    assert keep_sections(md, "# Results\n\nnew table\n") == "# Results\n\nnew table\n"
    md.write_text("# Results\n\nold table\n\n## Weeks with a calendar\n\nrows\n\n## Worlds\n\nmore\n")
    out = keep_sections(md, "# Results\n\nnew table\n")
    assert out == "# Results\n\nnew table\n\n## Weeks with a calendar\n\nrows\n\n## Worlds\n\nmore\n"
    md.write_text("# Results\n\nold table only\n")
    assert keep_sections(md, "# Results\n\nnew\n") == "# Results\n\nnew\n"


def test_the_model_card_describes_every_rollouts_stage_the_dataset_joined(tmp_path):
    """A dataset may join an earlier run's weeks with this run's: the card's data line
    weighs each stage's shares by its weeks."""
    from training.pipeline import _data_summary

    old, new, root = tmp_path / "old", tmp_path / "new", tmp_path / "run"
    for folder, args in (
        (old, {"episodes": 2000, "shaped": True, "product_share": 0.6, "calendar_share": 0.5}),
        (new, {"episodes": 2000, "shaped": True, "product_share": 0.5, "calendar_share": 0.5,
               "feedback_share": 0.3, "world_share": 0.2, "world_teacher": "bayes-robust"}),
    ):
        folder.mkdir()
        (folder / "args.json").write_text(json.dumps(args))
    (root / "dataset").mkdir(parents=True)
    (root / "dataset" / "args.json").write_text(
        json.dumps({"rollouts": [str(old / "rollouts.jsonl"), str(new / "rollouts.jsonl")]}))
    text = _data_summary(root, {"data_stats": {"episodes": 4000}})
    # product-shaped: (2000 * 0.6 + 2000 * 0.5 * 0.5) / 4000 = 42.5%; feedback 15%; worlds 10%
    assert text.startswith("4000 weeks") and "32% the simulator protocol's clean" in text
    assert "42% shaped like the product's" in text or "43% shaped like the product's" in text
    assert "15% the simulator's feedback mode" in text and "10% clean weeks in misspecified worlds" in text
    assert "`bayes-robust`" in text
    # teacher weeks only: the plain line
    (new / "args.json").write_text(json.dumps({"episodes": 10}))
    (root / "dataset" / "args.json").write_text(json.dumps({"rollouts": [str(new / "rollouts.jsonl")]}))
    assert "weeks of the Bayesian teacher (`bayes`)" in _data_summary(root, {"data_stats": {"episodes": 10}})
