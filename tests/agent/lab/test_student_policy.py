"""The student as a policy in feedback mode and under every observation condition, driven by
a scripted model (the real GGUF runs in `rhythm sim eval --policy student`)."""

from __future__ import annotations

import numpy as np
import pytest

from agent.lab.student_policy import StudentPolicy
from agent.prompting import format_output
from agent.runtime import ScriptedModel
from simulator import spec
from simulator.feedback_eval import play_episodes
from tests.agent.gguf_fixture import needs_llama_cpp


@pytest.mark.parametrize("observe", ["clean", "noisy", "answers-only"])
def test_the_student_plays_every_condition_and_reads_the_answers(observe):
    model = ScriptedModel(default=format_output(spec.SOCIALIZE, (0.6, 0.4, 0.5)))
    policy = StudentPolicy(model)
    g = play_episodes(policy, [3], feedback=True, observe=observe)
    assert policy.llm.invalid_outputs == 0 and len(model.calls) == 28
    np.testing.assert_allclose(g["beliefs"][0, 5], [0.6, 0.4, 0.5])
    last = model.prompts[-1]
    assert "nan" not in last.lower()
    # every answer so far is a feedback line (the last 16), in the product's words
    lines = [x for x in last.splitlines() if x.startswith("fb ")]
    assert len(lines) == 16
    assert all(x.split()[3] == "SOCIALIZE" and x.split()[4] in ("accepted", "ignored") for x in lines)
    assert lines[-1].startswith("fb d6 night") or lines[-1].startswith("fb d6 evening")
    assert model.prompts[0].startswith("rhythm v1\nday 0")  # no answer yet, no feedback line


def test_the_view_carries_missing_meters_forward_and_zeroes_missing_deltas():
    policy = StudentPolicy(ScriptedModel(default="SLEEP b=.50,.50,.50"))
    nan = np.nan
    first = {"t": 0, "meters": np.array([0.6, nan, 0.5, 0.7, nan]), "deltas": np.zeros(5),
             "anomalies": np.zeros(5), "last_reward": np.array([0.0]), "last_action": 10}
    v = policy.view(first)
    np.testing.assert_allclose(v["meters"], [0.6, 0.70, 0.5, 0.7, 0.70])  # initial meters where none
    second = dict(first, t=1, meters=np.array([nan, 0.4, nan, nan, 0.9]),
                  deltas=np.array([nan, 0.1, nan, nan, 0.2]), last_reward=np.array([nan]),
                  last_action=10, last_recommendation=spec.LEARN)
    v = policy.view(second)
    np.testing.assert_allclose(v["meters"], [0.6, 0.4, 0.5, 0.7, 0.9])
    np.testing.assert_allclose(v["deltas"], [0.0, 0.1, 0.0, 0.0, 0.2])
    assert v["last_reward"][0] == 0.0 and v["last_action"] == spec.LEARN


def test_clean_without_feedback_the_student_sees_the_observation_unchanged():
    from agent.lab.llm_policy import LLMPolicy

    out = format_output(spec.EXERCISE, (0.5, 0.5, 0.5))
    a, b = ScriptedModel(default=out), ScriptedModel(default=out)
    play_episodes(StudentPolicy(a), [4], feedback=False, observe="clean")
    play_episodes(LLMPolicy(b, max_tokens=24), [4], feedback=False, observe="clean")
    assert a.prompts == b.prompts


class _V4Script(ScriptedModel):
    prompt_format = "rhythm v4"


class _V3Script(ScriptedModel):
    prompt_format = "rhythm v3"


@pytest.mark.parametrize("observe", ["noisy", "answers-only"])
def test_a_v4_student_reads_unknowns_as_unknown_and_every_answer_after_its_step(observe):
    """A v4 student is trained on weeks with ? for what nobody observed: it must read the
    simulator's missing readings as ?, not as carried-forward numbers, with the condition on
    the obs line and every answer of the week after its step."""
    model = _V4Script(default=format_output(spec.SOCIALIZE, (0.6, 0.4, 0.5)))
    policy = StudentPolicy(model)
    play_episodes(policy, [3], feedback=True, observe=observe)
    assert policy.llm.invalid_outputs == 0 and len(model.calls) == 28
    last = model.prompts[-1]
    assert last.startswith(f"rhythm v4\nobs {observe}\nday 0\n") and "nan" not in last.lower()
    lines = last.splitlines()
    fb = [i for i, x in enumerate(lines) if x.startswith("fb ")]
    assert len(fb) == 27  # every answer so far, not only the last 16
    assert all(lines[i].split()[1] == "SOCIALIZE" and lines[i].split()[2] in ("accepted", "ignored") for i in fb)
    assert all(lines[i - 1].split(":")[0] in spec.SLOTS for i in fb)  # each right after its step
    steps = [x for x in lines if x.split(":")[0] in spec.SLOTS and " m " in x]
    unknown = sum(x.count("?") for x in steps)
    if observe == "answers-only":
        assert all(" m ? ? ? ? ? " in x for x in steps)
    assert unknown > 0


def test_a_student_of_a_retired_format_is_refused():
    with pytest.raises(ValueError, match="'rhythm v3' was retired"):
        StudentPolicy(_V3Script(default=format_output(spec.SOCIALIZE, (0.6, 0.4, 0.5))))


@pytest.mark.slow
@pytest.mark.parametrize("observe", ["clean", "noisy"])
def test_a_v4_student_is_given_the_filter_before_every_decision(observe):
    """A v4 student reads the Bayesian filter's line before each decision: the traits'
    medians move as the week is read, and where a meter is not shown the line gives the
    estimate the plan starts from."""
    model = _V4Script(default=format_output(spec.SOCIALIZE, (0.6, 0.4, 0.5)))
    policy = StudentPolicy(model)
    play_episodes(policy, [5], feedback=observe != "clean", observe=observe)
    assert policy.llm.invalid_outputs == 0 and len(model.calls) == 28
    for k, prompt in enumerate(model.prompts):
        lines = prompt.splitlines()
        assert lines[-2].startswith("b ") and sum(x.startswith("b ") for x in lines) == k + 1
    b = [x for x in model.prompts[-1].splitlines() if x.startswith("b ")]
    assert len({x.split(" m ")[0] for x in b}) > 5  # the belief is read, not fixed
    if observe == "noisy":
        assert any(" m " in x for x in b)  # some meter missing: the estimate is given
    else:
        assert not any(" m " in x for x in b)


@pytest.mark.ml
@needs_llama_cpp
def test_evaluate_plays_a_v4_gguf_through_the_student_policy(tmp_path):
    from lab.people.tiny_gguf import build_tiny_gguf
    from training.evaluate import make_student

    path, _ = build_tiny_gguf(tmp_path / "tiny-v4.gguf", metadata={"rhythm.prompt_format": "rhythm v4"})
    policy, stats = make_student(str(path), 2048)
    assert isinstance(policy, StudentPolicy) and policy.reads_filter
    play_episodes(policy, [2], feedback=False, observe="clean")
    s = stats()
    assert s["decisions"] == 28 and s["invalid_outputs"] == 0
