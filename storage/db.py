"""The one owner of the DuckDB connection (STYLE rule 6).

- One writer at a time (DuckDB's file lock); a second process gets `DatabaseBusy`.
- Analysis connections are read-only and refuse anything but SELECT/EXPLAIN.
- Ordered, named migrations recorded in `schema_migrations`; migrating twice is a no-op.
- `transaction()` wraps a unit of work: on any exception (or a killed process) the database
  is exactly as before.
- `upsert()` is idempotent on each table's natural key (its primary key).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

if TYPE_CHECKING:  # numpy and pyarrow load only for bulk writes (a fast `rhythm status`)
    import numpy as np
    import pyarrow as pa

from common.errors import DatabaseBusy, ReadOnlyViolation, StorageError

READ_STATEMENTS = {duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN}

# Nothing leaves the machine: never let DuckDB fetch extensions on its own.
_BASE_CONFIG = {"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"}

# Writers cap DuckDB's memory and let big joins and staging spill to `<db>.tmp`, so an import
# of any size runs in bounded memory. Nothing an import keeps in DuckDB grows with the
# file (no ART index on the bulk tables), so 128 MB is enough for the merges of a 3 M-Record
# import (measured peak RSS of `rhythm import healthkit`: 426 MB at 1 M Records, 449 MB at
# 3 M). Two threads at most: each thread's join and grouping buffers come out of the same
# limit, so a many-core machine must not multiply them.
WRITER_MEMORY_LIMIT = "128MB"
WRITER_THREADS = 2
APPEND_MEMORY_LIMIT = "96MB"  # while a first import appends to empty tables (Database._appending)

# Bulk tables have no PRIMARY KEY (its in-memory index grows with the table); their natural
# key is enforced by the writer: rows are staged unindexed and merged on this key.
BULK_KEYS: dict[str, tuple[str, ...]] = {
    "samples": ("source", "metric", "source_name", "start_ts", "end_ts"),
    "raw_healthkit": ("kind", "natural_key"),
}

# Checked on sql_words(statement): EXPLAIN ANALYZE, EXPLAIN (ANALYZE), EXPLAIN (FORMAT x, ANALYZE)
_EXPLAIN_ANALYZE = re.compile(r"EXPLAIN\s*(\([^)]*\bANALY[SZ]E\b|ANALY[SZ]E\b)", re.I)


def sql_words(sql: str) -> str:
    """``sql`` with its comments (``-- ...``, ``/* ... */``, nested) replaced by a space and
    runs of whitespace by one space, string literals and quoted names kept: what a refusal
    checks, so ``EXPLAIN/**/ANALYZE`` reads as ``EXPLAIN ANALYZE``."""
    out: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch in "'\"":
            j = i + 1
            while j < n:
                if sql[j] == ch:
                    if j + 1 < n and sql[j + 1] == ch:  # doubled quote inside
                        j += 2
                        continue
                    break
                j += 1
            out.append(sql[i:j + 1])
            i = j + 1
        elif sql.startswith("--", i):
            j = sql.find("\n", i)
            i = n if j < 0 else j + 1
            out.append(" ")
        elif sql.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if sql.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif sql.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            i = j
            out.append(" ")
        elif ch.isspace():
            while i < n and sql[i].isspace():
                i += 1
            out.append(" ")
        else:
            out.append(ch)
            i += 1
    return "".join(out).strip()


_MIGRATION_RE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
_SOURCE_RE = re.compile(r"^[a-z][a-z0-9_]{0,39}$")

# Every source lands its payloads as received in raw_<source> (STYLE rule 4). The four
# first sources' tables come from the migrations; a source added later gets the same shape
# on its first write (ensure_raw_table), so a new connector needs no migration.
RAW_TABLE_DDL = (
    "CREATE TABLE IF NOT EXISTS {table} (kind VARCHAR NOT NULL, natural_key VARCHAR NOT NULL, "
    "fetched_at TIMESTAMPTZ NOT NULL, payload JSON USING COMPRESSION zstd, hash VARCHAR NOT NULL, "
    "PRIMARY KEY (kind, natural_key))"
)


def raw_table_name(source: str) -> str:
    """raw_<source>, for a source name that is a plain identifier."""
    if not isinstance(source, str) or not _SOURCE_RE.match(source):
        raise StorageError(f"unknown source {source!r}: source names are lower-case identifiers")
    return f"raw_{source}"


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class UpsertResult:
    table: str
    received: int  # rows handed in
    inserted: int  # new natural keys
    existing: int  # natural keys already present (updated in place, never duplicated)
    duplicates_in_batch: int  # rows repeated inside the batch itself


def load_migrations() -> list[Migration]:
    out = []
    for entry in resources.files("storage.migrations").iterdir():
        m = _MIGRATION_RE.match(entry.name)
        if m:
            out.append(Migration(int(m.group(1)), m.group(2), entry.read_text()))
    out.sort(key=lambda m: m.version)
    versions = [m.version for m in out]
    if len(set(versions)) != len(versions):
        raise StorageError(f"duplicate migration versions: {versions}")
    return out


def load_views() -> dict[str, str]:
    """Named analysis views: storage/views/NAME.sql, created in dependency order."""
    views = {}
    for entry in resources.files("storage.views").iterdir():
        if entry.name.endswith(".sql"):
            views[entry.name[:-4]] = entry.read_text()
    return views


def _view_order(views: dict[str, str]) -> list[str]:
    order: list[str] = []
    pending = dict(views)
    while pending:
        progressed = False
        for name, sql in sorted(pending.items()):
            deps = [
                v for v in pending if v != name and re.search(rf"\b{v}\b", sql, re.IGNORECASE)
            ]
            if not deps:
                order.append(name)
                del pending[name]
                progressed = True
                break
        if not progressed:
            raise StorageError(f"circular view dependencies among {sorted(pending)}")
    return order


def _is_lock_error(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "lock" in text and ("conflicting" in text or "could not set" in text)


class KeyFilter:
    """The key hashes of the rows a first import appended, as a Bloom filter of fixed size
    (8 MiB, three probes): memory does not grow with the file. `add` answers, per row,
    whether its key may have been seen already (in an earlier batch or earlier in this one):
    never a false "no"; a false "yes" (under 0.01 % of rows at 1 M keys, about 4 % at 10 M)
    only sends a row through the staged merge."""

    BITS = 1 << 26
    _PROBES = (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9)  # odd multipliers

    def __init__(self) -> None:
        import numpy as np

        self.bits = np.zeros(max(1, self.BITS >> 3), np.uint8)

    def add(self, hashes: np.ndarray) -> np.ndarray:
        import numpy as np

        shift = np.uint64(64 - (self.BITS.bit_length() - 1))
        probes = [(hashes * np.uint64(m)) >> shift for m in self._PROBES]  # top bits: < BITS
        maybe = np.ones(len(hashes), bool)
        for p in probes:
            maybe &= (self.bits[p >> np.uint64(3)] >> (p & np.uint64(7)).astype(np.uint8)) & 1 == 1
        # repeats inside the batch: every occurrence after the first
        _, first = np.unique(hashes, return_index=True)
        repeat = np.ones(len(hashes), bool)
        repeat[first] = False
        for p in probes:
            np.bitwise_or.at(self.bits, p >> np.uint64(3), np.left_shift(1, (p & np.uint64(7)).astype(np.uint8)))
        return maybe | repeat


def key_hashes(data: pa.Table, keys: Sequence[str]) -> np.ndarray:
    """A 64-bit hash of each row's key columns, computed with numpy (per distinct string,
    not per row, for the low-cardinality ones). Equal keys give equal hashes in this process."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    h = np.full(data.num_rows, 0x243F6A8885A308D3, np.uint64)
    for k in keys:
        col = data.column(k)
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            enc = pc.dictionary_encode(col).combine_chunks()
            per_value = np.array([hash(v) for v in enc.dictionary.to_pylist()] + [-1], np.int64).view(np.uint64)
            v = per_value[enc.indices.fill_null(len(enc.dictionary)).to_numpy(zero_copy_only=False)]
        else:  # timestamps, dates, numbers: their integer value
            v = col.cast(pa.int64()).fill_null(-1).to_numpy().view(np.uint64)
        h = _mix(h ^ _mix(v))
    return h


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser (wrapping uint64 arithmetic)."""
    import numpy as np

    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


class Database:
    """A DuckDB file opened for writing (default) or read-only analysis.

    A read-only connection is also *sandboxed* by default: it cannot reach any file but the
    database (``enable_external_access=false``: no COPY, read_csv/read_text/glob, ATTACH,
    INSTALL or LOAD) and its configuration is locked (no SET) once the session zone is
    fixed. Only ``rhythm export`` opens read-only without the sandbox, to write Parquet.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        read_only: bool = False,
        memory_limit: str | None = None,
        sandbox: bool | None = None,
    ):
        self.path = Path(path)
        self.read_only = read_only
        self.sandboxed = read_only if sandbox is None else sandbox
        if read_only and not self.path.exists():
            raise StorageError(f"{self.path}: no database here (run `rhythm init` first)")
        created = not read_only and not self.path.exists()
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        config = dict(_BASE_CONFIG)
        self._memory_limit = memory_limit or WRITER_MEMORY_LIMIT
        if not read_only:
            config["memory_limit"] = self._memory_limit
            config["preserve_insertion_order"] = "false"
            config["threads"] = str(WRITER_THREADS)
        elif memory_limit:
            config["memory_limit"] = memory_limit
        try:
            self.con = duckdb.connect(str(self.path), read_only=read_only, config=config)
        except duckdb.IOException as exc:
            if _is_lock_error(exc):
                pid = re.search(r"PID (\d+)", str(exc))
                who = f" (pid {pid.group(1)})" if pid else ""
                raise DatabaseBusy(
                    f"database busy: {self.path} is being written by another process{who}; "
                    "try again when it finishes"
                ) from None
            raise StorageError(f"{self.path}: cannot open database: {exc}") from None
        except duckdb.Error as exc:
            raise StorageError(f"{self.path}: cannot open database: {exc}") from None
        if created:
            try:  # the person's health data: readable by them alone
                os.chmod(self.path, 0o600)
            except OSError:
                pass
        self.con.execute("SET TimeZone = 'UTC'")
        if self.sandboxed:
            self.con.execute("SET enable_external_access = false")
            self.con.execute("SET lock_configuration = true")
        self._in_tx = False
        self._staged: dict[str, int] = {}  # bulk table -> rows staged so far
        # bulk tables that were empty when this transaction first staged rows for them: rows
        # whose key is new go straight into the table (see stage()); their key filters
        self._direct: dict[str, int] = {}
        self._seen: dict[str, KeyFilter] = {}
        self._columns: dict[str, list[str]] = {}

    # -- lifecycle -----------------------------------------------------------------------
    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- migrations ----------------------------------------------------------------------
    def schema_version(self) -> int:
        if not self._has_table("schema_migrations"):
            return 0
        row = self.con.execute("SELECT max(version) FROM schema_migrations").fetchone()
        return int(row[0] or 0)

    def applied_migrations(self) -> list[tuple[int, str, str]]:
        if not self._has_table("schema_migrations"):
            return []
        return self.con.execute(
            "SELECT version, name, checksum FROM schema_migrations ORDER BY version"
        ).fetchall()

    def migrate(self) -> list[str]:
        """Apply pending migrations in order, then (re)create the analysis views.

        Returns the names of the migrations applied (empty when already current).
        """
        if self.read_only:
            raise ReadOnlyViolation("cannot migrate a database opened read-only")
        migrations = load_migrations()
        applied_now: list[str] = []
        self._columns.clear()
        with self.transaction():
            self.con.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
                "name VARCHAR NOT NULL, checksum VARCHAR NOT NULL, applied_at TIMESTAMPTZ NOT NULL)"
            )
            done = {v: (n, c) for v, n, c in self.applied_migrations()}
            for mig in migrations:
                if mig.version in done:
                    if done[mig.version][1] != mig.checksum:
                        raise StorageError(
                            f"migration {mig.version:04d}_{mig.name} was changed after it was "
                            "applied; add a new migration instead"
                        )
                    continue
                self.con.execute(mig.sql)
                self.con.execute(
                    "INSERT INTO schema_migrations VALUES (?, ?, ?, ?)",
                    [mig.version, mig.name, mig.checksum, datetime.now(UTC)],
                )
                applied_now.append(f"{mig.version:04d}_{mig.name}")
            views = load_views()
            for name in _view_order(views):
                self.con.execute(f"CREATE OR REPLACE VIEW {name} AS {views[name]}")
        return applied_now

    # -- transactions --------------------------------------------------------------------
    @property
    def in_transaction(self) -> bool:
        return self._in_tx

    @contextmanager
    def transaction(self) -> Iterator[Database]:
        """All or nothing. Nested use joins the outer transaction."""
        if self._in_tx:
            yield self
            return
        self.con.execute("BEGIN TRANSACTION")
        self._in_tx = True
        try:
            yield self
        except BaseException:
            self._in_tx = False
            appending = bool(self._direct)
            self._staged.clear()
            self._direct.clear()
            self._seen.clear()
            try:
                self.con.execute("ROLLBACK")
                if appending:
                    self._appending(False)
            except duckdb.Error:
                pass
            raise
        self._in_tx = False
        if self._staged or self._direct:
            pending = sorted({*self._staged, *self._direct})
            appending = bool(self._direct)
            self._staged.clear()
            self._direct.clear()
            self._seen.clear()
            self.con.execute("ROLLBACK")
            if appending:
                self._appending(False)
            raise StorageError(f"staged rows for {pending} were never merged; nothing was written")
        try:
            self.con.execute("COMMIT")
        except duckdb.Error as exc:
            try:
                self.con.execute("ROLLBACK")
            except duckdb.Error:
                pass
            raise StorageError(f"{self.path}: commit failed, nothing was written: {exc}") from None

    # -- writing -------------------------------------------------------------------------
    def natural_key(self, table: str) -> list[str]:
        """The columns that identify a row: the bulk key, or the primary key."""
        if table in BULK_KEYS:
            return list(BULK_KEYS[table])
        return self.primary_key(table)

    def primary_key(self, table: str) -> list[str]:
        rows = self.con.execute(
            "SELECT constraint_column_names FROM duckdb_constraints() "
            "WHERE table_name = ? AND constraint_type = 'PRIMARY KEY'",
            [table],
        ).fetchall()
        if not rows:
            raise StorageError(f"table {table} has no natural key")
        return list(rows[0][0])

    def columns(self, table: str) -> list[str]:
        cols = self._columns.get(table)
        if cols is None:  # schemas change only by migration, which clears this cache
            cols = [r[0] for r in self.con.execute(f"DESCRIBE {table}").fetchall()]
            self._columns[table] = cols
        return list(cols)

    def upsert(
        self, table: str, data: pa.Table | Sequence[dict[str, Any]], keys: Sequence[str] | None = None
    ) -> UpsertResult:
        """Insert or update rows on the table's natural key. Re-running never duplicates.

        Within one batch, the last row for a key wins.
        """
        import pyarrow as pa

        if self.read_only:
            raise ReadOnlyViolation(f"cannot write {table}: database opened read-only")
        if not isinstance(data, pa.Table):
            data = pa.Table.from_pylist(list(data)) if data else None
        if data is None or data.num_rows == 0:
            return UpsertResult(table, 0, 0, 0, 0)
        if table in BULK_KEYS and keys is None:
            with self.transaction():
                self.stage(table, data)
                return self.merge_staged(table)
        keys = list(keys or self.primary_key(table))
        cols = [c for c in data.column_names if c in set(self.columns(table))]
        missing = [k for k in keys if k not in cols]
        if missing:
            raise StorageError(f"upsert into {table}: rows lack key columns {missing}")
        staged = data.select(cols).append_column("__ord", pa.array(range(data.num_rows)))
        with self.transaction():
            key_list = ", ".join(_q(k) for k in keys)
            self.con.execute(  # replacement scan of the local `staged` (see stage())
                "CREATE OR REPLACE TEMP TABLE __dedup AS SELECT * EXCLUDE (__ord) FROM staged "
                f"QUALIFY row_number() OVER (PARTITION BY {key_list} ORDER BY __ord DESC) = 1"
            )
            del staged
            distinct = self.con.execute("SELECT count(*) FROM __dedup").fetchone()[0]
            on = " AND ".join(f"t.{_q(k)} = d.{_q(k)}" for k in keys)
            existing = self.con.execute(
                f"SELECT count(*) FROM __dedup d WHERE EXISTS (SELECT 1 FROM {table} t WHERE {on})"
            ).fetchone()[0]
            col_list = ", ".join(_q(c) for c in cols)
            updates = [c for c in cols if c not in keys]
            if updates:
                set_clause = ", ".join(f"{_q(c)} = excluded.{_q(c)}" for c in updates)
                conflict = f"ON CONFLICT ({key_list}) DO UPDATE SET {set_clause}"
            else:
                conflict = f"ON CONFLICT ({key_list}) DO NOTHING"
            self.con.execute(
                f"INSERT INTO {table} ({col_list}) SELECT {col_list} FROM __dedup {conflict}"
            )
            self.con.execute("DROP TABLE __dedup")
        return UpsertResult(
            table=table,
            received=data.num_rows,
            inserted=distinct - existing,
            existing=existing,
            duplicates_in_batch=data.num_rows - distinct,
        )

    # -- bulk tables: append unindexed, merge once on the natural key ----------------------
    def stage(self, table: str, data: pa.Table) -> int:
        """Append rows for a table to its unindexed staging table (inside the caller's
        transaction); `merge_staged` lands them on the natural key. Bulk tables always go
        this way; keyed tables may (the writer stages the raw_* tables: one merge instead
        of an ON CONFLICT upsert per batch)."""
        import pyarrow as pa

        if self.read_only:
            raise ReadOnlyViolation(f"cannot write {table}: database opened read-only")
        if not self._in_tx:
            raise StorageError("stage() must run inside a transaction")
        cols = [c for c in data.column_names if c in set(self.columns(table))]
        missing = [k for k in self.natural_key(table) if k not in cols]
        if missing:
            raise StorageError(f"rows for {table} lack key columns {missing}")
        if table in self._direct or (
            table in BULK_KEYS and table not in self._staged and self._is_empty(table)
        ):
            # A first import into an empty bulk table: a row whose key this transaction has
            # not seen goes straight into the table (one copy instead of staging and merging
            # it). A row whose key may have been seen (a key filter: no false "new") is
            # staged and merged on the key at the end, so the last row still wins and no
            # row is deleted from the appended data (which would make the commit rewrite
            # all of it).
            if not self._direct:
                self._appending(True)
            seen = self._seen.setdefault(table, KeyFilter())
            batch = data.select(cols)
            hashes = key_hashes(batch, self.natural_key(table))
            maybe = seen.add(hashes)
            new = batch.filter(pa.array(~maybe)) if maybe.any() else batch
            del batch
            col_list = ", ".join(_q(c) for c in cols)
            self.con.execute(f"INSERT INTO {table} ({col_list}) SELECT {col_list} FROM new")
            self._direct[table] = self._direct.get(table, 0) + new.num_rows
            del new
            if maybe.any():
                self._stage_rows(table, data.filter(pa.array(maybe)), cols)
            return data.num_rows
        self._stage_rows(table, data, cols)
        return data.num_rows

    def _stage_rows(self, table: str, data: pa.Table, cols: list[str]) -> None:
        import pyarrow as pa

        stage = f"__stage_{table}"
        start = self._staged.get(table)
        if start is None:
            # JSON columns are staged as text: validated once, by the merge's insert
            types = self.con.execute(f"DESCRIBE {table}").fetchall()
            defs = ", ".join(f"{_q(c)} {'VARCHAR' if t == 'JSON' else t}" for c, t, *_ in types)
            self.con.execute(f"CREATE OR REPLACE TEMP TABLE {stage} ({defs}, __ord BIGINT)")
            start = 0
        n = data.num_rows
        batch = data.select(cols).append_column("__ord", pa.array(range(start, start + n), pa.int64()))
        # A replacement scan of the local `batch`, not con.register(): a registered Arrow
        # table stays referenced until the transaction ends, so a long import would keep
        # every batch in memory (measured: +200 MB per million rows).
        col_list = ", ".join(_q(c) for c in cols + ["__ord"])
        self.con.execute(f"INSERT INTO {stage} ({col_list}) SELECT {col_list} FROM batch")
        del batch
        self._staged[table] = start + n

    def staged_rows(self, table: str) -> int:
        """Rows staged for `table` and not merged yet."""
        return self._staged.get(table, 0)

    def merge_staged(self, table: str) -> UpsertResult:
        """Merge a bulk table's staged rows on its natural key: new keys are inserted, known
        keys updated where anything changed, and the last staged row wins within the batch."""
        direct = self._direct.pop(table, None)
        if direct is not None:  # rows appended to a table that was empty (see stage())
            self._seen.pop(table, None)
            r = self.merge_staged(table)  # the rows whose key repeats one appended before
            if not self._direct:
                self._appending(False)
            return UpsertResult(table, direct + r.received, direct + r.inserted, 0, r.existing + r.duplicates_in_batch)
        received = self._staged.pop(table, 0)
        if received == 0:
            return UpsertResult(table, 0, 0, 0, 0)
        stage = f"__stage_{table}"
        keys = self.natural_key(table)
        key_list = ", ".join(_q(k) for k in keys)
        others = [c for c in self.columns(table) if c not in keys]
        # Keys staged more than once: only their rows are touched, the last staged one kept;
        # the rest of the staging table stays as it is. Found by grouping on a hash of the key
        # first (one integer: ~2x cheaper than grouping on the key columns), then exactly
        # among the few rows whose hash repeats. Groupings spill to disk.
        self.con.execute(
            f"CREATE OR REPLACE TEMP TABLE __dups AS "
            f"WITH h AS (SELECT hash({key_list}) AS __h FROM {stage} GROUP BY __h HAVING count(*) > 1) "
            f"SELECT {key_list}, max(__ord) AS __keep, count(*) AS __n FROM {stage} "
            f"WHERE hash({key_list}) IN (SELECT __h FROM h) GROUP BY {key_list} HAVING count(*) > 1"
        )
        repeats = self.con.execute("SELECT coalesce(sum(__n - 1), 0) FROM __dups").fetchone()[0]
        if repeats:
            on = " AND ".join(f"{stage}.{_q(k)} = d.{_q(k)}" for k in keys)
            self.con.execute(f"DELETE FROM {stage} USING __dups d WHERE {on} AND {stage}.__ord <> d.__keep")
        self.con.execute("DROP TABLE __dups")
        distinct = received - int(repeats)
        empty = self._is_empty(table)
        existing = 0 if empty else self.con.execute(
            f"SELECT count(*) FROM {stage} SEMI JOIN {table} USING ({key_list})"
        ).fetchone()[0]
        # A row changed when any value but its fetch time did: re-importing the same data
        # rewrites nothing (`fetched_at` stays the time the payload was first landed).
        compared = [c for c in others if c != "fetched_at"]
        if existing and compared:
            match = " AND ".join(f"{table}.{_q(k)} = d.{_q(k)}" for k in keys)
            changed = " OR ".join(f"{table}.{_q(c)} IS DISTINCT FROM d.{_q(c)}" for c in compared)
            if table in BULK_KEYS:
                # delete the changed rows and insert them anew with the new keys below
                # (keyed tables are small and update in place). An UPDATE keeps every updated
                # string in memory until the commit (a 3 M-Record re-import that updated
                # every raw row ran out of memory at 128 MB); deletes are a bitmask and
                # inserts spill.
                self.con.execute(f"DELETE FROM {table} USING {stage} d WHERE {match} AND ({changed})")
            else:
                sets = ", ".join(f"{_q(c)} = d.{_q(c)}" for c in others)
                self.con.execute(
                    f"UPDATE {table} SET {sets} FROM {stage} d WHERE {match} AND ({changed})"
                )
        cols = ", ".join(_q(c) for c in keys + others)
        source = stage if empty else f"{stage} ANTI JOIN {table} USING ({key_list})"
        self.con.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM {source}")
        self.con.execute(f"DROP TABLE {stage}")
        return UpsertResult(
            table=table,
            received=received,
            inserted=distinct - existing,
            existing=existing,
            duplicates_in_batch=received - distinct,
        )

    def _appending(self, on: bool) -> None:
        """Settings while a first import appends (and merges the few repeats): one DuckDB
        thread, since the parser feeding the import needs the other core (1 M Records: 3.2 s
        with one, 3.4 s with two), and a smaller memory limit, since appends join nothing and
        DuckDB's buffer pool otherwise fills the limit with blocks already written (peak RSS
        at 10 M Records: 509 MB at 128 MB, 478 MB at 96 MB). Merges of other imports get
        WRITER_THREADS and WRITER_MEMORY_LIMIT back (their joins use them)."""
        threads, limit = (1, APPEND_MEMORY_LIMIT) if on else (WRITER_THREADS, self._memory_limit)
        self.con.execute(f"SET threads = {threads}")
        self.con.execute(f"SET memory_limit = '{limit}'")

    def _is_empty(self, table: str) -> bool:
        return bool(self.con.execute(f"SELECT NOT EXISTS (SELECT 1 FROM {table})").fetchone()[0])

    def delete(self, table: str, where: dict[str, Any]) -> int:
        if self.read_only:
            raise ReadOnlyViolation(f"cannot delete from {table}: database opened read-only")
        cond = " AND ".join(f"{_q(k)} = ?" for k in where) or "true"
        with self.transaction():
            n = self.con.execute(
                f"SELECT count(*) FROM {table} WHERE {cond}", list(where.values())
            ).fetchone()[0]
            self.con.execute(f"DELETE FROM {table} WHERE {cond}", list(where.values()))
        return int(n)

    def ensure_raw_table(self, source: str) -> str:
        """The raw payload table of a source, created on first use (inside the caller's
        transaction: a failed import leaves no empty table behind)."""
        table = raw_table_name(source)
        if not self._has_table(table):
            if self.read_only:
                raise ReadOnlyViolation(f"cannot create {table}: database opened read-only")
            self.con.execute(RAW_TABLE_DDL.format(table=table))
            self._columns.pop(table, None)
        return table

    # -- sync state (STYLE rule 3) -------------------------------------------------------
    def cursors(self, source: str) -> dict[str, str | None]:
        """stream -> cursor of every stream of a source."""
        rows = self.con.execute(
            "SELECT stream, cursor FROM sync_state WHERE source = ?", [source]
        ).fetchall()
        return {stream: cursor for stream, cursor in rows}

    def get_cursor(self, source: str, stream: str) -> str | None:
        row = self.con.execute(
            "SELECT cursor FROM sync_state WHERE source = ? AND stream = ?", [source, stream]
        ).fetchone()
        return None if row is None else row[0]

    def set_cursor(
        self, source: str, stream: str, cursor: str | None, error: str | None = None
    ) -> None:
        self.upsert(
            "sync_state",
            [
                {
                    "source": source,
                    "stream": stream,
                    "cursor": cursor,
                    "updated_at": datetime.now(UTC),
                    "last_error": error,
                }
            ],
        )

    # -- reading -------------------------------------------------------------------------
    def query(
        self, sql: str, params: Sequence[Any] | None = None, max_rows: int | None = None,
        max_chars: int | None = None,
    ) -> tuple[list[str], list[tuple]]:
        """Run read-only SQL; refuse anything that could write. Returns (columns, rows): every
        row, or the first ``max_rows`` (the rest are never fetched). With ``max_chars``, a
        SELECT's text and nested values come back cut to ``max_chars + 1`` characters by the
        database itself (the caller sees what was longer), so a huge value is never fetched."""
        try:
            statements = self.con.extract_statements(sql)
        except duckdb.Error as exc:
            raise StorageError(f"SQL error: {_first_line(exc)}") from None
        if not statements:
            raise StorageError("SQL error: no statement given")
        for st in statements:
            if st.type not in READ_STATEMENTS:
                kind = str(st.type).split(".")[-1]
                raise ReadOnlyViolation(
                    f"refused: {kind} statements are not allowed here; `rhythm sql` is "
                    "read-only (SELECT, WITH ... SELECT, DESCRIBE, SHOW, EXPLAIN)"
                )
            if st.type == duckdb.StatementType.EXPLAIN and _EXPLAIN_ANALYZE.match(sql_words(st.query)):
                raise ReadOnlyViolation(
                    "refused: EXPLAIN ANALYZE runs the statement it explains; use EXPLAIN"
                )
        try:
            cur = None
            for st in statements[:-1]:
                self.con.execute(st)
            last: Any = statements[-1]
            nested: list[int] = []
            if max_chars is not None and last.type == duckdb.StatementType.SELECT and not params:
                last, nested = self._cut_long_values(last.query, max_chars)
            cur = self.con.execute(last, params) if params else self.con.execute(last)
            cols = [d[0] for d in cur.description] if cur.description else []
            rows = cur.fetchall() if max_rows is None else cur.fetchmany(max_rows)
            if nested:  # a nested value comes back as itself, or as its cut text when too long
                cols = cols[: len(cols) - len(nested)]
                width = len(cols)
                rows = [
                    tuple(r[i] if i not in nested else (r[width + nested.index(i)] if r[width + nested.index(i)]
                                                        is not None else r[i]) for i in range(width))
                    for r in rows
                ]
            return cols, rows
        except duckdb.Error as exc:
            raise StorageError(f"SQL error: {_first_line(exc)}") from None

    def _cut_long_values(self, sql: str, max_chars: int) -> tuple[str, list[int]]:
        """``sql`` wrapped so that text, blobs and nested values are cut in the database, and
        the positions of the nested columns (lists, structs, maps): each of those is followed,
        after the query's own columns, by its text cut to ``max_chars + 1`` where the value's
        text is longer (NULL where it is not, and the value itself is returned)."""
        inner = sql.strip().rstrip(";")
        probe = self.con.execute(f"SELECT * FROM ({inner}\n) AS _q LIMIT 0")
        types = [str(d[1]).upper() for d in probe.description or []]
        n = int(max_chars) + 1
        cols: list[str] = []
        nested: list[tuple[int, str]] = []
        for i, t in enumerate(types):
            c = f"_q._c{i}"
            if t in ("BOOLEAN", "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
                     "UINTEGER", "UBIGINT", "UHUGEINT", "FLOAT", "DOUBLE", "DATE", "TIME", "TIMESTAMP",
                     "TIMESTAMP WITH TIME ZONE", "INTERVAL", "UUID") or t.startswith(("DECIMAL", "TIMESTAMP")):
                cols.append(c)
            elif t == "VARCHAR":
                cols.append(f"left({c}, {n})")
            elif t.endswith("]") or t.startswith(("STRUCT", "MAP", "UNION")):
                # nested: kept as it is when its text fits, else (a list's first n items) cut as text
                short = f"{c}[1:{n}]" if t.endswith("[]") else c
                cols.append(f"CASE WHEN length(CAST({c} AS VARCHAR)) <= {n} THEN {c} END")
                nested.append((i, f"CASE WHEN length(CAST({c} AS VARCHAR)) > {n} "
                                  f"THEN left(CAST({short} AS VARCHAR), {n}) END"))
            else:  # JSON, BLOB, ... : their text, cut
                cols.append(f"left(CAST({c} AS VARCHAR), {n})")
        names = ", ".join(f"_c{i}" for i in range(len(types)))
        labels = [str(d[0]).replace('"', '""') for d in probe.description or []]
        select = ", ".join(f'{c} AS "{label}"' for c, label in zip(cols, labels, strict=True))
        select += "".join(f', {expr} AS "_cut_{i}"' for i, expr in nested)
        return f"SELECT {select or '*'} FROM ({inner}\n) AS _q({names})", [i for i, _ in nested]

    def interrupt(self) -> None:
        """Stop the statement running on this connection (called from another thread: the
        statement then fails with an interrupt error)."""
        self.con.interrupt()

    def tables(self) -> list[str]:
        return [
            r[0]
            for r in self.con.execute(
                "SELECT table_name FROM duckdb_tables() WHERE NOT temporary ORDER BY table_name"
            ).fetchall()
        ]

    def views(self) -> list[str]:
        return [
            r[0]
            for r in self.con.execute(
                "SELECT view_name FROM duckdb_views() WHERE NOT internal AND NOT temporary "
                "ORDER BY view_name"
            ).fetchall()
        ]

    def row_counts(self) -> dict[str, int]:
        return {
            t: int(self.con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0])
            for t in self.tables()
        }

    def info(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "file_size_bytes": self.path.stat().st_size if self.path.exists() else 0,
            "schema_version": self.schema_version(),
            "migrations": [f"{v:04d}_{n}" for v, n, _ in self.applied_migrations()],
            "tables": self.row_counts(),
            "views": self.views(),
        }

    def export_parquet(self, out_dir: str | Path) -> dict[str, Path]:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        written = {}
        for t in self.tables():
            target = out / f"{t}.parquet"
            self.con.execute(f"COPY \"{t}\" TO '{_sql_str(target)}' (FORMAT parquet)")
            written[t] = target
        return written

    def _has_table(self, name: str) -> bool:
        return bool(
            self.con.execute(
                "SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [name]
            ).fetchone()[0]
        )


def _q(name: str) -> str:
    """A quoted SQL identifier (column names like `at` are keywords)."""
    return '"' + name.replace('"', '""') + '"'


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _sql_str(p: Path) -> str:
    return str(p).replace("'", "''")


def open_db(
    path: str | Path,
    *,
    read_only: bool = False,
    migrate: bool = True,
    memory_limit: str | None = None,
    sandbox: bool | None = None,
) -> Database:
    """Open (and, for writers, migrate) the database. Read-only connections are sandboxed
    unless ``sandbox=False`` (see Database). A reader that finds the database behind this
    version's migrations (Rhythm was upgraded) migrates it first, as a writer would."""
    db = Database(path, read_only=read_only, memory_limit=memory_limit, sandbox=sandbox)
    if read_only and migrate:
        try:
            behind = db.schema_version() < load_migrations()[-1].version
        except BaseException:
            db.close()
            raise
        if behind:
            db.close()
            open_db(path, memory_limit=memory_limit).close()
            db = Database(path, read_only=True, memory_limit=memory_limit, sandbox=sandbox)
    if migrate and not read_only:
        try:
            db.migrate()
        except BaseException:
            db.close()
            raise
    return db
