"""Land a stream of records (from any connector) in the database, in batches.

The caller owns the transaction: `write_records` inside `db.transaction()` makes a whole
import all-or-nothing. Re-running the same stream adds no rows (upsert on natural keys).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import date
from typing import Any

import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute in _days)

from common import ranges
from common.errors import StorageError
from common.records import Deletion, RawRecord, RecordBatch, Sample, Skipped, field_names
from storage.db import BULK_KEYS, Database, UpsertResult, raw_table_name


@dataclass
class TableCounts:
    received: int = 0
    inserted: int = 0
    existing: int = 0
    duplicates_in_batch: int = 0
    deleted: int = 0

    def add(self, r: UpsertResult) -> None:
        self.received += r.received
        self.inserted += r.inserted
        self.existing += r.existing
        self.duplicates_in_batch += r.duplicates_in_batch


@dataclass
class WriteSummary:
    tables: dict[str, TableCounts] = field(default_factory=dict)
    first_day: date | None = None
    last_day: date | None = None
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> rows a connector left out
    # "<table>.<field or metric>: <why>" -> values outside common/ranges.py, never stored
    rejected: dict[str, int] = field(default_factory=dict)

    @property
    def records(self) -> int:
        return sum(c.received for c in self.tables.values())

    @property
    def duplicates_skipped(self) -> int:
        return sum(c.existing + c.duplicates_in_batch for c in self.tables.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "duplicates_skipped": self.duplicates_skipped,
            "first_day": self.first_day.isoformat() if self.first_day else None,
            "last_day": self.last_day.isoformat() if self.last_day else None,
            "tables": {t: vars(c) for t, c in sorted(self.tables.items())},
            "skipped": dict(sorted(self.skipped.items())),
            "rejected": dict(sorted(self.rejected.items())),
        }

    def _days(self, days: Iterable[date | None]) -> None:
        if isinstance(days, pa.Array | pa.ChunkedArray):  # columnar batches (RecordBatch)
            mm = pa.compute.min_max(days).as_py()
            days = [mm["min"], mm["max"]]
        ds = [d for d in days if d is not None]
        if not ds:
            return
        lo, hi = min(ds), max(ds)
        self.first_day = lo if self.first_day is None else min(self.first_day, lo)
        self.last_day = hi if self.last_day is None else max(self.last_day, hi)


def raw_table(source: str) -> str:
    return raw_table_name(source)


def payload_hash(payload: str) -> str:
    return hashlib.blake2b(payload.encode(), digest_size=12).hexdigest()


# Staged raw rows are merged into their table every this many rows (bulk tables once, at
# the end): raw payloads are large (HRV beat lists), and a staging table that outgrows
# DuckDB's memory limit spills to disk, where merging it costs several times more per row.
# A later merge sees an earlier one's rows as existing keys, so the last row for a key
# still wins.
RAW_MERGE_ROWS = 100_000


class RecordWriter:
    """Buffers records per table and flushes them as Arrow batches."""

    def __init__(
        self,
        db: Database,
        batch_size: int = 50_000,
        on_flush: Callable[[WriteSummary], None] | None = None,
    ):
        self.db = db
        self.batch_size = batch_size
        self.on_flush = on_flush
        self.summary = WriteSummary()
        self._rows: dict[tuple[str, type], list[Any]] = {}
        self._staged_tables: set[str] = set()

    def add(self, record: Any) -> None:
        if isinstance(record, RecordBatch):
            self._write_columns(record.record_type, record.columns)
            return
        if isinstance(record, Skipped):
            self.summary.skipped[record.reason] = self.summary.skipped.get(record.reason, 0) + record.count
            return
        if isinstance(record, Deletion):
            self.flush()
            n = self.db.delete(record.table, record.where)
            self.summary.tables.setdefault(record.table, TableCounts()).deleted += n
            return
        table = raw_table(record.source) if isinstance(record, RawRecord) else record.table
        key = (table, type(record))
        buf = self._rows.setdefault(key, [])
        buf.append(record)
        # raw payloads can be large (HRV beat lists): a smaller batch keeps memory flat
        limit = self.batch_size // 5 if table.startswith("raw_") else self.batch_size
        if len(buf) >= limit:
            self._flush_one(key)

    def flush(self) -> None:
        """Write everything buffered; bulk tables are merged on their natural key now."""
        for key in list(self._rows):
            self._flush_one(key)
        for table in list(self._staged_tables):
            self._staged_tables.discard(table)
            self._count(table, self.db.merge_staged(table))

    def _flush_one(self, key: tuple[str, type]) -> None:
        records = self._rows.pop(key, [])
        if not records:
            return
        rtype = key[1]
        names = field_names(rtype)
        cols = {n: [getattr(r, n) for r in records] for n in names}
        self._write_columns(rtype, cols)

    def _write_columns(self, rtype: type, cols: dict[str, Any]) -> None:
        if rtype is RawRecord:
            sources = set(cols["source"])
            for src in sources:
                if len(sources) == 1:
                    sub = {k: v for k, v in cols.items() if k != "source"}
                else:
                    idx = [i for i, s in enumerate(cols["source"]) if s == src]
                    sub = {k: [v[i] for i in idx] for k, v in cols.items() if k != "source"}
                sub["hash"] = list(map(payload_hash, sub["payload"]))
                self._upsert(self.db.ensure_raw_table(src), sub)
            return
        data = self._arrow(rtype.table, cols)
        if rtype is Sample or rtype.table in ranges.FIELDS:
            data = self._in_range(rtype.table, data)
            if data.num_rows == 0:
                return
        self._upsert(rtype.table, data)
        if "local_day" in data.column_names:
            self.summary._days(data.column("local_day"))

    @staticmethod
    def _arrow(table: str, cols: dict[str, Any] | pa.Table) -> pa.Table:
        if isinstance(cols, pa.Table):
            return cols
        try:
            return pa.table(cols)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise StorageError(f"cannot store rows for {table}: {exc}") from None

    def _reject(self, key: str, n: int) -> None:
        if n:
            self.summary.rejected[key] = self.summary.rejected.get(key, 0) + n

    def _bad(self, key: str, values: pa.Array, bounds: tuple[float | None, float | None],
             among: pa.Array | None = None) -> pa.Array:
        """Where ``values`` (those marked in ``among``) break ``bounds``; counted by reason."""
        pc = pa.compute
        v = pc.cast(values, pa.float64())
        parts = [("NaN or infinite", pc.invert(pc.is_finite(v)))]
        lo, hi = bounds
        if lo is not None:
            parts.append(("negative" if lo == 0 else f"below {lo:g}", pc.less(v, lo)))
        if hi is not None:
            parts.append((f"above {hi:g}", pc.greater(v, hi)))
        bad = None
        for why, mask in parts:
            mask = pc.fill_null(mask, False)
            if among is not None:
                mask = pc.and_(mask, among)
            if bad is not None:
                mask = pc.and_(mask, pc.invert(bad))  # one reason per value
            self._reject(f"{key}: {why}", pc.sum(mask).as_py() or 0)
            bad = mask if bad is None else pc.or_(bad, mask)
        return bad

    def _in_range(self, table: str, data: pa.Table) -> pa.Table:
        """``data`` without impossible values (common/ranges.py): samples carrying one are
        dropped, a sleep's or workout's field becomes null."""
        pc = pa.compute
        if table == Sample.table:
            value, metric = data.column("value").combine_chunks(), data.column("metric").combine_chunks()
            bad = None
            for name in pc.unique(metric).to_pylist():
                among = pc.fill_null(pc.equal(metric, name), False)
                b = self._bad(f"samples.{name}", value, ranges.METRICS.get(name, (None, None)), among)
                bad = b if bad is None else pc.or_(bad, b)
            if bad is None or not pc.any(bad).as_py():
                return data
            return data.filter(pc.invert(bad))
        for col, bounds in ranges.FIELDS.get(table, {}).items():
            if col not in data.column_names:
                continue
            arr = data.column(col).combine_chunks()
            if pa.types.is_null(arr.type) or arr.null_count == len(arr):
                continue
            bad = self._bad(f"{table}.{col}", arr, bounds)
            if pc.any(bad).as_py():
                data = data.set_column(data.column_names.index(col), col,
                                       pc.if_else(bad, pa.scalar(None, arr.type), arr))
        return data

    def _upsert(self, table: str, cols: dict[str, Any] | pa.Table) -> None:
        data = self._arrow(table, cols)
        if table in BULK_KEYS or table.startswith("raw_"):
            if not self.db.in_transaction:  # no transaction to span: merge right away
                self._count(table, self.db.upsert(table, data))
                return
            self.db.stage(table, data)
            self._staged_tables.add(table)
            self.summary.tables.setdefault(table, TableCounts())
            if table.startswith("raw_") and self.db.staged_rows(table) >= RAW_MERGE_ROWS:
                self._staged_tables.discard(table)
                self._count(table, self.db.merge_staged(table))
            return
        self._count(table, self.db.upsert(table, data))

    def _count(self, table: str, result: UpsertResult) -> None:
        self.summary.tables.setdefault(table, TableCounts()).add(result)
        if self.on_flush:
            self.on_flush(self.summary)


def write_records(
    db: Database,
    records: Iterable[Any],
    batch_size: int = 50_000,
    on_flush: Callable[[WriteSummary], None] | None = None,
) -> WriteSummary:
    """Write every record of a stream; returns what was inserted and skipped."""
    writer = RecordWriter(db, batch_size=batch_size, on_flush=on_flush)
    with db.transaction():
        for rec in records:
            writer.add(rec)
        writer.flush()
    return writer.summary
