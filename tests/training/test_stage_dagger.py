"""Stage 3b, DAgger (training.dagger): the student plays the week, the teacher labels it."""

from __future__ import annotations

import numpy as np
import pytest

from agent.prompting import format_output
from simulator import spec
from simulator.env import RhythmEnv


def test_dagger_week_is_played_by_the_student_and_labelled_by_the_teacher():
    from agent.lab.llm_policy import LLMPolicy
    from agent.runtime import ScriptedModel
    from training.dagger import relabel_week
    from training.weeks import teacher_policy

    student = LLMPolicy(ScriptedModel(default="SLEEP b=.10,.20,.30"))
    teacher = teacher_policy("bayes")
    rec = relabel_week(student, teacher, RhythmEnv(), seed=21, condition="in-dist")
    assert rec["student_actions"] == [spec.SLEEP] * spec.EPISODE_STEPS
    assert rec["student_beliefs"] == [[0.1, 0.2, 0.3]] * spec.EPISODE_STEPS
    # the week is the student's: every observation follows a SLEEP
    assert all(o["last_action"] == spec.SLEEP for o in rec["observations"][1:])
    # the labels are the teacher's answers on those same observations
    teacher.reset(21)
    again = [teacher.act(o) for o in rec["observations"][:-1]]
    assert rec["actions"] == [int(a) for a, _ in again]
    # (the stored observations are rounded to 6 decimals: beliefs agree to ~1e-4)
    assert np.allclose(rec["beliefs"], [b for _, b in again], atol=2e-3)
    assert len(set(rec["actions"])) > 1  # the teacher would not sleep all week


@pytest.mark.ml
def test_dagger_sequence_trains_the_teacher_answer_after_the_students_history():
    import torch

    from agent.lab.llm_policy import LLMPolicy
    from agent.prompting import render_compact
    from agent.runtime import ScriptedModel
    from training.batches import forward_hidden
    from training.dagger import relabel_week
    from training.dataset import encode_record, episode_text, train_tokenizer
    from training.sft import Args, build_model
    from training.tokens import EOS
    from training.weeks import teacher_policy

    outputs = [format_output(k % spec.N_ACTIONS, (0.1, 0.2, 0.3)) for k in range(28)]
    rec = relabel_week(
        LLMPolicy(ScriptedModel(outputs)), teacher_policy("bayes"), RhythmEnv(), 22, "in-dist"
    )
    text = episode_text(rec)
    assert text.count(" b=.10,.20,.30") == spec.EPISODE_STEPS  # the context: the student's
    tok = train_tokenizer([text], 600)
    ids, mask, hide = encode_record(tok, rec, text, "rhythm v1")
    assert sorted(set(hide[hide > 0].tolist())) == list(range(1, 29))
    assert tok.decode(ids[mask == 1].tolist()) == "".join(
        format_output(a, b) for a, b in zip(rec["actions"], rec["beliefs"], strict=True)
    )
    assert tok.decode(ids[hide == 0][1:].tolist()) == text  # hidden spans out: the played week
    eos = tok.token_to_id(EOS)
    torch.manual_seed(1)
    model = build_model(
        Args(layers=2, hidden=64, ffn=128, heads=2, kv_heads=2), tok.get_vocab_size(), eos
    ).eval()
    starts = [i for i in range(1, len(mask)) if mask[i] and not mask[i - 1]]
    with torch.no_grad():
        full = model.lm_head(
            forward_hidden(
                model, torch.tensor(ids[None]).long(), torch.tensor(hide[None].astype(np.int64))
            )
        )[0]
        for t in (0, 5, 27):
            prompt = render_compact(
                rec["observations"][: t + 1], None, [tuple(b) for b in rec["student_beliefs"][:t]]
            )
            logits = model(input_ids=torch.tensor([[eos, *tok.encode(prompt).ids]])).logits[0, -1]
            assert torch.allclose(logits, full[starts[t] - 1], atol=1e-4)
