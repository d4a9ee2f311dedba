"""One error hierarchy for the whole project (STYLE rule 14).

Library code raises these; the CLI turns them into one clear line in one place.
"""

from __future__ import annotations


class RhythmError(Exception):
    """Base of every error Rhythm raises on purpose. `str(err)` is the user-facing line."""

    exit_code: int = 1


class ConfigError(RhythmError):
    """Settings or config.toml are invalid."""

    exit_code = 2


class StorageError(RhythmError):
    """The database could not be opened, migrated or written."""


class DatabaseBusy(StorageError):
    """Another process holds the database's write lock."""

    exit_code = 75  # EX_TEMPFAIL: try again later


class ReadOnlyViolation(StorageError):
    """A write statement was sent through a read-only path (e.g. `rhythm sql`)."""

    exit_code = 2


class SourceError(RhythmError):
    """Base for errors reading a data source (file or API)."""


class SourceFormatError(SourceError):
    """An input file is malformed: truncated zip, bad XML, corrupt FIT, missing CSV columns.

    The message names the file and, where known, the position.
    """

    def __init__(self, path: str, detail: str, position: str | None = None):
        self.path = str(path)
        self.detail = detail
        self.position = position
        where = f"{self.path}" + (f" ({position})" if position else "")
        super().__init__(f"{where}: {detail}")


class AuthError(SourceError):
    """Credentials missing, expired or rejected."""


class RateLimited(SourceError):
    """The API kept answering 429 beyond the retry budget."""


class ApiError(SourceError):
    """The API failed (5xx storm, unexpected status) beyond the retry budget."""


class ModelError(RhythmError):
    """A local model could not be loaded or produced no valid output."""
