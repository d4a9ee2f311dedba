"""Test glue for the tiny random-weight Llama GGUF (built by :mod:`lab.people.tiny_gguf`).

``tiny_gguf`` is a session fixture; ``needs_llama_cpp`` marks a test that runs a real GGUF.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from lab.people.tiny_gguf import build_tiny_gguf

HAVE_LLAMA_CPP = importlib.util.find_spec("llama_cpp") is not None
#: Marks for a test that runs a real GGUF: ``@needs_llama_cpp`` (skipped only when
#: llama-cpp-python is not installed; CI installs the ml extra, so there it runs).
needs_llama_cpp = pytest.mark.skipif(
    not HAVE_LLAMA_CPP,
    reason="llama-cpp-python is not installed (pip install -e '.[ml]'); CI runs these",
)


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory) -> Path:
    """A tiny random-weight Llama GGUF (f16, ~0.3 MB), built once per test session."""
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    path, _ = build_tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny.gguf")
    return path
