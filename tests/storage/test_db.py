"""storage.db: migrations, upserts, transactions, read-only SQL, busy database."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from datetime import UTC, date, datetime, timedelta, timezone

import pyarrow.parquet as pq
import pytest

from common.errors import DatabaseBusy, ReadOnlyViolation, StorageError
from common.records import Event, RawRecord, Sample
from storage import open_db, write_records
from storage.db import load_migrations

# Tables and columns users rely on (product.md, "Tables users query").
CONTRACT = {
    "samples": ["source", "metric", "start_ts", "end_ts", "value", "unit", "device", "local_day"],
    "sleep_sessions": ["source", "session_id", "start_ts", "end_ts", "local_day"],
    "workouts": ["source", "workout_id", "start_ts", "end_ts", "local_day"],
    "events": ["source", "calendar_id", "event_id", "start_ts", "end_ts", "all_day", "title", "status", "action"],
    "meters": ["local_day", "slot", "vitality", "cognition", "progress", "serenity", "connection"],
    "slot_actions": ["local_day", "slot", "action", "confidence"],
    "recommendations": ["id", "created_at", "local_day", "slot", "action", "belief_social",
                        "belief_morning", "belief_work", "rationale", "model"],
    "feedback": ["recommendation_id", "response", "at"],
    "sync_state": ["source", "stream", "cursor", "updated_at"],
    "raw_healthkit": ["kind", "natural_key", "fetched_at", "payload", "hash"],
    "raw_garmin": ["kind", "natural_key", "fetched_at", "payload", "hash"],
    "raw_whoop": ["kind", "natural_key", "fetched_at", "payload", "hash"],
    "raw_calendar": ["kind", "natural_key", "fetched_at", "payload", "hash"],
}

TZ = timezone(timedelta(hours=2))


def sample(minute: int, value: float = 10.0, source_name: str = "Watch") -> Sample:
    start = datetime(2024, 3, 1, 9, minute, tzinfo=TZ)
    return Sample("healthkit", "steps", start, start + timedelta(minutes=1), value, "count",
                  date(2024, 3, 1), source_name=source_name, tz_offset_min=120)


@pytest.fixture
def db(tmp_path):
    d = open_db(tmp_path / "r.duckdb")
    yield d
    d.close()


def test_contract_tables_and_columns_exist(db):
    for table, cols in CONTRACT.items():
        have = db.columns(table)
        assert [c for c in cols if c not in have] == [], table


def test_migrating_twice_is_a_noop(tmp_path):
    path = tmp_path / "m.duckdb"
    with open_db(path, migrate=False) as db:
        first = db.migrate()
        assert first == [f"{m.version:04d}_{m.name}" for m in load_migrations()]
        counts = db.row_counts()
        assert db.migrate() == []
        assert db.row_counts() == counts
        assert db.schema_version() == load_migrations()[-1].version
    with open_db(path) as db:  # reopening migrates again: still nothing to do
        assert db.migrate() == []


def test_edited_migration_is_refused(db):
    db.con.execute("UPDATE schema_migrations SET checksum = 'tampered' WHERE version = 1")
    with pytest.raises(StorageError, match="changed after it was applied"):
        db.migrate()


def test_upsert_is_idempotent_and_last_row_wins(db):
    s1 = write_records(db, [sample(0), sample(1), sample(1, value=99.0)])
    assert s1.tables["samples"].inserted == 2
    assert s1.tables["samples"].duplicates_in_batch == 1
    assert db.query("SELECT value FROM samples ORDER BY start_ts")[1] == [(10.0,), (99.0,)]
    s2 = write_records(db, [sample(0), sample(1, value=12.0)])
    assert s2.tables["samples"].inserted == 0 and s2.tables["samples"].existing == 2
    assert db.query("SELECT count(*), sum(value) FROM samples")[1] == [(2, 22.0)]


def test_same_instant_from_two_sources_are_two_rows(db):
    write_records(db, [sample(0, source_name="Watch"), sample(0, source_name="iPhone")])
    assert db.query("SELECT count(*) FROM samples")[1] == [(2,)]


def test_timestamps_keep_the_instant_and_local_day(db):
    write_records(db, [sample(30)])
    (start, day, off), = db.query("SELECT start_ts, local_day, tz_offset_min FROM samples")[1]
    assert start == datetime(2024, 3, 1, 7, 30, tzinfo=UTC)
    assert day == date(2024, 3, 1) and off == 120


def test_raw_records_go_to_their_source_table_with_a_hash(db):
    now = datetime.now(UTC)
    write_records(db, [RawRecord("whoop", "cycle", "1", '{"id": 1}', now),
                       RawRecord("garmin", "sleep", "2024-03-01", '{"x": 2}', now)])
    assert db.query("SELECT natural_key, length(hash) > 8 FROM raw_whoop")[1] == [("1", True)]
    assert db.query("SELECT count(*) FROM raw_garmin")[1] == [(1,)]


def test_failed_transaction_leaves_database_exactly_as_before(db):
    write_records(db, [sample(0)])
    before = db.row_counts()

    def records():
        yield sample(5)
        yield sample(6)
        raise ValueError("parser blew up halfway")

    with pytest.raises(ValueError):
        write_records(db, records(), batch_size=1)
    assert db.row_counts() == before


def test_killed_import_leaves_no_partial_rows(tmp_path):
    """A process killed mid-transaction (SIGKILL, no cleanup) commits nothing."""
    path = tmp_path / "k.duckdb"
    with open_db(path) as db:
        write_records(db, [sample(0)])
        before = db.row_counts()
    script = textwrap.dedent(f"""
        import sys, time
        from datetime import date, datetime, timedelta, timezone
        from common.records import Sample
        from storage import open_db
        from storage.writer import RecordWriter
        db = open_db({str(path)!r})
        w = RecordWriter(db, batch_size=100)
        tz = timezone.utc
        with db.transaction():
            for i in range(5000):
                t = datetime(2024, 1, 1, tzinfo=tz) + timedelta(minutes=i)
                w.add(Sample("healthkit", "heart_rate", t, t, 60.0, "bpm", t.date()))
            w.flush()
            db.con.execute("CHECKPOINT") if False else None
            print("FLUSHED", flush=True)
            time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "FLUSHED"
        proc.kill()
    finally:
        proc.wait(timeout=30)
    assert proc.returncode < 0  # died by signal
    with open_db(path) as db:
        assert db.row_counts() == before


def test_second_writer_gets_database_busy(tmp_path):
    path = tmp_path / "b.duckdb"
    open_db(path).close()
    holder = subprocess.Popen(
        [sys.executable, "-c",
         f"import time; from storage import open_db; d = open_db({str(path)!r}); print('OPEN', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "OPEN"
        with pytest.raises(DatabaseBusy, match="database busy"):
            open_db(path)
        with pytest.raises(DatabaseBusy):
            open_db(path, read_only=True)
    finally:
        holder.kill()
        holder.wait(timeout=30)
    deadline = time.time() + 10
    while True:  # the lock goes with the process
        try:
            open_db(path).close()
            break
        except DatabaseBusy:
            if time.time() > deadline:
                raise
            time.sleep(0.1)


@pytest.mark.parametrize("sql", [
    "INSERT INTO samples (source) VALUES ('x')",
    "DELETE FROM samples",
    "UPDATE samples SET value = 1",
    "DROP TABLE samples",
    "CREATE TABLE x (a INT)",
    "COPY samples TO '/tmp/x.csv'",
    "ATTACH '/tmp/other.duckdb' AS o",
    "SET threads = 1",
    "SELECT 1; DELETE FROM samples",
    "INSTALL httpfs",
])
def test_query_refuses_anything_but_reads(tmp_path, sql):
    path = tmp_path / "q.duckdb"
    open_db(path).close()
    with open_db(path, read_only=True) as db, pytest.raises(ReadOnlyViolation, match="read-only"):
        db.query(sql)


def test_query_allows_reads(db):
    write_records(db, [sample(0), sample(1)])
    assert db.query("WITH s AS (SELECT value FROM samples) SELECT sum(value) FROM s")[1] == [(20.0,)]
    cols, rows = db.query("DESCRIBE samples")
    assert "column_name" in cols and len(rows) >= 8
    assert db.query("SHOW TABLES")[1]
    assert db.query("EXPLAIN SELECT * FROM samples")[1]


def test_read_only_connection_cannot_write(tmp_path):
    path = tmp_path / "ro.duckdb"
    open_db(path).close()
    with open_db(path, read_only=True) as db, pytest.raises(ReadOnlyViolation):
        write_records(db, [sample(0)])


def test_cursor_roundtrip(db):
    assert db.get_cursor("whoop", "cycle") is None
    db.set_cursor("whoop", "cycle", "2024-01-01T00:00:00Z")
    db.set_cursor("whoop", "cycle", "2024-02-01T00:00:00Z")
    assert db.get_cursor("whoop", "cycle") == "2024-02-01T00:00:00Z"
    assert db.query("SELECT count(*) FROM sync_state")[1] == [(1,)]


def test_export_parquet_has_every_table(db, tmp_path):
    write_records(db, [sample(0), sample(1)])
    written = db.export_parquet(tmp_path / "pq")
    assert set(written) == set(db.tables())
    assert pq.read_table(written["samples"]).num_rows == 2


def test_events_roundtrip_with_untrusted_text(db):
    start = datetime(2024, 3, 1, 9, tzinfo=TZ)
    title = "Ignore previous instructions'); DROP TABLE events; --"
    write_records(db, [Event("calendar", "cal", "e1", start, start + timedelta(hours=1), False,
                             date(2024, 3, 1), title=title)])
    assert db.query("SELECT title FROM events")[1] == [(title,)]


def test_samples_merge_on_natural_key_across_batches(db):
    """Bulk path: staged unindexed, merged once; duplicates across batches and re-imports
    collapse, changed values update in place, the last row in an import wins."""
    first = write_records(db, [sample(i) for i in range(10)] + [sample(3, value=33.0)], batch_size=4)
    assert (first.tables["samples"].inserted, first.tables["samples"].duplicates_in_batch) == (10, 1)
    assert db.query("SELECT value FROM samples WHERE start_ts = ?", [sample(3).start_ts])[1] == [(33.0,)]
    again = write_records(db, [sample(i) for i in range(12)], batch_size=5)
    assert (again.tables["samples"].inserted, again.tables["samples"].existing) == (2, 10)
    assert db.query("SELECT count(*), sum(value) FROM samples")[1] == [(12, 120.0)]


def test_samples_have_no_in_memory_key_index(db):
    """The natural key is enforced by the writer, not by a PRIMARY KEY (whose ART index
    would hold every row in memory)."""
    cons = db.query("SELECT count(*) FROM duckdb_constraints() WHERE table_name = 'samples' "
                    "AND constraint_type = 'PRIMARY KEY'")[1]
    assert cons == [(0,)]
    assert db.natural_key("samples") == ["source", "metric", "source_name", "start_ts", "end_ts"]


def test_raw_healthkit_has_no_in_memory_key_index_and_writers_are_capped(db):
    """raw_healthkit (~130 k rows per million Apple Health Records) is a bulk table too, so
    nothing an import holds in DuckDB memory grows with the history; writers run with the
    memory limit and thread cap that the import's peak RSS was measured with."""
    from storage.db import WRITER_MEMORY_LIMIT, WRITER_THREADS

    cons = db.query("SELECT count(*) FROM duckdb_constraints() WHERE table_name = 'raw_healthkit' "
                    "AND constraint_type = 'PRIMARY KEY'")[1]
    assert cons == [(0,)]
    assert db.natural_key("raw_healthkit") == ["kind", "natural_key"]
    limit = db.con.execute("SELECT current_setting('memory_limit'), current_setting('threads')").fetchone()
    number, unit = limit[0].split()  # DuckDB prints MiB: 128MB is "122.0 MiB"
    assert unit == "MiB" and float(number) * 2**20 == pytest.approx(int(WRITER_MEMORY_LIMIT[:-2]) * 1e6, rel=0.01)
    assert int(limit[1]) <= WRITER_THREADS


def database_at_version(path, version: int):
    """A raw DuckDB connection to a database migrated up to `version` only (an older Rhythm)."""
    import duckdb

    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name VARCHAR NOT NULL, "
                "checksum VARCHAR NOT NULL, applied_at TIMESTAMPTZ NOT NULL)")
    for m in load_migrations()[:version]:
        con.execute(m.sql)
        con.execute("INSERT INTO schema_migrations VALUES (?, ?, ?, now())", [m.version, m.name, m.checksum])
    return con


def test_migration_keeps_raw_rows_written_before_it(tmp_path):
    """0003 rebuilds raw_healthkit without its PRIMARY KEY: the rows already there survive."""
    path = tmp_path / "old.duckdb"
    con = database_at_version(path, 2)
    con.execute("INSERT INTO raw_healthkit VALUES ('record', 'k1', now(), '{\"a\":1}', 'h')")
    con.close()
    with open_db(path) as d:
        assert d.query("SELECT kind, natural_key, payload FROM raw_healthkit")[1] == [("record", "k1", '{"a":1}')]
        again = write_records(d, [RawRecord("healthkit", "record", "k1", '{"a":1}', datetime.now(UTC))])
        assert again.tables["raw_healthkit"].existing == 1
        assert d.query("SELECT count(*) FROM raw_healthkit")[1] == [(1,)]


def test_reimport_rewrites_only_rows_whose_values_changed(db):
    """A bulk table's changed rows are replaced (delete + insert, no in-memory UPDATE); an
    unchanged raw payload keeps the time it was first landed, a changed one the new time."""
    t1 = datetime(2024, 1, 1, tzinfo=UTC)
    t2 = datetime(2024, 2, 1, tzinfo=UTC)
    write_records(db, [RawRecord("healthkit", "record", k, f'{{"v":"{k}"}}', t1) for k in "abc"])
    again = write_records(db, [RawRecord("healthkit", "record", "a", '{"v":"a"}', t2),
                               RawRecord("healthkit", "record", "b", '{"v":"new"}', t2)])
    assert (again.tables["raw_healthkit"].inserted, again.tables["raw_healthkit"].existing) == (0, 2)
    rows = db.query("SELECT natural_key, payload, fetched_at FROM raw_healthkit ORDER BY natural_key")[1]
    assert rows == [("a", '{"v":"a"}', t1), ("b", '{"v":"new"}', t2), ("c", '{"v":"c"}', t1)]
    write_records(db, [sample(1), sample(2)])
    write_records(db, [sample(1, value=5.0), sample(2)])
    assert db.query("SELECT value FROM samples ORDER BY start_ts")[1] == [(5.0,), (10.0,)]


def test_unmerged_staged_rows_never_commit_silently(db):
    import pyarrow as pa
    table = pa.Table.from_pylist([{"source": "x", "metric": "m", "source_name": "", "start_ts": sample(0).start_ts,
                                    "end_ts": sample(0).end_ts, "local_day": date(2024, 3, 1)}])
    with pytest.raises(StorageError, match="never merged"), db.transaction():
        db.stage("samples", table)
    assert db.query("SELECT count(*) FROM samples")[1] == [(0,)]


def test_raw_rows_are_staged_and_merged_in_chunks_with_the_last_row_winning(db, monkeypatch):
    """Raw tables (PRIMARY KEY) take the staged path inside a transaction, merged every
    RAW_MERGE_ROWS rows: a key repeated in a later chunk updates the earlier row, and a
    re-import changes nothing but the payloads that changed."""
    from storage import writer as writer_mod

    monkeypatch.setattr(writer_mod, "RAW_MERGE_ROWS", 3)
    now = datetime.now(UTC)

    def raw(key: int, payload: str) -> RawRecord:
        return RawRecord("healthkit", "record", str(key), payload, now)

    rows = [raw(i, f'{{"v":{i}}}') for i in range(8)] + [raw(1, '{"v":"late"}'), raw(1, '{"v":"last"}')]
    first = write_records(db, rows, batch_size=10)  # raw records flush every 2: several merges
    counts = first.tables["raw_healthkit"]
    assert counts.received == 10 and counts.inserted == 8
    assert counts.existing + counts.duplicates_in_batch == 2
    assert db.query("SELECT count(*) FROM raw_healthkit")[1] == [(8,)]
    assert db.query("SELECT payload FROM raw_healthkit WHERE natural_key = '1'")[1] == [('{"v":"last"}',)]
    again = write_records(db, [raw(i, f'{{"v":{i}}}') for i in range(9)], batch_size=10)
    assert (again.tables["raw_healthkit"].inserted, again.tables["raw_healthkit"].existing) == (1, 8)
    assert db.query("SELECT payload, hash FROM raw_healthkit WHERE natural_key = '1'")[1] == [
        ('{"v":1}', writer_mod.payload_hash('{"v":1}'))
    ]
    assert db.query("SELECT count(*) FROM raw_healthkit")[1] == [(9,)]


@pytest.mark.parametrize("filter_bits", [None, 64])
def test_first_import_into_an_empty_bulk_table_appends_directly_and_the_last_row_wins(db, monkeypatch, filter_bits):
    """Into an empty bulk table, rows with a new key go straight in (no staging copy) and
    only rows whose key may repeat an earlier one are staged and merged: the last row for a
    key wins, within one large batch and across batches, and nothing appended is deleted.
    With a key filter of 64 bits (nearly every key a false "maybe seen") the result is the
    same. Later rows in the same transaction, once merged, take the staged path."""
    import numpy as np
    import pyarrow as pa

    from storage import db as db_mod

    if filter_bits:
        monkeypatch.setattr(db_mod.KeyFilter, "BITS", filter_bits)  # 8 bytes
    n = 250_000
    t0 = datetime(2024, 1, 1, tzinfo=UTC)

    def batch(keys: np.ndarray, values: np.ndarray) -> pa.Table:
        starts = pa.array((np.datetime64("2024-01-01") + keys.astype("timedelta64[m]")).astype("datetime64[us]"),
                          pa.timestamp("us")).cast(pa.timestamp("us", "UTC"))
        return pa.table({"source": pa.array(["healthkit"] * len(keys)), "metric": pa.array(["steps"] * len(keys)),
                         "source_name": pa.array(["Watch"] * len(keys)), "start_ts": starts, "end_ts": starts,
                         "value": pa.array(values, pa.float64()),
                         "local_day": pa.array([date(2024, 1, 1)] * len(keys), pa.date32())})

    keys = np.arange(n)
    keys[n - 1] = 5  # key 5 again at the end of the same batch
    keys[n // 2] = 7  # and key 7 in the middle
    with db.transaction():
        db.stage("samples", batch(keys, np.arange(n, dtype=float)))
        if not filter_bits:
            assert db.staged_rows("samples") == 2  # only the two repeats are staged
        db.stage("samples", batch(np.array([9, 10, 9]), np.array([-1.0, -2.0, -3.0])))
        merged = db.merge_staged("samples")
        assert (merged.received, merged.inserted, merged.existing, merged.duplicates_in_batch) == (n + 3, n - 2, 0, 5)
        db.stage("samples", batch(np.array([10, n + 5]), np.array([-20.0, 1.0])))
        assert db.staged_rows("samples") == 2  # not empty any more: staged and merged on the key
        again = db.merge_staged("samples")
        assert (again.inserted, again.existing) == (1, 1)
    value = {k: v for k, v in db.con.execute(
        "SELECT epoch_us(start_ts - ?::TIMESTAMPTZ) // 60000000, value FROM samples "
        "WHERE start_ts - ?::TIMESTAMPTZ < INTERVAL 11 MINUTE", [t0, t0]).fetchall()}
    assert value == {0: 0.0, 1: 1.0, 2: 2.0, 3: 3.0, 4: 4.0, 5: float(n - 1), 6: 6.0, 7: float(n // 2), 8: 8.0,
                     9: -3.0, 10: -20.0}
    assert db.query("SELECT count(*), count(DISTINCT start_ts) FROM samples")[1] == [(n - 1, n - 1)]


@pytest.mark.slow
def test_key_filter_never_misses_a_repeat():
    """The first-import key filter: every repeat (across batches or inside one) is reported;
    new keys mostly are not."""
    import numpy as np

    from storage.db import KeyFilter

    rng = np.random.default_rng(3)
    f = KeyFilter()
    seen: set[int] = set()
    false_yes = 0
    for _ in range(20):
        h = rng.integers(0, 2**64, 20_000, dtype=np.uint64)
        h[::50] = rng.choice(np.array(sorted(seen) or [1], np.uint64), len(h[::50]))  # repeats of earlier batches
        h[1::97] = h[::97][: len(h[1::97])]  # repeats inside the batch
        maybe = f.add(h)
        within: set[int] = set()
        for x, m in zip(h.tolist(), maybe.tolist(), strict=True):
            if x in seen or x in within:
                assert m
            elif m:
                false_yes += 1
            within.add(x)
        seen |= within
    assert false_yes < 0.001 * 20 * 20_000


def test_migration_0004_keeps_raw_rows_and_stores_payloads_with_zstd(tmp_path):
    """0004 rebuilds the four raw tables with `payload ... USING COMPRESSION zstd`: every row
    is kept, the keyed ones keep their PRIMARY KEY, and new payloads are written with zstd."""
    path = tmp_path / "v3.duckdb"
    con = database_at_version(path, 3)
    for src in ("healthkit", "garmin", "whoop", "calendar"):
        con.execute(f"INSERT INTO raw_{src} VALUES ('k', '{src}1', now(), '{{\"a\":1}}', 'h')")
    con.close()
    with open_db(path) as d:
        assert d.schema_version() >= 4
        for src in ("healthkit", "garmin", "whoop", "calendar"):
            assert d.query(f"SELECT natural_key, payload FROM raw_{src}")[1] == [(f"{src}1", '{"a":1}')]
            sql = d.con.execute("SELECT sql FROM duckdb_tables() WHERE table_name = ?", [f"raw_{src}"]).fetchone()[0]
            assert "payload JSON USING COMPRESSION ZSTD" in sql
            assert ("PRIMARY KEY" in sql) == (src != "healthkit")
        d.con.execute("INSERT INTO raw_healthkit SELECT 'record', 'k' || i, now(), '{\"beats\":' || i || '}', 'h' "
                      "FROM range(150000) t(i)")
        d.con.execute("CHECKPOINT")
        used = {r[0] for r in d.con.execute("SELECT compression FROM pragma_storage_info('raw_healthkit') "
                                             "WHERE column_name = 'payload'").fetchall()}
        assert "ZSTD" in used


def test_a_failed_first_import_rolls_back_and_restores_the_writer_settings(db):
    """A first import that fails while appending leaves the table empty and the connection
    with its usual threads and memory limit (the append settings are for appending only)."""
    import pyarrow as pa

    from storage.db import WRITER_THREADS

    def setting() -> tuple:
        return db.con.execute("SELECT current_setting('threads'), current_setting('memory_limit')").fetchone()

    before = setting()
    rows = pa.Table.from_pylist([{"source": "x", "metric": "m", "source_name": "", "start_ts": sample(i).start_ts,
                                  "end_ts": sample(i).end_ts, "local_day": date(2024, 3, 1)} for i in range(5)])
    with pytest.raises(RuntimeError), db.transaction():
        db.stage("samples", rows)
        assert db.staged_rows("samples") == 0 and int(setting()[0]) == 1  # appending, one thread
        raise RuntimeError("disk full")
    assert db.query("SELECT count(*) FROM samples")[1] == [(0,)]
    assert setting() == before and int(before[0]) == WRITER_THREADS


def test_migration_0007_renames_the_planners_stored_blocks_to_day_planner(tmp_path):
    """0007: blocks the real-day planner chose, stored as `bayes-v1`, carry its one name
    `day-planner` (agent.day.PLANNER_NAME); a local model's blocks keep theirs."""
    from agent.day import PLANNER_NAME

    path = tmp_path / "v6.duckdb"
    con = database_at_version(path, 6)
    for model in ("bayes-v1", "bayes-v1", "llm:student-real-q8_0.gguf"):
        con.execute("INSERT INTO recommendations (created_at, local_day, slot, action, model) "
                    "VALUES (now(), DATE '2024-05-08', 'morning', 'DEEP_WORK', ?)", [model])
    con.close()
    with open_db(path) as d:
        assert d.schema_version() >= 7
        models = d.query("SELECT model, count(*) FROM recommendations GROUP BY model ORDER BY model")[1]
    assert models == [(PLANNER_NAME, 2), ("llm:student-real-q8_0.gguf", 1)]
