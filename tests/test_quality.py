"""Quality gates that run with the suite: ruff, the import-direction contract, CLI docs."""

from __future__ import annotations

import ast
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


#: The ml extra's packages, and the test helpers and training functions that need them.
ML_MODULES = {"torch", "transformers", "peft", "tokenizers", "safetensors", "gguf", "llama_cpp"}
ML_NAMES = {
    "tiny_gguf", "build_tiny_gguf", "train_tokenizer", "build_model", "GrammarDecoder", "needs_llama_cpp",
}


def _marks(decorators) -> set[str]:
    """The pytest marks a decorator list (or a pytestmark value) names: pytest.mark.X -> X."""
    found = set()
    for node in decorators:
        for sub in ast.walk(node):
            if (isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Attribute)
                    and sub.value.attr == "mark"):
                found.add(sub.attr)
    return found


def _needs_ml(node) -> str | None:
    """Why the code under ``node`` needs the ml extra (an import, an importorskip, a helper
    that trains a tokenizer, builds a model or a GGUF), or None."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Import):
            hit = [a.name for a in sub.names if a.name.split(".")[0] in ML_MODULES]
            if hit:
                return f"imports {hit[0]}"
        elif isinstance(sub, ast.ImportFrom) and (sub.module or "").split(".")[0] in ML_MODULES:
            return f"imports {sub.module}"
        elif (isinstance(sub, ast.Call) and getattr(sub.func, "attr", None) == "importorskip"
              and sub.args and isinstance(sub.args[0], ast.Constant)
              and str(sub.args[0].value).split(".")[0] in ML_MODULES):
            return f"needs {sub.args[0].value}"
        elif isinstance(sub, ast.Name) and sub.id in ML_NAMES:
            return f"uses {sub.id}"
        elif isinstance(sub, ast.arg) and sub.arg in ML_NAMES:
            return f"uses {sub.arg}"
    return None


def test_every_test_that_needs_the_ml_extra_is_marked_ml():
    """STYLE rule 19: `make test` runs without the ml extra, so a test that imports torch,
    llama.cpp, gguf or tokenizers, or uses a helper that does, carries the ``ml`` mark (on
    itself or its module's ``pytestmark``)."""
    offenders = []
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        tree = ast.parse(path.read_text())
        module_marks = set()
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in node.targets):
                module_marks |= _marks([node.value])
        if "ml" in module_marks:
            continue
        rel = path.relative_to(REPO)
        for node in tree.body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                if any(n.split(".")[0] in ML_MODULES for n in names):
                    offenders.append(f"{rel}:{node.lineno}: the module imports {names[0]}")
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                why = _needs_ml(node)
                if why and "ml" not in _marks(node.decorator_list):
                    offenders.append(f"{rel}:{node.lineno}: {node.name} {why}")
            elif not isinstance(node, ast.FunctionDef | ast.ClassDef | ast.Import | ast.ImportFrom) and (
                why := _needs_ml(node)
            ):
                offenders.append(f"{rel}:{node.lineno}: the module {why}")  # e.g. a module-level importorskip
    assert offenders == []
