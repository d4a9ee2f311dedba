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
    from training.dataset import EOS, encode_episode, episode_text, train_tokenizer

    rng = np.random.default_rng(1)
    recs = [_with_beliefs(r, rng) for r in records]
    texts = [episode_text(r) for r in recs]
    tok = train_tokenizer(texts, 600)
    ids, mask = encode_episode(tok, texts[0])
    assert ids[0] == tok.token_to_id(EOS) and len(ids) == len(mask)
    assert tok.decode(ids[1:].tolist()) == texts[0]
    masked = tok.decode(ids[mask == 1].tolist())
    assert masked == "".join(
        format_output(a, b) for a, b in zip(recs[0]["actions"], recs[0]["beliefs"], strict=True)
    )


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
    from training import pipeline

    out = tmp_path / "smoke"
    seen: set[str] = set()
    summary = pipeline.main(
        pipeline.Args(budget="smoke", out=str(out)), lambda s, d, t: seen.add(s)
    )
    assert {"rollouts", "dataset", "sft", "refine", "export", "evaluate"} <= seen

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

    # 4. the LoRA adapter
    assert (out / "person" / "lora" / "adapter" / "adapter_model.safetensors").exists()

    # 5. export: every file loads in llama.cpp, and the unquantized ones agree with PyTorch
    parity = json.loads((out / "export" / "parity.json").read_text())
    assert set(parity["files"]) == {"f32", "f16", "q8_0", "q4_0"}
    assert all(f["valid"] == 1.0 for f in parity["files"].values())
    assert parity["files"]["f32"]["action_agreement"] == 1.0
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
