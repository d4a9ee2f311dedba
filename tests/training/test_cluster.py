"""The lab on a Ray runtime (``--ray``, training/executors.py): the same files and figures as
the local path, a worker killed mid-run costs only its unit, an interrupted run resumes.
A local Ray runtime with two CPUs per module: slow (make test-all)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from training.executors import RayExecutor
from training.rollouts import Args, _worker, main
from training.weeks import write_weeks

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
DIES_ON = 1_000_004  # the first seed of the unit whose worker dies once


@pytest.fixture(scope="module")
def ray_runtime():
    """A local Ray runtime (two CPUs) whose workers import this checkout."""
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), old) if p)
    ray.init(num_cpus=2, include_dashboard=False)
    try:
        yield
    finally:
        ray.shutdown()
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old


def _dies_once(job: tuple[tuple, str]) -> list[str]:
    """The rollouts' unit, except that the worker running seed DIES_ON's unit dies (the
    process ends, as when a machine goes away) the first time."""
    real, marker = job
    if real[0][0] == DIES_ON and not Path(marker).exists():
        Path(marker).touch()
        os._exit(1)
    return _worker(real)


def _bytes(folder: Path) -> bytes:
    return (folder / "rollouts.jsonl").read_bytes()


@pytest.mark.parametrize("shaped", [False, True])
def test_rollouts_on_ray_are_the_local_file(ray_runtime, run_cli, tmp_path, shaped):
    extra = ["--set", "shaped=true", "--set", "feedback_share=0.3"] if shaped else []
    common = ["train", "rollouts", "--episodes", "6", "--teacher", "bayes", *extra]
    code, _, err = run_cli(*common, "--out", tmp_path / "local", "--set", "workers=1")
    assert code == 0, err
    code, _, err = run_cli(*common, "--out", tmp_path / "ray", "--ray", "auto")
    assert code == 0, err
    assert _bytes(tmp_path / "ray") == _bytes(tmp_path / "local")
    assert len(_bytes(tmp_path / "ray").splitlines()) == 6
    assert not (tmp_path / "ray" / "rollouts.jsonl.units").exists()


def test_streams_on_ray_are_the_local_file(ray_runtime, run_cli, tmp_path):
    common = ["train", "streams", "--people", "2", "--seed-start", "7", "--json"]
    code, out_local, err = run_cli(*common, "--out", tmp_path / "local")
    assert code == 0, err
    code, out_ray, err = run_cli(*common, "--out", tmp_path / "ray", "--ray", "auto")
    assert code == 0, err
    assert _bytes(tmp_path / "ray") == _bytes(tmp_path / "local")
    local, on_ray = json.loads(out_local), json.loads(out_ray)
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
def test_sim_eval_on_ray_gives_the_local_figures(ray_runtime, run_cli, argv):
    code, local, err = run_cli("sim", "eval", *argv, "--json")
    assert code == 0, err
    code, on_ray, err = run_cli("sim", "eval", *argv, "--json", "--ray", "auto")
    assert code == 0, err
    local, on_ray = json.loads(local), json.loads(on_ray)
    assert on_ray == local  # every figure, to the last digit
    assert sum(r["episodes"] for r in on_ray["results"].values()) >= 26


def test_a_worker_killed_mid_run_costs_only_its_unit(ray_runtime, tmp_path):
    marker = tmp_path / "died"
    seeds = list(range(1_000_000, 1_000_010))
    real = [(seeds[i : i + 2], "bayes", "in-dist", "") for i in range(0, len(seeds), 2)]
    local = tmp_path / "local.jsonl"
    write_weeks(local, _worker, real, 1, "grade", lambda n: None)
    path = tmp_path / "ray.jsonl"
    done, scores, _ = write_weeks(
        path, _dies_once, [(r, str(marker)) for r in real], 1, "grade", lambda n: None,
        RayExecutor("auto"),
    )
    assert marker.exists()  # the worker did die
    lines = path.read_text().splitlines()
    assert [json.loads(line)["seed"] for line in lines] == seeds  # complete, no duplicates
    assert done == 10 and len(scores) == 10
    assert path.read_bytes() == local.read_bytes()


def test_an_interrupted_ray_run_resumes_from_its_units(ray_runtime, tmp_path):
    args = Args(out=str(tmp_path / "cut"), episodes=25, teacher="heuristic", ray="auto")
    whole = main(Args(out=str(tmp_path / "whole"), episodes=25, teacher="heuristic", workers=1))

    def stop_after_a_unit(stage, done, total):
        if done >= 10:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        main(args, stop_after_a_unit)
    units = tmp_path / "cut" / "rollouts.jsonl.units"
    assert 1 <= len(list(units.glob("0*.jsonl"))) < 3 and not (tmp_path / "cut" / "rollouts.jsonl").exists()
    resumed = main(args)
    assert resumed.read_bytes() == whole.read_bytes()
    assert not units.exists()
