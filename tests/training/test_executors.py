"""Where the lab's units run (training/executors.py), without a Ray runtime: the local pool,
files written per unit and resumed after an interruption, and Ray kept optional (one line
without it, never loaded by the product). The Ray runtime itself: test_cluster.py (slow)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from training.executors import INSTALL_HINT, ClusterError, LocalPool, executor_for, unit_lines
from training.rollouts import Args, main

REPO = Path(__file__).resolve().parents[2]


def _unit(job: tuple[int, int, str]) -> list[str]:
    """Lines of one unit; records each call in ``calls`` and fails once on unit ``fail``."""
    first, n, folder = job
    calls = Path(folder)
    (calls / f"call-{first}-{len(list(calls.iterdir()))}").touch()
    if first == 20 and not (calls.parent / "failed-once").exists():
        (calls.parent / "failed-once").touch()
        raise RuntimeError("the machine went away")
    return [json.dumps({"seed": first + k, "square": (first + k) ** 2}) for k in range(n)]


@pytest.mark.parametrize("workers", [1, 2])
def test_the_local_pool_yields_every_unit_once_with_its_index(workers):
    units = list(range(7))
    seen: list[tuple[int, int]] = []
    got = dict(LocalPool(workers).map_units(abs, [-u for u in units], lambda d, t: seen.append((d, t))))
    assert got == {i: i for i in units}
    assert [d for d, _ in seen] == list(range(1, 8)) and {t for _, t in seen} == {7}


def test_an_interrupted_file_resumes_from_its_written_units_without_duplicates(tmp_path):
    calls = tmp_path / "calls"
    calls.mkdir()
    units = [(first, 3, str(calls)) for first in range(0, 40, 10)]
    path = tmp_path / "out.jsonl"
    with pytest.raises(RuntimeError, match="went away"):
        list(unit_lines(path, _unit, units, LocalPool(1)))
    assert not path.exists()  # no half file
    parts = sorted(p.name for p in (tmp_path / "out.jsonl.units").glob("*.jsonl"))
    assert parts == ["000000.jsonl", "000001.jsonl"]  # the two units before the failure
    finished: list[int] = []
    lines = list(unit_lines(path, _unit, units, LocalPool(1), finished.append))
    assert finished == [3, 3, 3, 3]
    seeds = [json.loads(line)["seed"] for line in lines]
    assert seeds == [f + k for f in range(0, 40, 10) for k in range(3)]  # complete, in order, once
    assert path.read_text().splitlines() == lines
    # units 0 and 10 ran once; 20 twice (the failure, then the re-run); 30 once
    ran = sorted(p.name.split("-")[1] for p in calls.iterdir())
    assert ran == ["0", "10", "20", "20", "30"]
    assert not (tmp_path / "out.jsonl.units").exists()


def test_a_changed_plan_starts_afresh(tmp_path):
    calls = tmp_path / "calls"
    calls.mkdir()
    (tmp_path / "failed-once").touch()
    path = tmp_path / "out.jsonl"
    parts = tmp_path / "out.jsonl.units"
    parts.mkdir()
    (parts / "plan.json").write_text("[[0, 99, \"elsewhere\"]]")
    (parts / "000000.jsonl").write_text('{"seed": -1}\n')  # another run's unit
    lines = list(unit_lines(path, _unit, [(0, 2, str(calls))], LocalPool(1)))
    assert [json.loads(x)["seed"] for x in lines] == [0, 1]


def test_rollouts_stopped_half_way_continue_to_the_same_file(tmp_path):
    whole = main(Args(out=str(tmp_path / "whole"), episodes=5, teacher="heuristic", workers=1))

    def stop_after_two_weeks(stage, done, total):
        if done >= 2:
            raise KeyboardInterrupt

    args = Args(out=str(tmp_path / "cut"), episodes=5, teacher="heuristic", workers=1)  # units of 1
    with pytest.raises(KeyboardInterrupt):
        main(args, stop_after_two_weeks)
    assert not (tmp_path / "cut" / "rollouts.jsonl").exists()
    kept = len(list((tmp_path / "cut" / "rollouts.jsonl.units").glob("0*.jsonl")))
    assert kept == 2
    seen: list[float] = []
    resumed = main(args, lambda stage, done, total: seen.append(done))
    assert seen[-1] == 5
    assert resumed.read_bytes() == whole.read_bytes()
    manifest = json.loads((tmp_path / "cut" / "manifest.json").read_text())
    assert manifest["summary"]["episodes"] == 5


def test_without_ray_the_command_says_how_to_get_it(run_cli, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as if not installed
    with pytest.raises(ClusterError, match=r"pip install 'rhythm\[cluster\]'"):
        executor_for("auto")
    for argv in (
        ("train", "rollouts", "--out", tmp_path / "r", "--episodes", "2", "--ray", "auto"),
        ("train", "streams", "--out", tmp_path / "s", "--people", "1", "--ray", "auto"),
        ("sim", "eval", "--policy", "heuristic", "--episodes", "2", "--ray", "auto"),
    ):
        code, out, err = run_cli(*argv)
        assert code == 1
        assert err.strip() == f"error: {INSTALL_HINT}"
    assert not (tmp_path / "r").exists() and not (tmp_path / "s" / "rollouts.jsonl").exists()


def test_the_product_and_the_lab_modules_load_without_ray():
    code = (
        "import sys; import rhythm.cli.main, rhythm.recommend, rhythm.jobs, training.rollouts, "
        "training.executors, lab.streams, agent.lab.eval_units; "
        "from rhythm.cli import main; main(['--help']); "
        "assert 'ray' not in sys.modules, 'ray was imported'"
    )
    res = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    assert res.returncode == 0, res.stderr


@pytest.mark.parametrize(
    ("policy", "condition", "world", "calendar"),
    [("heuristic", "discrete", "nominal", False), ("random", "ood", "effects", False),
     ("heuristic", "in-dist", "nominal", True)],
)
def test_sim_eval_in_units_gives_the_in_process_figures(policy, condition, world, calendar):
    from agent.lab.eval_units import evaluate_units
    from simulator.evaluate import evaluate

    seen: list[tuple[int, int]] = []
    got = evaluate_units(LocalPool(1).map_units, policy, condition, 7, 3, world, calendar,
                         progress=lambda d, t: seen.append((d, t)), unit_episodes=4)
    want = evaluate(policy, condition, 7, 3, world=world, calendar=calendar)
    assert got.to_dict() == want.to_dict()
    units = -(-want.episodes // 4)
    assert seen[-1] == (units, units)


def test_sim_eval_plays_units_only_for_a_registered_policys_plain_protocol(run_cli):
    code, _, err = run_cli("sim", "eval", "--policy", "bayes", "--feedback", "--workers", "2")
    assert code == 2
    flat = " ".join(err.replace("│", " ").split())  # typer's usage box wraps the line
    assert "--ray and --workers play a registered policy's plain protocol" in flat


@pytest.mark.slow
def test_sim_eval_on_local_workers_gives_the_in_process_figures(run_cli):
    argv = ("sim", "eval", "--policy", "bayes", "--condition", "ood", "--episodes", "30", "--json")
    code, local, err = run_cli(*argv)
    assert code == 0, err
    code, pooled, err = run_cli(*argv, "--workers", "2")
    assert code == 0, err
    assert json.loads(pooled) == json.loads(local)


def test_a_cluster_address_nobody_answers_is_one_line_at_once(run_cli, tmp_path):
    pytest.importorskip("ray")
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code, _, err = run_cli("train", "rollouts", "--out", tmp_path / "r", "--episodes", "2",
                           "--ray", f"127.0.0.1:{port}")
    assert code == 1
    assert err.startswith(f"error: Ray cluster '127.0.0.1:{port}': nothing answers at 127.0.0.1:{port}")
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "r").exists()
