"""Shared by the training scripts: args dataclasses on the command line, seeding, the
output folder every stage writes (``args.json`` + ``manifest.json``: git commit, versions,
input data hashes), so that each artefact says how it was made (STYLE rule 11), and quiet
logs (transformers, peft, llama.cpp).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import platform
import random
import subprocess
import sys
import time
import typing
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

#: A stage's progress callback: ``(stage, done, total)`` (total None when unknown).
Progress = Callable[[str, float, float | None], None]
A = TypeVar("A")

REPO_ROOT = Path(__file__).resolve().parents[1]


def help_field(default: Any, help: str, **kw: Any) -> Any:
    """A dataclass field with one line of help (shown by ``--help``)."""
    if isinstance(default, list | dict):
        return dataclasses.field(
            default_factory=lambda: type(default)(default), metadata={"help": help}, **kw
        )
    return dataclasses.field(default=default, metadata={"help": help}, **kw)


def parse_args(cls: type[A], argv: list[str] | None = None, description: str | None = None) -> A:
    """``cls`` (an args dataclass) from the command line: one ``--flag`` per field."""
    p = argparse.ArgumentParser(
        description=description or cls.__doc__,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        flag = "--" + f.name.replace("_", "-")
        kind, is_list = _base_type(hint)
        if kind is bool:
            p.add_argument(
                flag,
                action=argparse.BooleanOptionalAction,
                default=default,
                help=f.metadata.get("help", ""),
            )
        elif is_list:
            p.add_argument(
                flag, nargs="*", type=kind, default=default, help=f.metadata.get("help", "")
            )
        else:
            p.add_argument(flag, type=kind, default=default, help=f.metadata.get("help", ""))
    ns = p.parse_args(argv)
    return cls(**vars(ns))


def _base_type(hint: Any) -> tuple[type, bool]:
    origin = typing.get_origin(hint)
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if origin in (list, tuple):
        return (args[0] if args else str), True
    if args and origin is not None:  # Optional[X] / X | None
        return _base_type(args[0])
    return (hint if isinstance(hint, type) else str), False


def seed_everything(seed: int) -> None:
    """Seed Python, numpy and (when installed) torch."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    os.environ["PYTHONHASHSEED"] = str(seed)
    try:
        import torch
    except ImportError:  # pragma: no cover - the ml extra is missing
        return
    torch.manual_seed(seed)


def git_commit() -> dict[str, Any]:
    """The repository's HEAD commit and whether the tree has uncommitted changes (read-only)."""

    def run(*cmd: str) -> str | None:
        try:
            out = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    status = run("git", "status", "--porcelain", "--untracked-files=no")
    return {
        "commit": run("git", "rev-parse", "HEAD"),
        "dirty": bool(status) if status is not None else None,
    }


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for mod in ("numpy", "torch", "transformers", "tokenizers", "peft", "gguf", "llama_cpp"):
        m = sys.modules.get(mod)
        if m is not None:
            out[mod] = str(getattr(m, "__version__", "?"))
    return out


def prepare_output(
    out: str | Path, stage: str, args: Any, inputs: Iterable[str | Path] = ()
) -> Path:
    """Create the stage's output folder and record ``args.json`` and ``manifest.json``
    (stage, git commit, host, library versions, sha256 of every input file)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "args.json").write_text(
        json.dumps(dataclasses.asdict(args), indent=2, default=str) + "\n"
    )
    data = {}
    for p in inputs:
        p = Path(p)
        if p.is_file():
            data[str(p)] = {"sha256": sha256_file(p), "bytes": p.stat().st_size}
    manifest = {
        "stage": stage,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "git": git_commit(),
        "host": {"machine": platform.machine(), "cpus": os.cpu_count()},
        "versions": _versions(),
        "inputs": data,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return out


def finish_output(
    out: str | Path, summary: dict[str, Any], outputs: Iterable[str | Path] = ()
) -> None:
    """Add the stage's summary and the sha256 of its output files to ``manifest.json``."""
    out = Path(out)
    path = out / "manifest.json"
    manifest = json.loads(path.read_text()) if path.exists() else {}
    manifest["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    manifest["summary"] = summary
    manifest["outputs"] = {
        str(p): {"sha256": sha256_file(p), "bytes": Path(p).stat().st_size}
        for p in map(Path, outputs)
        if p.is_file()
    }
    path.write_text(json.dumps(manifest, indent=2, default=str) + "\n")


def quiet_libraries() -> None:
    """No progress bars or advisory warnings from transformers/peft in the stages' logs."""
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning)
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # pragma: no cover - the ml extra is missing
        return
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


_SILENT: list = []


def silence_llama_cpp() -> None:
    """Route llama.cpp's C logging (quantize tables, loader dumps) to nowhere."""
    import ctypes

    import llama_cpp

    if not _SILENT:
        _SILENT.append(llama_cpp.llama_log_callback(lambda level, text, user: None))
        llama_cpp.llama_log_set(_SILENT[0], ctypes.c_void_p())


def no_progress(stage: str, done: float, total: float | None) -> None:
    """The default progress callback: nothing."""


def log(msg: str) -> None:
    """A timestamped line on stderr (scripts only; the CLI passes a progress callback)."""
    sys.stderr.write(time.strftime("%H:%M:%S ") + msg + "\n")
    sys.stderr.flush()


def args_from(cls: type[A], overrides: dict[str, Any] | None = None) -> A:
    """``cls()`` with ``overrides`` (values may be strings, converted to the field's type;
    lists as comma-separated strings). Unknown names are a ValueError."""
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    values: dict[str, Any] = {}
    for key, raw in (overrides or {}).items():
        name = key.replace("-", "_")
        if name not in names:
            raise ValueError(
                f"unknown setting {key!r} for {cls.__name__}; known: {', '.join(sorted(names))}"
            )
        kind, is_list = _base_type(hints[name])
        if isinstance(raw, str):
            if is_list:
                values[name] = [kind(x) for x in raw.split(",") if x != ""]
            elif kind is bool:
                values[name] = raw.strip().lower() in ("1", "true", "yes", "on")
            else:
                values[name] = kind(raw)
        else:
            values[name] = raw
    return cls(**values)
