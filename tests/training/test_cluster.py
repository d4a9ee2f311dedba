"""The lab on a Ray runtime (``--ray``, training/executors.py): the same files and figures as
the local path, a worker killed mid-run costs only its unit, an interrupted run resumes.

Every Ray run is a child process with its own local runtime (``--ray local``, or
ray_scenarios.py): Ray's core ends the process it runs in when its runtime fails, and a CI
run's pytest process once ended mid-module without a word. Here such a failure is one failed
test with Ray's own words. Slow (make test-all): a runtime starts per run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.training.ray_scenarios import SEEDS, cut_args, units
from training.rollouts import Args, _worker, main
from training.weeks import write_weeks

pytest.importorskip("ray")
pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
SCENARIOS = Path(__file__).with_name("ray_scenarios.py")


def _child(*argv, timeout: int = 300) -> subprocess.CompletedProcess:
    """A child process of this checkout (PYTHONPATH: it and the Ray workers it starts)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    return subprocess.run([sys.executable, *map(str, argv)], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=timeout)


def _rhythm_on_ray(*args) -> subprocess.CompletedProcess:
    return _child("-m", "rhythm", *args, "--ray", "local")


def _bytes(folder: Path) -> bytes:
    return (folder / "rollouts.jsonl").read_bytes()


@pytest.mark.parametrize("shaped", [False, True])
def test_rollouts_on_ray_are_the_local_file(run_cli, tmp_path, shaped):
    extra = ["--set", "shaped=true", "--set", "feedback_share=0.3"] if shaped else []
    common = ["train", "rollouts", "--episodes", "6", "--teacher", "bayes", *extra]
    code, _, err = run_cli(*common, "--out", tmp_path / "local", "--set", "workers=1")
    assert code == 0, err
    child = _rhythm_on_ray(*common, "--out", tmp_path / "ray")
    assert child.returncode == 0, child.stderr
    assert _bytes(tmp_path / "ray") == _bytes(tmp_path / "local")
    assert len(_bytes(tmp_path / "ray").splitlines()) == 6
    assert not (tmp_path / "ray" / "rollouts.jsonl.units").exists()


def test_streams_on_ray_are_the_local_file(run_cli, tmp_path):
    common = ["train", "streams", "--people", "2", "--seed-start", "7", "--json"]
    code, out_local, err = run_cli(*common, "--out", tmp_path / "local")
    assert code == 0, err
    child = _rhythm_on_ray(*common, "--out", tmp_path / "ray")
    assert child.returncode == 0, child.stderr
    assert _bytes(tmp_path / "ray") == _bytes(tmp_path / "local")
    local, on_ray = json.loads(out_local), json.loads(child.stdout)
    local.pop("seconds"), on_ray.pop("seconds")
    assert on_ray == local and on_ray["weeks"] >= 2


@pytest.mark.parametrize(
    "argv",
    [
        ["--policy", "bayes", "--condition", "in-dist", "--episodes", "30"],
        ["--policy", "heuristic", "--condition", "all", "--episodes", "30"],
        ["--policy", "heuristic", "--condition", "ood", "--episodes", "26", "--world", "effects"],
        ["--policy", "bayes-calendar", "--episodes", "26", "--calendar"],
    ],
)
def test_sim_eval_on_ray_gives_the_local_figures(run_cli, argv):
    code, local, err = run_cli("sim", "eval", *argv, "--json")
    assert code == 0, err
    child = _rhythm_on_ray("sim", "eval", *argv, "--json")
    assert child.returncode == 0, child.stderr
    local, on_ray = json.loads(local), json.loads(child.stdout)
    assert on_ray == local  # every figure, to the last digit
    assert sum(r["episodes"] for r in on_ray["results"].values()) >= 26


def test_a_worker_killed_mid_run_costs_only_its_unit(tmp_path):
    local = tmp_path / "local.jsonl"
    write_weeks(local, _worker, units(), 1, "grade", lambda n: None)
    child = _child(SCENARIOS, "killed", tmp_path)
    assert child.returncode == 0, child.stderr
    assert (tmp_path / "died").exists()  # the worker did die
    path = tmp_path / "ray.jsonl"
    lines = path.read_text().splitlines()
    assert [json.loads(line)["seed"] for line in lines] == SEEDS  # complete, no duplicates
    assert path.read_bytes() == local.read_bytes()


def test_an_interrupted_ray_run_resumes_from_its_units(tmp_path):
    whole = main(Args(out=str(tmp_path / "whole"), episodes=25, teacher="heuristic", workers=1))
    cut = _child(SCENARIOS, "cut", tmp_path)
    assert cut.returncode == 3, cut.stderr  # the interrupt came through
    units_dir = Path(cut_args(tmp_path).out) / "rollouts.jsonl.units"
    assert 1 <= len(list(units_dir.glob("0*.jsonl"))) < 3
    assert not (tmp_path / "cut" / "rollouts.jsonl").exists()
    resumed = _child(SCENARIOS, "resume", tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert _bytes(tmp_path / "cut") == whole.read_bytes()
    assert not units_dir.exists()
