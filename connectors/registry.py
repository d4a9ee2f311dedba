"""The sources Rhythm knows: one line per connector package.

A connector is one folder (``connectors/<name>/``) whose ``__init__`` declares what it
offers in ``SOURCES``: file imports (``FileImport``: ``rhythm import NAME PATH``) and API
syncs (``ApiSync``: ``rhythm sync NAME``). Adding a source is that folder plus one line in
``PACKAGES``: the CLI's import and sync commands, the job runner, the daemon, ``rhythm
status`` and the raw payload table (``raw_<record_source>``, made on first write) follow
from the descriptor.

Descriptors name their functions as ``"module:function"`` strings, resolved only when used,
so listing the sources stays cheap (the CLI builds its commands from them at start-up).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from common.errors import ConfigError

PACKAGES: list[str] = [
    "connectors.healthkit",
    "connectors.whoop",
    "connectors.calendar",
    "connectors.garmin",
    "connectors.oura",
    "connectors.hae",
    "connectors.tasks",
]


@dataclass(frozen=True)
class FileImport:
    """``rhythm import NAME PATH``: a reader ``read_export(path, progress=None, **options)``."""

    name: str  # the CLI word
    label: str  # shown to people ("Apple Health")
    reader: str  # "module:function"
    help: str  # one line: what the command imports
    path_help: str  # what PATH may be
    record_source: str  # the `source` of the rows it writes (raw_<record_source>)
    options: Mapping[str, str] = field(default_factory=dict)  # reader keyword -> setting name
    # The reader takes window_start / window_end (recurring calendar series): the job passes
    # a window that covers the configured one and the stored wearable data, whatever its year.
    data_window: bool = False


@dataclass(frozen=True)
class SyncContext:
    """What an API sync opener gets: plain values, no app objects."""

    setting: Callable[[str], Any]  # a setting's value by name (e.g. "whoop_api_base")
    tokens: Any  # a connectors.oauth.TokenStore
    tokens_dir: Path
    policy: Any  # a connectors.http.RetryPolicy
    cursors: Mapping[str, str | None]
    now: datetime | None = None


@dataclass(frozen=True)
class ApiSync:
    """``rhythm sync NAME``: ``open(ctx) -> (records iterator, close())`` (records include
    ``connectors.checkpoint.Checkpoint`` markers that move a stream's cursor)."""

    name: str
    label: str
    opener: str  # "module:function"
    authorised: str  # "module:function": (ctx) -> bool, credentials are stored
    default_stream: str  # the stream a failure is noted on before any cursor exists
    record_source: str
    settings: Mapping[str, Any] = field(default_factory=dict)  # extra settings: "<name>_<key>" -> default


Descriptor = FileImport | ApiSync


def resolve(spec: str) -> Callable[..., Any]:
    """The function a ``"module:function"`` string names."""
    module, _, func = spec.partition(":")
    return getattr(importlib.import_module(module), func)


def _descriptors() -> Iterator[Descriptor]:
    for pkg in PACKAGES:
        mod = importlib.import_module(pkg)
        yield from getattr(mod, "SOURCES", ())


def file_imports() -> dict[str, FileImport]:
    """Every file import, by CLI name, in registry order."""
    return {d.name: d for d in _descriptors() if isinstance(d, FileImport)}


def api_syncs() -> dict[str, ApiSync]:
    """Every API sync, by CLI name, in registry order."""
    return {d.name: d for d in _descriptors() if isinstance(d, ApiSync)}


def file_import(name: str) -> FileImport:
    imports = file_imports()
    if name not in imports:
        raise ConfigError(f"unknown file source {name!r}; choose from {', '.join(imports)}")
    return imports[name]


def api_sync(name: str) -> ApiSync:
    syncs = api_syncs()
    if name not in syncs:
        raise ConfigError(f"unknown source {name!r}; choose from {', '.join(syncs)}")
    return syncs[name]


def declared_settings() -> dict[str, Any]:
    """Settings API sources declare beyond the built-in ones: name -> default."""
    out: dict[str, Any] = {}
    for d in api_syncs().values():
        out.update(d.settings)
    return out
