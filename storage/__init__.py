"""Storage: the DuckDB file, its migrations, views and writers. Owns the connection."""

from storage.db import Database, UpsertResult, open_db
from storage.writer import RecordWriter, WriteSummary, write_records

__all__ = ["Database", "RecordWriter", "UpsertResult", "WriteSummary", "open_db", "write_records"]
