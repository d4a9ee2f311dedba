"""Damaged model files are refused in one line (issue 41): a truncated or blanked `--base`
for `train refine` (checked before anything else, with or without the ml extra), and a
refined model that is not whole is never installed over the one in place, nor loaded."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from agent.gguf_check import check_model_file
from common.errors import ModelError
from rhythm.ask_model import choose_backend, product_model_path, refined_model_path
from rhythm.refine import check_installable
from rhythm.settings import load_settings
from tests.hostile.conftest import Sealed, snapshot

BUNDLED = Path(__file__).resolve().parents[2] / "rhythm" / "models" / "student-real-q8_0.gguf"
pytestmark = pytest.mark.skipif(not BUNDLED.is_file(), reason="no bundled student in this checkout")


def damaged(how: Callable[[bytes], bytes]) -> Callable[[Path], Path]:
    def build(d: Path) -> Path:
        p = d / "base.gguf"
        p.write_bytes(how(BUNDLED.read_bytes()))
        return p

    return build


def version(b: bytes, v: int) -> bytes:
    return b[:4] + struct.pack("<I", v) + b[8:]


def counts(b: bytes) -> bytes:
    return b[:8] + struct.pack("<Q", 1 << 40) + b[16:]


BAD = [
    ("truncated-to-half", damaged(lambda b: b[: len(b) // 2]), "truncated GGUF: its tensors need"),
    ("truncated-by-one-byte", damaged(lambda b: b[:-1]), "truncated GGUF: its tensors need"),
    ("truncated-in-the-header", damaged(lambda b: b[:300]), r"truncated GGUF \(the header ends early"),
    ("second-half-zeroed", damaged(lambda b: b[: len(b) // 2] + bytes(len(b) - len(b) // 2)), "tensors are all zeros"),
    ("not-a-gguf", damaged(lambda b: b"PK\x03\x04" + b[4:]), "not a GGUF file"),
    ("empty", damaged(lambda b: b""), "not a GGUF file|truncated"),
    ("version-99", damaged(lambda b: version(b, 99)), "GGUF version 99"),
    ("tensor-count-2-to-the-40", damaged(counts), "damaged GGUF header"),
]


@pytest.mark.parametrize(("case", "build", "says"), BAD, ids=[b[0] for b in BAD])
def test_train_refine_refuses_a_damaged_base_in_one_line(case, build, says, sealed: Sealed):
    import re

    base = build(sealed.input)
    before = snapshot(sealed.db)
    rc, _out, err = sealed.run_cli("train", "refine", "--base", base)
    lines = [x for x in err.splitlines() if x.strip()]
    assert rc != 0 and len(lines) == 1 and lines[0].startswith("error: ") and re.search(says, lines[0]), err
    assert not refined_model_path(load_settings()).exists()
    assert snapshot(sealed.db) == before


def test_a_damaged_refined_model_is_refused_and_never_loaded(sealed: Sealed, tmp_path):
    zeroed = damaged(lambda b: b[: len(b) // 2] + bytes(len(b) - len(b) // 2))(tmp_path)
    with pytest.raises(ModelError, match="tensors are all zeros"):
        check_installable(zeroed, BUNDLED)
    check_model_file(BUNDLED, like=BUNDLED)  # the bundled one is whole
    settings = load_settings()
    installed = refined_model_path(settings)
    installed.parent.mkdir(parents=True, exist_ok=True)
    installed.write_bytes(zeroed.read_bytes())  # damaged after install (a half-written copy)
    backend, path = choose_backend(settings)
    assert path != installed
    if backend == "llm":
        assert path == product_model_path()
