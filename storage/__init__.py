"""Storage: the DuckDB file, its migrations, views and writers. Owns the connection.

The writers (``storage.writer``: pyarrow) load on first use, so a command that only reads
(``rhythm status``) starts fast."""

from typing import Any

from storage.db import Database, UpsertResult, open_db

__all__ = ["Database", "RecordWriter", "UpsertResult", "WriteSummary", "open_db", "write_records"]

_WRITER = ("RecordWriter", "WriteSummary", "write_records")


def __getattr__(name: str) -> Any:
    if name in _WRITER:
        from storage import writer

        return getattr(writer, name)
    raise AttributeError(f"module 'storage' has no attribute {name!r}")
