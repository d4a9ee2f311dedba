"""The distillation pipeline: its pieces (targets, masks, grammar decoding, settings) and
every stage end to end on a tiny budget (teacher rollouts -> dataset and tokenizer -> SFT ->
LoRA -> GGUF f16/Q8_0/Q4_0 with the parity check -> three-condition evaluation)."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

from agent.prompting import format_output, parse_output
from simulator import spec
from simulator.env import RhythmEnv
from simulator.policies import HeuristicPolicy
from training.common import args_from
from training.rollouts import play_episode

ML = all(
    importlib.util.find_spec(m)
    for m in ("torch", "transformers", "tokenizers", "peft", "gguf", "llama_cpp")
)
needs_ml = pytest.mark.skipif(not ML, reason="needs the ml extra")


@pytest.fixture(scope="module")
def records():
    env = RhythmEnv()
    return [play_episode(HeuristicPolicy(), env, s, "heuristic", "in-dist") for s in (11, 12, 13)]


def _with_beliefs(rec, rng):
    rec = dict(rec)
    rec["beliefs"] = [list(np.round(rng.uniform(0, 1, 3), 2)) for _ in rec["actions"]]
    return rec


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


def test_targets_are_the_28_answers(records):
    from training.dataset import episode_text, target_spans

    rec = _with_beliefs(records[0], np.random.default_rng(0))
    text = episode_text(rec)
    answers = [text[a:b] for a, b in target_spans(text)]
    assert answers == [
        format_output(a, b) for a, b in zip(rec["actions"], rec["beliefs"], strict=True)
    ]
    assert all(parse_output(x).valid for x in answers)


def test_episode_without_beliefs_has_answers_without_belief_and_no_targets(records):
    from training.dataset import episode_text, target_spans

    assert target_spans(episode_text(records[0])) == []  # the heuristic emits no belief


@needs_ml
def test_mask_covers_exactly_the_answer_tokens(records):
    from training.dataset import encode_episode, episode_text, train_tokenizer
    from training.tokens import EOS

    rng = np.random.default_rng(1)
    recs = [_with_beliefs(r, rng) for r in records]
    texts = [episode_text(r) for r in recs]
    tok = train_tokenizer(texts, 600)
    ids, mask, hide = encode_episode(tok, texts[0])
    assert ids[0] == tok.token_to_id(EOS) and len(ids) == len(mask) == len(hide)
    assert tok.decode(ids[1:].tolist()) == texts[0]
    masked = tok.decode(ids[mask == 1].tolist())
    assert masked == "".join(
        format_output(a, b) for a, b in zip(recs[0]["actions"], recs[0]["beliefs"], strict=True)
    )
    # the numbered spans are exactly the 28 beliefs, in order, inside the answers (mark_stale)
    assert texts[0].startswith("rhythm v1\n")
    assert sorted(set(hide[hide > 0].tolist())) == list(range(1, spec.EPISODE_STEPS + 1))
    assert np.all(mask[hide > 0] == 1)
    for k, b in enumerate(recs[0]["beliefs"], start=1):
        assert tok.decode(ids[hide == k].tolist()) == " " + format_output(0, b).split(" ", 1)[1]


def test_hidden_belief_layout_positions_and_mask():
    pytest.importorskip("torch")
    from training.batches import hidden_belief_layout

    # tokens: a a [1 1] c c [2] d  (two belief spans)
    hide = np.array([[0, 0, 1, 1, 0, 0, 2, 0]])
    pos, allowed = hidden_belief_layout(hide)
    assert pos[0].tolist() == [0, 1, 2, 3, 2, 3, 4, 4]
    a = allowed[0, 0].numpy()
    assert a.shape == (8, 8) and not a[np.triu_indices(8, 1)].any()  # causal
    assert a[3, 2] and not a[4, 2] and not a[4, 3] and not a[7, 6] and a[6, 6]
    assert a[7].tolist() == [True, True, False, False, True, True, False, True]
    no_spans, plain = hidden_belief_layout(np.zeros((2, 5), dtype=int))
    assert no_spans.tolist() == [list(range(5))] * 2 and plain[:, 0].numpy().sum() == 2 * 15


@needs_ml
def test_grammar_decoder_only_allows_valid_answers(records):
    from training.dataset import episode_text, train_tokenizer
    from training.student import GrammarDecoder

    rng = np.random.default_rng(2)
    tok = train_tokenizer([episode_text(_with_beliefs(r, rng)) for r in records], 600)
    dec = GrammarDecoder(tok)
    (space_b,) = tok.encode(" b").ids
    (comma,) = tok.encode(",").ids
    logits = np.zeros(tok.get_vocab_size())
    logits[space_b] = 10.0  # the best token is not allowed first
    first = dec.pick("", logits)
    assert any(a.startswith(dec.strings[first]) for a in spec.ACTIONS)
    assert first != space_b and dec.allowed("SLEEP", space_b)
    assert not dec.allowed("SLEEP b=.5", comma)
    assert dec.complete("SLEEP b=.50,1.00,.07") and not dec.complete("SLEEP b=.50,1.00,.0")


def test_args_from_converts_strings_and_refuses_unknown_names():
    from training.sft import Args

    a = args_from(Args, {"layers": "2", "bf16": "false", "lr": "0.01"})
    assert (a.layers, a.bf16, a.lr) == (2, False, 0.01)
    from training.export import Args as ExportArgs

    assert args_from(ExportArgs, {"quants": "q8_0,q4_0"}).quants == ["q8_0", "q4_0"]
    with pytest.raises(ValueError, match="unknown setting"):
        args_from(Args, {"nope": 1})


def test_smoke_models_are_never_shipped(tmp_path):
    from training import pipeline

    with pytest.raises(ValueError, match="never shipped"):
        pipeline.main(pipeline.Args(budget="smoke", out=str(tmp_path), ship=True))


@pytest.mark.slow
@pytest.mark.ml
@needs_ml
def test_every_stage_on_the_smoke_budget(tmp_path):
    """The default recipe (v4): weeks shaped like the product's, with the teacher's filter at
    every step -> v4 dataset -> SFT with a prefix curriculum -> LoRA -> GGUF files that say
    they read v4 -> evaluation (the students run the filter)."""
    from agent.runtime import LlamaCppModel
    from training import pipeline

    out = tmp_path / "smoke"
    seen: set[str] = set()
    summary = pipeline.main(pipeline.Args(budget="smoke", out=str(out)), lambda s, d, t: seen.add(s))
    assert {"rollouts", "dataset", "sft", "refine", "export", "evaluate"} <= seen
    assert not {"dagger", "read", "probe"} & seen

    # 1. shaped weeks: clean ones and real-shaped ones, each with the teacher's answers
    recs = [json.loads(x) for x in (out / "rollouts" / "rollouts.jsonl").read_text().splitlines()]
    assert len(recs) == 6 and {r["format"] for r in recs} == {"rhythm-rollouts/2"}
    assert {r["shape"]["kind"] for r in recs} == {"clean", "product"}
    assert all(any(a is not None for a in r["answers"]) for r in recs)
    assert all(len(r["filters"]) == len(r["answers"]) for r in recs)  # the filter at every step

    # 2. the v4 dataset: answers inserted and hidden (hide numbers them), fixed slots unlabelled
    stats = json.loads((out / "dataset" / "stats.json").read_text())
    assert stats["prompt_format"] == "rhythm v4" and stats["answers_per_episode_min"] >= 1
    assert "\nb ." in stats["example"]
    with np.load(out / "dataset" / "train.npz") as z:
        assert "hide" in z.files and ((z["mask"] > 0) == (z["hide"] > 0)).all()

    # 3. SFT from scratch with the curriculum; the checkpoint reads v4
    ck = json.loads((out / "sft" / "checkpoint" / "checkpoint.json").read_text())
    assert ck["prompt_format"] == "rhythm v4" and ck["args"]["curriculum"] == [4, 28]
    assert pipeline.final_checkpoint(out) == out / "sft" / "checkpoint"

    # 4-5. the LoRA on one person's weeks (in v4), and GGUF files that say they read v4
    pstats = json.loads((out / "person" / "dataset" / "stats.json").read_text())
    assert pstats["prompt_format"] == "rhythm v4"
    assert (out / "person" / "lora" / "adapter" / "adapter_model.safetensors").exists()
    parity = json.loads((out / "export" / "parity.json").read_text())
    assert parity["files"]["f32"]["action_agreement"] == 1.0
    assert LlamaCppModel(out / "export" / "student-q8_0.gguf").prompt_format == "rhythm v4"

    # 6. the three-condition table with the v4 students (PyTorch and GGUF: each runs the filter)
    assert all(set(r) == set(spec.CONDITIONS) for r in summary["results"].values())
    assert "| student q8_0 |" in (out / "eval" / "results.md").read_text()


@pytest.mark.slow
@pytest.mark.ml
@needs_ml
def test_every_stage_of_the_v1_recipe_on_its_smoke_budget(tmp_path, capsys):
    from training import pipeline

    out = tmp_path / "smoke"
    seen: set[str] = set()
    summary = pipeline.main(
        pipeline.Args(budget="smoke-v1", out=str(out)), lambda s, d, t: seen.add(s)
    )
    assert {"rollouts", "dataset", "sft", "dagger", "probe", "refine", "export"} <= seen
    assert "evaluate" in seen

    # 1. teacher rollouts (the Bayesian agent) with beliefs and grades
    lines = (out / "rollouts" / "rollouts.jsonl").read_text().splitlines()
    rec = json.loads(lines[0])
    assert (
        len(lines) == 6 and rec["teacher"] == "bayes" and all(b is not None for b in rec["beliefs"])
    )
    manifest = json.loads((out / "rollouts" / "manifest.json").read_text())
    assert manifest["git"]["commit"] and manifest["outputs"]

    # 2. dataset and tokenizer: 28 answers per episode
    stats = json.loads((out / "dataset" / "stats.json").read_text())
    assert stats["answers_per_episode_min"] == 28 and stats["tokens_per_episode_max"] < 1400

    # 3. SFT: loss went down, the checkpoint describes itself
    ck = json.loads((out / "sft" / "checkpoint" / "checkpoint.json").read_text())
    assert ck["format"] == "rhythm-student/1" and ck["config"]["hidden_size"] % 32 == 0
    losses = [
        float(line.split(",")[4])
        for line in (out / "sft" / "loss.csv").read_text().splitlines()[1:]
    ]
    assert losses[-1] < losses[0]
    assert (out / "sft" / "loss.png").stat().st_size > 1000

    # 3b. DAgger: the student's own weeks, labelled by the teacher, then more SFT from stage 3
    weeks = [
        json.loads(x) for x in (out / "dagger" / "weeks" / "dagger.jsonl").read_text().splitlines()
    ]
    assert len(weeks) == 2 and all(len(w["student_actions"]) == 28 for w in weeks)
    dstats = json.loads((out / "dagger" / "dataset" / "stats.json").read_text())
    assert dstats["dagger_episodes"] + 6 >= dstats["episodes"] >= 6
    dck = json.loads((out / "dagger" / "sft" / "checkpoint" / "checkpoint.json").read_text())
    assert dck["args"]["init_from"].endswith("sft/checkpoint")

    # 3c. the reading stage: on from the DAgger checkpoint, blinded weeks, growing prefixes;
    # the run ends with it
    rck = json.loads((out / "read" / "checkpoint" / "checkpoint.json").read_text())
    assert rck["args"]["init_from"].endswith("dagger/sft/checkpoint")
    assert rck["args"]["blind_fraction"] == 1.0 and rck["args"]["curriculum"] == [2, 28]
    assert pipeline.final_checkpoint(out) == out / "read" / "checkpoint"

    # reading probe of the final checkpoint: errors per step, shown and blinded
    probe = json.loads((out / "probe" / "summary.json").read_text())
    assert probe["weeks"] == 2 and set(probe["last_step_mean"]) == {
        "shown",
        "blind",
        "teacher",
        "constant",
    }
    rows = (out / "probe" / "probe.csv").read_text().splitlines()
    assert len(rows) == 1 + spec.EPISODE_STEPS and (out / "probe" / "probe.png").exists()
    # the same probe through the CLI, on the stage 3 checkpoint
    from typer.testing import CliRunner

    from rhythm.cli.train import app

    res = CliRunner().invoke(
        app,
        [
            "probe",
            "--checkpoint",
            str(out / "sft" / "checkpoint"),
            "--data",
            str(out / "dataset"),
            "--out",
            str(tmp_path / "probe3"),
            "--set",
            "threads=1",
        ],
    )
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "probe3" / "summary.json").read_text())["weeks"] == 2
    from rhythm.cli import main as rhythm_main

    capsys.readouterr()
    bad = ["train", "probe", "--checkpoint", str(out / "sft" / "checkpoint"), "--data"]
    assert rhythm_main([*bad, str(tmp_path), "--out", str(tmp_path / "p4")]) != 0
    err = capsys.readouterr().err.strip()
    assert "has no val.npz" in err and len(err.splitlines()) == 1

    # 4. the LoRA adapter
    assert (out / "person" / "lora" / "adapter" / "adapter_model.safetensors").exists()

    # 5. export: every file loads in llama.cpp, and the unquantized ones agree with PyTorch
    parity = json.loads((out / "export" / "parity.json").read_text())
    assert set(parity["files"]) == {"f32", "f16", "q8_0", "q4_0"}
    assert all(f["valid"] == 1.0 for f in parity["files"].values())
    assert parity["files"]["f32"]["action_agreement"] == 1.0
    # the quantized file still says which prompt format it reads (stage 2's default, v1)
    from agent.runtime import LlamaCppModel

    assert stats["prompt_format"] == "rhythm v1" and ck["prompt_format"] == "rhythm v1"
    assert LlamaCppModel(out / "export" / "student-q4_0.gguf").prompt_format == "rhythm v1"
    assert (
        parity["files"]["q4_0"]["bytes"]
        < parity["files"]["q8_0"]["bytes"]
        < parity["files"]["f32"]["bytes"]
    )

    # 6. evaluation: every policy under the three conditions, the report and the plot
    results = summary["results"]
    assert {
        "random",
        "heuristic",
        "bayes",
        "student pytorch",
        "student q8_0",
        "student q4_0",
    } <= set(results)
    assert all(set(r) == set(spec.CONDITIONS) for r in results.values())
    md = (out / "eval" / "results.md").read_text()
    assert "| student q8_0 |" in md and "do not edit by hand" in md
    assert (out / "eval" / "final_scores.png").exists()


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


@needs_ml
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


@needs_ml
def test_pytorch_decoder_takes_the_median_belief_number_like_llama_cpp(records):
    from training.dataset import episode_text, train_tokenizer
    from training.student import GrammarDecoder

    rng = np.random.default_rng(4)
    numbers = " ".join(f".{k:02d}" for k in range(100))
    tok = train_tokenizer(
        [episode_text(_with_beliefs(r, rng)) for r in records] + [numbers] * 20, 700
    )
    dec = GrammarDecoder(tok)
    assert dec.digits is not None
    logits = np.full(tok.get_vocab_size(), -30.0)
    logits[dec.digits[5]] = np.log(0.4)  # the mode
    logits[dec.digits[70:80]] = np.log(0.06)  # 60% of the mass
    assert dec.pick("SLEEP b=.", logits) == dec.digits[5]  # greedy: the mode
    assert dec.pick("SLEEP b=.", logits, belief_median=True) in set(dec.digits[70:80].tolist())
    assert dec.pick("SLEEP b=.42,.", logits, belief_median=True) in set(dec.digits[70:80].tolist())
    # not a number position: unchanged
    assert dec.pick("SLEE", logits, belief_median=True) == dec.pick("SLEE", logits)


def test_stale_stretches_freeze_earlier_beliefs_and_end_on_the_teachers():
    from training.dataset import stale_beliefs

    rng = np.random.default_rng(0)
    teacher = [tuple(np.round(rng.uniform(0, 1, 3), 2)) for _ in range(spec.EPISODE_STEPS)]
    for seed in range(40):
        shown, stale, corrections = stale_beliefs(teacher, np.random.default_rng(seed))
        assert len(shown) == spec.EPISODE_STEPS and corrections
        assert set(stale).isdisjoint(corrections)
        assert max(corrections) <= spec.EPISODE_STEPS - 1
        for k in range(spec.EPISODE_STEPS):
            if k not in stale:
                assert shown[k] == teacher[k]  # every target is the teacher's belief
            else:
                assert all(0.0 <= x <= 1.0 for x in shown[k])
        stretches = np.split(np.array(stale), np.flatnonzero(np.diff(stale) > 1) + 1)
        assert [int(s[-1]) + 1 for s in stretches] == corrections  # each ends on a correction
        for s in stretches:
            assert len({shown[k] for k in s}) == 1  # frozen inside a stretch
            assert 2 <= len(s) <= 10
    # the perturbation moves the frozen belief away from the last good one (sd 0.12)
    moved = [
        np.abs(np.subtract(sh[st[0]], teacher[st[0] - 1])).mean()  # first stretch
        for sh, st, _ in (stale_beliefs(teacher, np.random.default_rng(s)) for s in range(40))
        if st[0] > 0
    ]
    assert 0.03 < np.mean(moved) < 0.2


@needs_ml
def test_stale_beliefs_are_context_and_the_correction_is_a_weighted_target(records):
    from training.dataset import (
        encode_episode,
        episode_text,
        mark_stale,
        stale_beliefs,
        train_tokenizer,
    )
    from training.tokens import CORRECTION

    rng = np.random.default_rng(2)
    rec = _with_beliefs(records[0], rng)
    shown, stale, corrections = stale_beliefs(rec["beliefs"], np.random.default_rng(5))
    text = episode_text({**rec, "beliefs": shown})
    tok = train_tokenizer([text, episode_text(rec)], 600)
    ids, mask, hide = encode_episode(tok, text)
    marked = mark_stale(mask, hide, stale, corrections)
    assert np.all(marked[mask == 0] == 0)
    for k in range(spec.EPISODE_STEPS):
        span = hide == k + 1
        want = 0 if k in stale else CORRECTION if k in corrections else 1
        assert np.all(marked[span] == want), k
    assert tok.decode(ids[marked == CORRECTION].tolist()) == "".join(
        " " + format_output(0, rec["beliefs"][k]).split(" ", 1)[1] for k in corrections
    )
    # every action stays a target, stale step or not
    actions = tok.decode(ids[(marked == 1) & (hide == 0)].tolist())
    assert actions == "".join(spec.ACTIONS[a] for a in rec["actions"])


@needs_ml
def test_correction_weight_scales_the_loss_of_corrected_beliefs():
    import torch

    from training.batches import masked_loss
    from training.sft import Args, build_model
    from training.tokens import CORRECTION

    torch.manual_seed(0)
    model = build_model(Args(layers=1, hidden=32, ffn=64, heads=2, kv_heads=2), 50, 0)
    ids = torch.randint(1, 50, (2, 12))
    mask = torch.zeros(2, 12, dtype=torch.long)
    mask[:, 3:6] = 1
    mask[:, 8:10] = CORRECTION
    plain, n = masked_loss(model, ids, mask)
    same, _ = masked_loss(model, ids, mask, correction_weight=1.0)
    heavy, _ = masked_loss(model, ids, mask, correction_weight=3.0)
    with torch.no_grad():
        logits = model(input_ids=ids).logits[:, :-1]
        per = torch.nn.functional.cross_entropy(
            logits.transpose(1, 2), ids[:, 1:], reduction="none"
        )
        m = mask[:, 1:]
        w = (m > 0).float() * torch.where(m == CORRECTION, 3.0, 1.0)
        want = (per * w).sum() / w.sum()
        want_plain = per[m > 0].mean()
    assert n == 10
    assert torch.isclose(plain, want_plain, atol=1e-5) and torch.equal(plain, same)
    assert torch.isclose(heavy, want, atol=1e-5) and not torch.isclose(heavy, plain)


def test_belief_trace_measures_each_step_against_the_truth(tmp_path):
    from training.belief_trace import Args, main, trace

    truth = [[0.2, 0.5, 0.9], [0.8, 0.5, 0.1]]
    weeks = []
    for t in truth:
        teacher = [[0.5, 0.5, 0.5], t, t]  # learns the person at the second step
        student = [[0.5, 0.5, 0.5], [0.5, 0.5, 0.5], None]  # never moves, then no belief
        weeks.append({"belief_truth": t, "beliefs": teacher, "student_beliefs": student})
    tr = trace(weeks)
    assert np.allclose(tr["teacher"][0], [0.3, 0.0, 0.4]) and np.allclose(tr["teacher"][1:], 0)
    assert np.allclose(tr["student"][1], [0.3, 0.0, 0.4]) and np.isnan(tr["student"][2]).all()
    assert np.allclose(tr["constant"], [0.3, 0.0, 0.4])  # the median of two is their middle
    assert np.allclose(tr["student_change"][0], 0.0)
    path = tmp_path / "weeks.jsonl"
    path.write_text("\n".join(json.dumps(w) for w in weeks) + "\n")
    out = main(Args(weeks=str(path), out=str(tmp_path / "trace")))
    assert (out / "trace.png").stat().st_size > 0
    rows = (out / "trace.csv").read_text().splitlines()
    assert len(rows) == 1 + 3 and rows[0].startswith("step,student_social")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["teacher_belief_mae"] == 0.0
    with pytest.raises(ValueError, match="no weeks"):
        trace([])


def test_next_beliefs_give_every_token_the_answer_it_leads_to():
    from training.dataset import next_beliefs

    # tokens: p p [a a] p [a] p p   (two answers)
    mask = np.array([0, 0, 1, 2, 0, 1, 0, 0], dtype=np.uint8)
    out = next_beliefs(mask, [[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]])
    assert out.dtype == np.float16 and out.shape == (8, 3)
    assert np.allclose(out[:4], [0.1, 0.2, 0.3], atol=1e-3)
    assert np.allclose(out[4:6], [0.4, 0.5, 0.6], atol=1e-3)
    assert np.isnan(out[6:]).all()
    assert np.isnan(next_beliefs(mask, [[0.1, 0.2, 0.3]])).all()  # answers and beliefs disagree
    assert np.isnan(next_beliefs(mask, [None, [0.4, 0.5, 0.6]])[:4]).all()


@needs_ml
def test_aux_loss_is_the_squared_error_of_the_belief_head():
    import torch

    from training.sft import aux_loss

    torch.manual_seed(0)
    head = torch.nn.Linear(4, 3)
    hidden = torch.randn(1, 3, 4)
    targets = torch.tensor([[[0.2, 0.4, 0.6], [float("nan")] * 3, [0.9, 0.1, 0.5]]])
    got = aux_loss(head, hidden, targets)
    pred = head(hidden[0, [0, 2]]).sigmoid()
    assert torch.isclose(got, ((pred - targets[0, [0, 2]]) ** 2).mean())
    assert aux_loss(head, hidden, torch.full((1, 3, 3), float("nan"))) == 0


def test_blinded_weeks_show_another_weeks_beliefs_in_the_input_only(records):
    from training.dataset import encode_episode, episode_text, train_tokenizer
    from training.tokens import BeliefTokens, belief_positions, blind_beliefs, donor_beliefs

    rng = np.random.default_rng(4)
    recs = [_with_beliefs(r, rng) for r in records[:3]]
    recs[0]["beliefs"][7] = [1.0, 0.5, 0.5]  # written 1.00: not a two-digit belief
    texts = [episode_text(r) for r in recs]
    numbers = " ".join(f"b=.{k:02d},.{99 - k:02d}" for k in range(100))
    tok = train_tokenizer(texts + [numbers] * 3, 600)
    enc = [encode_episode(tok, t)[0] for t in texts]
    n = max(len(e) for e in enc)
    ids = np.zeros((3, n), dtype=np.int64)
    lengths = np.array([len(e) for e in enc])
    for r, i in enumerate(enc):
        ids[r, : len(i)] = i
    bt = BeliefTokens.of(tok)
    found = [belief_positions(ids[r, : lengths[r]], bt) for r in range(3)]
    pos, at = found[0]
    assert 7 not in at and len(at) >= spec.EPISODE_STEPS - 2
    for p, k in zip(pos, at, strict=True):
        if max(recs[0]["beliefs"][k]) < 1.0:
            got = [int(tok.id_to_token(int(ids[0, q]))) / 100 for q in p]
            assert got == [float(f"{b:.2f}") for b in recs[0]["beliefs"][k]]

    donor = donor_beliefs(ids[2, : lengths[2]], bt, spec.EPISODE_STEPS)
    p2, at2 = found[2]
    assert np.array_equal(donor[at2], ids[2][p2])
    out = blind_beliefs(ids, lengths, np.array([0]), [donor], bt, np.random.default_rng(1))
    assert np.array_equal(out[1:], ids[1:])  # rows not chosen are untouched
    for p, k in zip(pos[:-1], at[:-1], strict=True):  # the donor's belief of the same step
        assert np.array_equal(out[0, p], donor[k] if donor[k, 0] >= 0 else ids[0, p])
    assert np.array_equal(out[0, pos[-1]], ids[0, pos[-1]])  # the last belief is kept
    others = np.ones(n, dtype=bool)
    others[pos.ravel()] = False
    assert np.array_equal(out[0, others], ids[0, others])  # nothing else changes
    text = tok.decode(out[0, : lengths[0]].tolist())
    lines = [ln.split(":", 1)[1] for ln in text.splitlines() if ln.split(":")[0] in spec.SLOTS]
    for k in (0, 10, 26):  # the week reads as a valid week with the donor's beliefs
        got = parse_output(" ".join(lines[k].split()[:2]))
        assert got.action_id == recs[0]["actions"][k]
        if max(recs[2]["beliefs"][k]) < 1.0:
            assert np.allclose(got.belief, recs[2]["beliefs"][k])


@needs_ml
def test_masked_loss_predicts_the_labels_not_the_blinded_input():
    import torch

    from training.batches import masked_loss
    from training.sft import Args, build_model

    torch.manual_seed(0)
    model = build_model(Args(layers=1, hidden=32, ffn=64, heads=2, kv_heads=2), 50, 0)
    labels = torch.randint(1, 50, (1, 12))
    mask = torch.zeros(1, 12, dtype=torch.long)
    mask[:, 4:8] = 1
    ids = labels.clone()
    ids[0, 5] = (labels[0, 5] + 1) % 50
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, :-1]
        per = torch.nn.functional.cross_entropy(logits, labels[0, 1:], reduction="none")
        want = per[3:7].mean()
        got, n = masked_loss(model, ids, mask, labels=labels)
        plain, _ = masked_loss(model, ids, mask)
    assert n == 4 and torch.isclose(got, want, atol=1e-5) and not torch.isclose(got, plain)


def test_curriculum_cuts_keep_the_first_k_steps_and_only_their_answers(records):
    from training.batches import batch_tensors, bucketed
    from training.dataset import encode_episode, episode_text, train_tokenizer
    from training.sft import prefix_lengths

    rng = np.random.default_rng(6)
    recs = [_with_beliefs(r, rng) for r in records[:2]]
    texts = [episode_text(r) for r in recs]
    tok = train_tokenizer(texts, 600)
    enc = [encode_episode(tok, t) for t in texts]
    n = max(len(e[0]) for e in enc)
    split = {
        "ids": np.zeros((2, n), dtype=np.int32),
        "mask": np.zeros((2, n), dtype=np.uint8),
        "lengths": np.array([len(e[0]) for e in enc], dtype=np.int32),
    }
    for r, (i, m, _) in enumerate(enc):
        split["ids"][r, : len(i)], split["mask"][r, : len(m)] = i, m
    cuts = prefix_lengths(split, tok)
    assert np.array_equal(cuts[:, -1], split["lengths"])
    assert np.all(np.diff(cuts[:, 1:], axis=1) > 0)
    for k in (1, 5, 27):
        text = tok.decode(split["ids"][0, : cuts[0, k]].tolist())
        lines = [ln for ln in text.splitlines() if ln.split(":", 1)[0] in spec.SLOTS]
        assert len(lines) == k and lines[-1].endswith(text.splitlines()[-1])
        assert lines[-1].split(":", 1)[1].startswith(spec.ACTIONS[recs[0]["actions"][k - 1]])
    ids, mask, _ = batch_tensors(split, np.array([0, 1]), cuts[:, 5])
    assert ids.shape[1] == bucketed(int(cuts[:, 5].max()), n) >= cuts[:, 5].max()
    for r in range(2):
        answers = tok.decode(ids[r][mask[r] > 0].tolist())
        want = "".join(
            format_output(a, b)
            for a, b in zip(recs[r]["actions"][:5], recs[r]["beliefs"][:5], strict=True)
        )
        assert answers == want


def test_batches_are_cut_to_a_few_shapes_and_keep_every_target():
    """A batch is cut to its longest week rounded up to LENGTH_BUCKET (few shapes for the CPU
    kernels' caches), never past the array, and the padding carries no target."""
    from training.batches import LENGTH_BUCKET, batch_tensors

    rng = np.random.default_rng(3)
    width = 7 * LENGTH_BUCKET + 5
    lengths = rng.integers(20, width + 1, size=40).astype(np.int32)
    lengths[0] = width
    split = {"ids": np.zeros((40, width), np.int32), "mask": np.zeros((40, width), np.uint8), "lengths": lengths}
    for r, n in enumerate(lengths):
        split["ids"][r, :n] = rng.integers(1, 100, size=n)
        split["mask"][r, :n] = rng.random(n) < 0.3
    shapes = set()
    for _ in range(200):
        idx = np.sort(rng.choice(40, size=4, replace=False))
        ids, mask, _ = batch_tensors(split, idx)
        longest = int(lengths[idx].max())
        assert longest <= ids.shape[1] < longest + LENGTH_BUCKET
        assert ids.shape[1] % LENGTH_BUCKET == 0 or ids.shape[1] == width
        assert int(mask.sum()) == int(split["mask"][idx].sum())
        assert np.array_equal(ids.numpy()[:, :longest], split["ids"][idx, :longest])
        shapes.add(ids.shape[1])
    assert len(shapes) <= width // LENGTH_BUCKET + 1


@needs_ml
def test_action_errors_count_each_weeks_wrong_actions_and_focus_draws_only_those(records, tmp_path):
    """Per week, the actions a model gets wrong teacher-forced (what SFT's --focus draws
    from) match a step-by-step count on the week's own prompt tokens, and add up to the
    validation action accuracy; --focus keeps only the weeks with an error, weighted by
    their number."""
    import torch

    from training.batches import action_errors, evaluate_split, forward_hidden
    from training.dataset import encode_episode, episode_text, train_tokenizer
    from training.sft import Args, build_model, hard_weeks
    from training.tokens import EOS

    rng = np.random.default_rng(5)
    recs = [_with_beliefs(r, rng) for r in records]
    tok = train_tokenizer([episode_text(r) for r in recs], 600)
    encoded = [encode_episode(tok, episode_text(r)) for r in recs]
    width = max(len(e[0]) for e in encoded)

    def padded(k):
        return np.stack([np.pad(e[k], (0, width - len(e[k]))) for e in encoded])

    split = {
        "ids": padded(0),
        "mask": padded(1),
        "hide": padded(2),
        "lengths": np.array([len(e[0]) for e in encoded]),
    }
    torch.manual_seed(2)
    model = build_model(
        Args(layers=2, hidden=64, ffn=128, heads=2, kv_heads=2),
        tok.get_vocab_size(),
        tok.token_to_id(EOS),
    ).eval()
    expected = []
    with torch.no_grad():
        for ids, mask, hide in encoded:
            x = torch.tensor(ids[None]).long()
            logits = model.lm_head(forward_hidden(model, x, torch.tensor(hide[None])))[0]
            starts = [i for i in range(1, len(mask)) if mask[i] and not mask[i - 1]]
            expected.append(sum(int(logits[s - 1].argmax()) != int(ids[s]) for s in starts))
    assert len(starts) == spec.EPISODE_STEPS
    errors = action_errors(model, split, np.array([2, 0, 1]), 2, bf16=False)
    assert errors.tolist() == [expected[2], expected[0], expected[1]]
    assert sum(expected) > 0  # an untrained model errs, so the count is not vacuous
    acc = evaluate_split(model, split, 2, bf16=False)["val_action_acc"]
    assert acc == pytest.approx(1 - sum(expected) / (3 * spec.EPISODE_STEPS))

    args = Args(focus=0.5, focus_weeks=0, init_from="x", batch_size=2, bf16=False)
    weeks, p = hard_weeks(model, split, args, np.random.default_rng(0), lambda *a: None)
    hard = [w for w in range(3) if expected[w]]
    assert weeks.tolist() == hard
    assert p.tolist() == pytest.approx([expected[w] / sum(expected) for w in hard])
    none, _ = hard_weeks(model, split, Args(), np.random.default_rng(0), lambda *a: None)
    assert len(none) == 0
    with pytest.raises(ValueError, match="init-from"):
        hard_weeks(model, split, Args(focus=0.5), np.random.default_rng(0), lambda *a: None)

    from training import sft

    data = tmp_path / "data"
    data.mkdir()
    for name in ("train", "val"):
        np.savez(data / f"{name}.npz", **split)
    tok.save(str(data / "tokenizer.json"))
    model.save_pretrained(tmp_path / "init")
    run = Args(data=str(data), out=str(tmp_path / "sft"), init_from=str(tmp_path / "init"))
    run.focus, run.focus_weeks, run.batch_size, run.steps, run.eval_every = 0.5, 0, 2, 3, 3
    ck = sft.main(run)
    rows = (tmp_path / "sft" / "loss.csv").read_text().splitlines()[1:]
    assert len(rows) == 3 and (ck / "model.safetensors").exists()
