"""Weeks shaped like the product's (training/realshape.py) and their v4 training sequences
(training/dataset.py): the gaps, the teacher's view against the product's, what a week
shows and labels, and that one training sequence computes exactly each step's v4 prompt."""

from __future__ import annotations

import json

import numpy as np
import pytest

from agent.prompting import FORMAT_V4, FORMAT_VERSION, observed_view, parse_output
from simulator import spec
from simulator.env import RhythmEnv
from training.realshape import (
    REAL_NOISE_SD,
    TRAINING_WORLDS,
    Shape,
    draw_shape,
    draw_week_shape,
    gaps,
    product_week,
    teacher_view,
    teacher_week,
)
from training.weeks import shaped, view_from_record, week_prompt

PRODUCT = Shape(
    kind="product", calendar=True, missing_share=0.45, missing_run=3.0, meter_missing=0.1,
    unknown_share=0.75, follow=0.5, history_weeks=1, start=0, noise_sd=REAL_NOISE_SD,
)


@pytest.fixture(scope="module")
def weeks():
    return {
        "product": product_week(101, "in-dist", PRODUCT),
        "late": product_week(102, "in-dist", Shape(**{**PRODUCT.__dict__, "start": 9, "calendar": False})),
        "clean": teacher_week(103, "in-dist", Shape(calendar=True)),
    }


def test_the_noise_is_the_products():
    from rhythm.recommend import REAL_NOISE_SD as product

    assert REAL_NOISE_SD == product


@pytest.mark.parametrize("share,run", [(0.3, 1.0), (0.45, 3.0), (0.6, 6.0)])
def test_gaps_cover_their_share_in_runs_of_their_length(share, run):
    rng = np.random.default_rng(0)
    g = np.concatenate([gaps(rng, 29, share, run) for _ in range(3000)])
    assert abs(g.mean() - share) < 0.03
    starts = np.flatnonzero(np.diff(np.r_[0, g.astype(int)]) == 1)
    ends = np.flatnonzero(np.diff(np.r_[g.astype(int), 0]) == -1)
    inner = [(e - s + 1) for s, e in zip(starts, ends, strict=True) if s > 0 and e < len(g) - 1]
    assert abs(np.mean(inner) - run) < 0.25 * run + 0.1
    assert not gaps(rng, 29, 0.0, 3.0).any()


def test_shapes_mix_clean_and_product_weeks_in_the_brief_s_ranges():
    rng = np.random.default_rng(1)
    shapes = [draw_shape(rng, 0.6) for _ in range(2000)]
    product = [s for s in shapes if s.kind == "product"]
    assert 0.55 < len(product) / len(shapes) < 0.65
    assert all(0.3 <= s.missing_share <= 0.6 and s.noise_sd == REAL_NOISE_SD for s in product)
    assert 0.6 < np.mean([0.6 <= s.unknown_share <= 0.9 for s in product]) < 0.8
    assert {s.history_weeks for s in product} == {0, 1, 2}
    assert 0.05 < np.mean([s.start > 0 for s in product]) < 0.15
    assert all(s.noise_sd == 0 and s.unknown_share == 0 for s in shapes if s.kind == "clean")


def test_teacher_view_masks_like_rhythm_recommend():
    """The teacher of product weeks is fed what ``rhythm recommend`` feeds the belief."""
    from mapping.observations import belief_view as _masked

    env = RhythmEnv()
    obs, _ = env.reset(seed=4)
    rng = np.random.default_rng(4)
    for t in range(6):
        obs, *_ = env.step(t)
        observed = rng.random(5) < 0.6
        info = {"previous": {"observed": observed.tolist()}}
        mine, product = teacher_view(obs, info), _masked(obs, info)
        assert mine.keys() == product.keys()
        for k in mine:
            np.testing.assert_array_equal(np.asarray(mine[k]), np.asarray(product[k]))
    assert teacher_view(obs, {"previous": None}) is obs


def test_a_product_week_shows_gaps_and_unknowns_and_labels_the_free_slots(weeks):
    rec = json.loads(json.dumps(weeks["product"]))  # what a weeks file keeps
    views = rec["views"]
    assert rec["format"] == "rhythm-rollouts/2" and len(views) == 29 and len(rec["answers"]) == 28
    missing = np.mean([m is None for v in views for m in v["meters"]])
    unknown = np.mean([v["last_action"] == spec.N_ACTIONS for v in views[1:]])
    assert 0.15 < missing < 0.8 and 0.3 < unknown < 1.0
    # an unknown action has no anomalies; a missing meter has none either; no reward then
    for v in views[1:]:
        if v["last_action"] == spec.N_ACTIONS:
            assert all(x is not None and x == 0 or x is None for x in v["anomalies"])
        for m, x in zip(v["meters"], v["anomalies"], strict=True):
            assert m is not None or x is None
        if any(m is None for m in v["meters"]):
            assert v["last_reward"] is None
    # fixed slots carry no target, every free one the teacher's answer; cal lines for them
    fixed = {(e["day"], e["slot"]) for e in rec["context"]["events"]}
    assert fixed
    for t, ans in enumerate(rec["answers"]):
        assert (ans is None) == ((t // 4, t % 4) in fixed)
        if ans is not None:
            assert 0 <= ans["action"] < spec.N_ACTIONS and len(ans["belief"]) == 3
    assert rec["context"]["observe"] == "noisy"
    # the same seed and shape give the same week
    assert json.loads(json.dumps(product_week(101, "in-dist", PRODUCT))) == rec


def test_a_mid_week_start_shows_and_labels_the_week_from_there(weeks):
    rec = weeks["late"]
    assert rec["views"][0]["t"] == 9 and len(rec["views"]) == 29 - 9 and len(rec["answers"]) == 28 - 9
    prompt, action = week_prompt(rec, 0, FORMAT_V4)
    assert prompt.startswith("rhythm v4\nobs noisy\nday 2\nm ") and prompt.endswith("\nafternoon:")
    assert action == rec["answers"][0]["action"]


def test_a_clean_week_is_the_protocol_s_and_fixed_slots_have_no_target(weeks):
    rec = weeks["clean"]
    assert rec["context"]["observe"] == "clean"
    assert all(None not in v["meters"] and v["last_action"] < spec.N_ACTIONS for v in rec["views"][1:])
    fixed = {e["day"] * 4 + e["slot"] for e in rec["context"]["events"]}
    assert fixed and all((a is None) == (t in fixed) for t, a in enumerate(rec["answers"]))
    # a fixed slot did the commitment
    assert all(rec["views"][t + 1]["last_action"] == spec.ACTIONS.index(e["action"])
               for e in rec["context"]["events"] for t in [e["day"] * 4 + e["slot"]])


def test_old_teacher_weeks_read_as_clean_shaped_weeks():
    from training.rollouts import play_episode
    from training.weeks import teacher_policy

    rec = play_episode(teacher_policy("heuristic"), RhythmEnv(), 5, "heuristic", "in-dist")
    w = shaped(rec)
    assert w["context"]["observe"] == "clean" and len(w["answers"]) == 28
    assert [a["action"] for a in w["answers"]] == rec["actions"]
    prompt, action = week_prompt(rec, 3, FORMAT_VERSION)
    assert action == rec["actions"][3] and prompt.count("\nmorning:") + prompt.count("\nafternoon:") >= 2
    with pytest.raises(ValueError, match="no filter beliefs"):  # v4 needs the filter's beliefs
        week_prompt(rec, 3, FORMAT_V4)


def test_product_views_render_what_the_product_prompt_would(weeks):
    """A stored view renders as observed_view of the product's observation does."""
    rec = weeks["product"]
    v = view_from_record(rec["views"][5])
    assert np.isnan(v["meters"]).any() or np.isfinite(v["meters"]).all()
    again = observed_view(v, np.isfinite(v["meters"]))
    np.testing.assert_array_equal(np.isnan(again["meters"]), np.isnan(v["meters"]))


@pytest.mark.ml
def test_v4_training_sequence_computes_each_step_s_prompt(weeks):
    """One whole-week sequence with the answers inserted and hidden gives, at every target,
    the logits the model gives on that step's v4 prompt, which shows what was *done* there
    (or ?), not the teacher's answer."""
    import torch

    from training.batches import forward_hidden
    from training.dataset import encode_inserted, train_tokenizer, v4_text
    from training.sft import Args, build_model
    from training.tokens import EOS

    recs = list(weeks.values())
    tok = train_tokenizer([v4_text(r)[0] + "\n".join(a for a in v4_text(r)[1] if a) for r in recs], 600)
    eos = tok.token_to_id(EOS)
    torch.manual_seed(0)
    model = build_model(Args(layers=2, hidden=64, ffn=128, heads=2, kv_heads=2), tok.get_vocab_size(), eos).eval()
    for rec in (weeks["product"], weeks["late"]):
        text, answers = v4_text(rec)
        ids, mask, hide = encode_inserted(tok, text, answers)
        targets = [k for k, a in enumerate(answers) if a is not None]
        starts = [i for i in range(1, len(mask)) if mask[i] and not mask[i - 1]]
        assert len(starts) == len(targets)
        with torch.no_grad():
            hidden = model.lm_head(forward_hidden(model, torch.tensor(ids[None]).long(),
                                                  torch.tensor(hide[None].astype(np.int64))))[0]
            for k, s in list(zip(targets, starts, strict=True))[:: max(1, len(targets) // 5)]:
                prompt, action = week_prompt(rec, k, FORMAT_V4)
                p_ids = [eos, *tok.encode(prompt).ids]
                kept = [int(i) for i, h in zip(ids[:s], hide[:s], strict=True) if not h]
                assert p_ids == kept
                answer = tok.decode([int(i) for i in ids[s:][: int((hide[s:] == hide[s]).sum())]])
                assert parse_output(answer).action_id == action
                logits = model(input_ids=torch.tensor([p_ids])).logits[0, -1]
                assert torch.allclose(logits, hidden[s - 1], atol=1e-4)


def test_week_shapes_without_feedback_or_world_shares_are_the_earlier_data_s():
    for seed in range(1_000_000, 1_000_040):
        rng = np.random.default_rng([seed, 0x534850, 0])
        assert draw_week_shape(seed, 0.6, 0.5) == draw_shape(rng, 0.6, 0.5)


def test_week_shapes_mix_feedback_and_world_weeks_in_their_shares():
    shapes = [draw_week_shape(s, 0.6, 0.5, feedback_share=0.3, world_share=0.2) for s in range(2000)]
    fb = [s for s in shapes if s.kind == "feedback"]
    worlds = [s for s in shapes if s.world != "nominal"]
    assert abs(len(fb) / 2000 - 0.3) < 0.04 and abs(len(worlds) / 2000 - 0.2) < 0.04
    assert {s.observe for s in fb} == {"noisy", "answers-only", "clean"}
    assert all(s.kind == "clean" for s in worlds) and {s.world for s in worlds} == set(TRAINING_WORLDS)
    # product weeks answer some, all or none of the recommendations
    assert {s.answered for s in shapes if s.kind == "product"} == {0.0, 0.3, 0.7, 1.0}


@pytest.mark.slow
@pytest.mark.parametrize("observe", ["noisy", "answers-only"])
def test_a_feedback_week_shows_each_answer_after_its_step_and_only_what_was_observed(observe):
    rec = json.loads(json.dumps(teacher_week(11, "in-dist", Shape(kind="feedback", observe=observe))))
    assert rec["context"]["observe"] == observe and len(rec["views"]) == 29
    assert all(a is not None for a in rec["answers"])  # the teacher recommends every step
    items = rec["context"]["feedback"]
    assert [(i["day"] * 4 + i["slot"]) for i in items] == list(range(28))
    assert [i["action"] for i in items] == [spec.ACTIONS[a["action"]] for a in rec["answers"]]
    # an ignored recommendation: the person did something else (their habit) or nobody saw
    for t, item in enumerate(items):
        shown = rec["views"][t + 1]["last_action"]
        if item["response"] == "accepted":
            assert shown in (spec.ACTIONS.index(item["action"]), spec.N_ACTIONS)
        elif observe == "answers-only":
            assert shown == spec.N_ACTIONS
    assert {i["response"] for i in items} == {"accepted", "ignored"}
    if observe == "answers-only":
        assert all(m is None for v in rec["views"] for m in v["meters"])
    else:
        missing = np.mean([m is None for v in rec["views"] for m in v["meters"]])
        assert 0.15 < missing < 0.45  # feedback.md: each meter missing with probability 0.3
    prompt, action = week_prompt(rec, 6, FORMAT_V4)
    assert prompt.startswith(f"rhythm v4\nobs {observe}\n") and prompt.count("\nfb ") == 6
    assert prompt.endswith("\nevening:") and action == rec["answers"][6]["action"]


def test_a_product_week_answers_what_the_person_followed_and_the_teacher_reads_it():
    shape = Shape(**{**PRODUCT.__dict__, "answered": 1.0, "calendar": False, "history_weeks": 0})
    rec = product_week(104, "in-dist", shape)
    items = rec["context"]["feedback"]
    assert len(items) == sum(a is not None for a in rec["answers"]) == 28
    for t, item in enumerate(items):
        followed = rec["actions"][t] == rec["answers"][t]["action"]
        assert item["response"] == ("accepted" if followed else "ignored")
    # the same week unanswered: same readings and person, but the teacher learns less
    quiet = product_week(104, "in-dist", Shape(**{**shape.__dict__, "answered": 0.0}))
    assert quiet["context"]["feedback"] == [] and quiet["views"][:2] == rec["views"][:2]
    prompt, _ = week_prompt(rec, 10, FORMAT_V4)
    assert prompt.count("\nfb ") == 10


def test_a_world_week_is_played_in_its_world_by_the_named_teacher():
    nominal = teacher_week(21, "in-dist", Shape())
    drained = teacher_week(21, "in-dist", Shape(world="exercise-drains"), "bayes-robust")
    assert drained["shape"]["world"] == "exercise-drains" and drained["teacher"] == "bayes-robust"
    assert nominal["views"][0] == drained["views"][0]  # same person and start
    assert nominal["views"] != drained["views"]


class _V4Script:
    """A scripted v4 model that answers with the teacher's recorded answers, in order."""

    prompt_format = "rhythm v4"

    def __init__(self, outputs):
        from agent.runtime import ScriptedModel

        self._m = ScriptedModel(outputs)

    def complete(self, prompt, **kw):
        return self._m.complete(prompt, **kw)

    @property
    def prompts(self):
        return self._m.prompts


@pytest.mark.slow
@pytest.mark.parametrize("observe", [None, "noisy", "answers-only"])
def test_the_v4_student_s_filter_reads_the_week_as_the_teacher_s_did(observe):
    """The filter lines a v4 student is given in ``rhythm sim eval`` are the ones its training
    weeks carried: the student plays the teacher's week (its recorded answers), and every
    ``b`` line of its prompts is the teacher's filter at that step."""
    from agent.lab.student_policy import StudentPolicy
    from agent.prompting import filter_line, format_output
    from simulator.feedback_eval import play_episodes

    shape = Shape() if observe is None else Shape(kind="feedback", observe=observe)
    rec = teacher_week(31, "in-dist", shape)
    model = _V4Script([format_output(a["action"], a["belief"]) for a in rec["answers"]])
    policy = StudentPolicy(model)
    play_episodes(policy, [31], feedback=observe is not None, observe=observe or "clean")
    assert len(model.prompts) == 28
    shown = [x for x in model.prompts[-1].splitlines() if x.startswith("b ")]
    assert [x.split(" m ")[0] for x in shown] == [filter_line(f) for f in rec["filters"]]
    assert observe != "answers-only" or all(" m " in x for x in shown)  # no meter shown: all estimated
    # and the training text of that week is what the student read, step by step
    assert week_prompt(rec, 27, FORMAT_V4)[0] == model.prompts[-1]


def test_v4_weeks_need_their_filters():
    rec = teacher_week(32, "in-dist", Shape())
    old = {k: v for k, v in rec.items() if k != "filters"}
    with pytest.raises(ValueError, match="no filter beliefs"):
        week_prompt(old, 3, FORMAT_V4)
    prompt, _ = week_prompt(rec, 3, FORMAT_V4)
    assert prompt.startswith("rhythm v4\nobs clean\nday 0\nm ") and prompt.count("\nb ") == 4


def test_depleted_weeks_start_with_one_meter_near_empty():
    from training.realshape import DEPLETED_LEVEL

    shapes = [draw_week_shape(s, 0.6, 0.5, depleted_share=0.4) for s in range(3000, 4000)]
    dep = [s for s in shapes if s.start_meters]
    assert abs(len(dep) / 1000 - 0.4) < 0.05
    low = [int(np.argmin(s.start_meters)) for s in dep]
    assert all(min(s.start_meters) <= DEPLETED_LEVEL[1] for s in dep)
    assert all(sorted(s.start_meters)[1] >= 0.15 for s in dep)  # only one is emptied
    assert abs(low.count(2) / len(dep) - 0.5) < 0.08 and set(low) == set(range(spec.N_METERS))
    # the rest of the shape is the week's own draw
    for seed, s in zip(range(3000, 4000), shapes, strict=True):
        assert s.kind == draw_week_shape(seed, 0.6, 0.5).kind
    # a clean depleted week starts where its shape says (clean views show the meters)
    clean = next(s for s in dep if s.kind == "clean" and not s.calendar)
    seed = range(3000, 4000)[shapes.index(clean)]
    rec = teacher_week(seed, "in-dist", clean)
    assert list(rec["shape"]["start_meters"]) == list(clean.start_meters)
    np.testing.assert_allclose(rec["views"][0]["meters"], clean.start_meters)
