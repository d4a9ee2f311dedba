"""Shared test set-up: every test gets its own RHYTHM_HOME; no test touches ~/.rhythm."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO.parent / "shared" / "fixtures"


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("rhythm_home")
    monkeypatch.setenv("RHYTHM_HOME", str(home))
    for var in list(os.environ):
        if var.startswith("RHYTHM_") and var != "RHYTHM_HOME":
            monkeypatch.delenv(var, raising=False)
    yield home


@pytest.fixture
def rhythm_home(_isolated_home) -> Path:
    return _isolated_home


@pytest.fixture
def fixtures_dir() -> Path:
    if not FIXTURES.exists():
        pytest.fail(f"shared fixtures not found at {FIXTURES}")
    return FIXTURES


@pytest.fixture
def run_cli(capsys):
    """Run the real entry point in-process: returns (exit_code, stdout, stderr)."""
    from rhythm.cli import main

    def run(*args: str) -> tuple[int, str, str]:
        code = main([str(a) for a in args])
        out = capsys.readouterr()
        return code, out.out, out.err

    return run
