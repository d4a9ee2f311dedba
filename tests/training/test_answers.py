"""Refining the shipped GGUF student on (prompt, answer) examples (training/answers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.lab.student_policy import simulator_student_path
from agent.prompting import OUTPUT_GBNF, format_output, parse_output, render_compact
from simulator.env import RhythmEnv
from tests.agent.gguf_fixture import needs_llama_cpp

pytest.importorskip("torch")
pytest.importorskip("peft")
pytestmark = [needs_llama_cpp, pytest.mark.ml, pytest.mark.slow]


def _prompts(seeds=(11, 12, 13)) -> list[str]:
    out = []
    for seed in seeds:
        env = RhythmEnv()
        obs, _ = env.reset(seed=seed)
        history = [obs]
        for a in (0, 1, 5, 3, 0, 1)[: 2 + seed % 4]:
            obs, *_ = env.step(a)
            history.append(obs)
        out.append(render_compact(history, None, [None] * (len(history) - 1)))
    return out


def _pick(path: Path, prompt: str) -> str:
    from agent.runtime import LlamaCppModel

    parsed = parse_output(LlamaCppModel(path, n_ctx=2048, n_threads=1).complete(prompt, grammar=OUTPUT_GBNF, max_tokens=24))
    assert parsed.valid
    return parsed.action


def test_the_refined_student_gives_the_answers_it_was_refined_on(tmp_path):
    from agent.prompting import GGUF_ACTION_BIAS_KEY
    from agent.runtime import LlamaCppModel
    from training.answers import (
        Example,
        RefineSettings,
        gguf_prompt_format,
        load_gguf_student,
        refine_gguf,
    )
    from training.gguf_writer import with_metadata

    # a base that carries an action bias (training.calibrate): the refined model keeps it
    base = with_metadata(simulator_student_path(), tmp_path / "base" / "student.gguf",
                         {GGUF_ACTION_BIAS_KEY: '{"BINGE_WATCH":-0.01}'})
    prompts = _prompts()
    before = [_pick(base, p) for p in prompts]
    target = "MEDITATE" if before.count("MEDITATE") == 0 else "LEARN"
    examples = [Example(p, format_output(target, (0.5, 0.5, 0.5))) for p in prompts]
    rep = refine_gguf(base, examples, tmp_path, RefineSettings(steps=25, lr=5e-3, batch_size=3))
    model = Path(rep["model"])
    assert model.is_file() and rep["examples"] == 3 and rep["steps"] == 25
    assert rep["answer_loss_after"] < rep["answer_loss_before"]
    assert gguf_prompt_format(model) == gguf_prompt_format(base)  # the format survives
    assert LlamaCppModel(model).action_bias() == {"BINGE_WATCH": -0.01}  # and the bias
    assert [_pick(model, p) for p in prompts] == [target] * 3
    assert before != [target] * 3
    # the refined GGUF reads back like the shipped one
    m, tok = load_gguf_student(model)
    assert m.config.num_hidden_layers == load_gguf_student(base)[0].config.num_hidden_layers
    assert tok.get_vocab_size() == load_gguf_student(base)[1].get_vocab_size()


def test_no_examples_is_an_error(tmp_path):
    from training.answers import refine_gguf

    with pytest.raises(ValueError, match="no examples"):
        refine_gguf(simulator_student_path(), [], tmp_path)


@pytest.mark.parametrize("weight", [0.0, -0.5, 1.5])
def test_an_example_weight_outside_zero_one_is_refused(tmp_path, weight):
    from training.answers import Example, refine_gguf

    with pytest.raises(ValueError, match="weight"):
        refine_gguf(simulator_student_path(), [Example("rhythm v1\n", "a=0", weight)], tmp_path / "out")
