"""Quality gates that run with the suite: ruff, the import-direction contract, CLI docs."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import typer

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    path = BIN / name
    return str(path) if path.exists() else (shutil.which(name) or name)


def test_ruff_is_clean():
    proc = subprocess.run([_tool("ruff"), "check", "."], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_import_direction_contracts_hold():
    """STYLE rule 1: nothing imports `rhythm`; training -> agent -> simulator; simulator alone."""
    proc = subprocess.run([_tool("lint-imports")], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "BROKEN" not in proc.stdout and "KEPT" in proc.stdout


def _leaf_commands(cmd, prefix: tuple[str, ...] = ()):
    if getattr(cmd, "commands", None):
        for name, sub in cmd.commands.items():
            yield from _leaf_commands(sub, prefix + (name,))
    else:
        yield prefix, cmd


def test_every_command_has_help_and_is_in_the_readme():
    from rhythm.cli.main import app

    root = typer.main.get_command(app)
    readme = (REPO / "README.md").read_text()
    table = "\n".join(line for line in readme.splitlines() if line.startswith("|"))
    documented = set(re.findall(r"`rhythm ([a-z][a-z -]*?)(?: \[| [A-Z]| -|`)", table))
    leaves = list(_leaf_commands(root))
    assert len(leaves) >= 5
    for path, cmd in leaves:
        name = " ".join(path)
        assert (cmd.help or "").strip(), f"`rhythm {name}` has no help text"
        for param in cmd.params:
            if param.param_type_name == "option" and not getattr(param, "hidden", False):
                assert (param.help or "").strip(), f"`rhythm {name}` option {param.opts} has no help"
        assert any(d.strip() == name for d in documented), f"`rhythm {name}` is missing from the README command table"


def test_shared_vocabulary_matches_the_simulator():
    """common/ and simulator/ each spell the actions and slots (the simulator imports nothing
    from the project); they must agree, in the same order, for ids to mean the same thing."""
    from common import records
    from simulator import spec

    assert tuple(records.ACTIONS) == tuple(spec.ACTIONS)
    assert tuple(records.SLOTS) == tuple(spec.SLOTS)


def test_only_storage_touches_the_database_connection():
    """STYLE rule 6: storage owns the connection; everything else calls its functions."""
    offenders = []
    for path in sorted(REPO.glob("*/**/*.py")):
        rel = path.relative_to(REPO)
        if rel.parts[0] in ("storage", "tests", ".venv", "build") or rel.parts[0].startswith("."):
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"\.con\b|duckdb\.connect\(", line):
                offenders.append(f"{rel}:{i}: {line.strip()}")
    assert offenders == []


def test_no_script_folder_shadows_a_standard_library_module():
    """A script runs with its own folder first on sys.path: benchmarks/calendar.py once hid
    the standard `calendar` module from every other benchmark."""
    import sys

    for folder in ("benchmarks", "scripts"):
        here = Path(__file__).resolve().parent.parent / folder
        clash = sorted(p.stem for p in here.glob("*.py") if p.stem in sys.stdlib_module_names)
        assert clash == [], f"{folder}/: {clash} shadow the standard library"
