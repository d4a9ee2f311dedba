"""The command line starts light (issue 35): importing it loads neither the simulator's
evaluation, the agent, training, torch nor llama.cpp; the commands load what they need."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("simulator", "simulator.evaluate", "agent", "training", "torch", "llama_cpp", "numpy", "pyarrow")


def _loaded(code: str) -> dict[str, bool]:
    probe = f"import sys, json\n{code}\nprint(json.dumps({{m: m in sys.modules for m in {HEAVY!r}}}))"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_the_cli_loads_no_simulator_agent_training_or_model_runtime():
    loaded = _loaded("import rhythm.cli")
    assert [m for m, yes in loaded.items() if yes] == []


def test_the_status_command_module_loads_no_numpy_or_agent():
    loaded = _loaded("import rhythm.cli, rhythm.status")
    assert [m for m, yes in loaded.items() if yes] == []


def test_the_sim_commands_still_load_and_keep_the_simulators_world_name():
    from rhythm.cli import sim
    from simulator import worlds

    assert sim.NOMINAL == worlds.NOMINAL


def test_rhythm_sim_help_works(run_cli):
    code, out, err = run_cli("sim", "eval", "--help")
    assert code == 0, err
    assert "--policy" in out and "nominal" in out
