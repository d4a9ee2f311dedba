"""Shared test set-up: every test gets its own RHYTHM_HOME; no test touches ~/.rhythm.

Test data: everything lives in tests/fixtures (`FIXTURES`, see its README and NOTICE.md);
the files no licence lets us copy are generated (lab/people/) once per session into a temporary folder
(`healthkit_xml`, `healthkit_zip`, `whoop_export`). Nothing is read from outside the repository.

The day's decider is set once here for every test: the Bayesian day planner
(RHYTHM_AGENT_BACKEND=bayes); a test of the local model asks for ``llm`` or ``auto`` itself.
Tests marked ``ml`` are skipped, not errors, where the ml extra is not installed (`make test`
deselects them anyway; `make test-all` installs the extra and runs them).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lab.people import healthkit, whoop
from tests.fixtures import FIXTURES


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("rhythm_home")
    monkeypatch.setenv("RHYTHM_HOME", str(home))
    for var in list(os.environ):
        if var.startswith("RHYTHM_") and var != "RHYTHM_HOME":
            monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("RHYTHM_AGENT_BACKEND", "bayes")
    yield home


@pytest.fixture
def rhythm_home(_isolated_home) -> Path:
    return _isolated_home


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture(scope="session")
def _generated(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("generated_fixtures")


@pytest.fixture(scope="session")
def healthkit_xml(_generated) -> Path:
    """A generated Apple Health export.xml (lab/people/healthkit.py)."""
    return healthkit.write_export_xml(_generated / "export.xml")


@pytest.fixture(scope="session")
def healthkit_zip(_generated) -> Path:
    """The same export as the Health app's export.zip, with two workout routes."""
    return healthkit.write_export_zip(_generated / "export.zip")


@pytest.fixture(scope="session")
def whoop_export(_generated) -> Path:
    """A generated WHOOP app CSV export folder (lab/people/whoop.py)."""
    folder = _generated / "whoop_export"
    whoop.write_export(folder)
    return folder


@pytest.fixture
def run_cli(capsys):
    """Run the real entry point in-process: returns (exit_code, stdout, stderr)."""
    from rhythm.cli import main

    def run(*args: str) -> tuple[int, str, str]:
        code = main([str(a) for a in args])
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


#: The ml extra (pyproject.toml): a test that needs any of it is marked ``ml``.
ML_EXTRA = ("torch", "transformers", "peft", "tokenizers", "safetensors", "gguf", "llama_cpp")


def pytest_collection_modifyitems(config, items):
    """Without the ml extra, the tests marked ``ml`` are skipped (with the reason), not run."""
    from importlib.util import find_spec

    if all(find_spec(m) is not None for m in ML_EXTRA):
        return
    skip = pytest.mark.skip(reason="needs the ml extra (pip install -e '.[ml]'); make test-all runs it")
    for item in items:
        if "ml" in item.keywords:
            item.add_marker(skip)
