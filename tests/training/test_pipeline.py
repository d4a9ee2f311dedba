"""The distillation pipeline (training.pipeline) end to end on a tiny budget: teacher
rollouts -> dataset and tokenizer -> SFT -> LoRA -> GGUF f16/Q8_0/Q4_0 with the parity check
-> three-condition evaluation; and its settings."""

from __future__ import annotations

import json

import numpy as np
import pytest

from simulator import spec
from training.common import args_from


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
