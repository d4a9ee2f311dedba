"""A new source is one folder plus one registry line.

The test writes a connector package into a temporary folder (its own folder, nothing else)
and adds its one line to connectors.registry.PACKAGES; `rhythm import`, `rhythm sync`,
settings, `rhythm status` and the raw table then know it without any other change.
"""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

from connectors import registry

PACKAGE = "dummysrc"

INIT = '''
from connectors.registry import ApiSync, FileImport

SOURCES = (
    FileImport(
        name="dummy",
        label="Dummy band",
        reader="dummysrc.reader:read_export",
        help="A dummy band's CSV export.",
        path_help="The export CSV.",
        record_source="dummy",
        options={"scale": "dummycloud_scale"},
    ),
    ApiSync(
        name="dummycloud",
        label="Dummy cloud",
        opener="dummysrc.reader:open_sync",
        authorised="dummysrc.reader:authorised",
        default_stream="steps",
        record_source="dummy",
        settings={"dummycloud_scale": 1, "dummycloud_api_base": "https://api.dummy.example"},
    ),
)
'''

READER = '''
import csv
import json
from datetime import UTC, date, datetime, timedelta

from common.errors import SourceFormatError
from common.records import RawRecord, Sample
from connectors.checkpoint import Checkpoint


def _rows(day, steps, scale, fetched):
    d = date.fromisoformat(day)
    start = datetime(d.year, d.month, d.day, 9, tzinfo=UTC)
    yield RawRecord("dummy", "day", day, json.dumps({"day": day, "steps": steps}), fetched)
    yield Sample("dummy", "steps", start, start + timedelta(hours=1), float(steps) * scale, "count", d,
                 source_name="dummy band", tz_offset_min=0)


def read_export(path, progress=None, scale=1):
    fetched = datetime(2025, 1, 1, tzinfo=UTC)
    with open(path, newline="") as f:
        for i, row in enumerate(csv.DictReader(f)):
            try:
                yield from _rows(row["day"], int(row["steps"]), scale, fetched)
            except (KeyError, ValueError) as exc:
                raise SourceFormatError(str(path), f"bad row: {exc}", f"row {i + 2}") from None


def authorised(ctx):
    return (ctx.tokens_dir / "dummycloud.json").exists()


def open_sync(ctx):
    start = int(ctx.cursors.get("steps") or 0)
    base = ctx.setting("dummycloud_api_base")
    fetched = datetime(2025, 1, 1, tzinfo=UTC)

    def records():
        for i in range(start, start + 3):
            yield from _rows(f"2025-01-{i + 1:02d}", 100 * (i + 1), ctx.setting("dummycloud_scale"), fetched)
        yield RawRecord("dummy", "base", "base", json.dumps({"base": base}), fetched)
        yield Checkpoint("dummycloud", "steps", str(start + 3))

    return records(), lambda: None
'''


@pytest.fixture
def dummy_source(tmp_path, monkeypatch):
    pkg = tmp_path / "src" / PACKAGE
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(textwrap.dedent(INIT))
    (pkg / "reader.py").write_text(textwrap.dedent(READER))
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    monkeypatch.setattr(registry, "PACKAGES", [*registry.PACKAGES, PACKAGE])  # the one registry line
    yield
    for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
        del sys.modules[name]


def _sql(run_cli, query):
    code, out, err = run_cli("sql", "--json", query)
    assert code == 0, err
    return json.loads(out)


def test_a_new_file_source_imports_through_the_cli(dummy_source, rhythm_home, run_cli, tmp_path):
    export = tmp_path / "export.csv"
    export.write_text("day,steps\n2025-01-01,1200\n2025-01-02,3400\n")
    code, out, err = run_cli("import", "dummy", export, "--json")
    assert code == 0, err
    assert json.loads(out)["records"] == 4
    assert _sql(run_cli, "SELECT count(*) AS n FROM raw_dummy") == [{"n": 2}]
    assert _sql(run_cli, "SELECT sum(value) AS s FROM samples WHERE source = 'dummy'") == [{"s": 4600.0}]
    code, out, err = run_cli("import", "dummy", export, "--json")  # again: nothing new
    assert code == 0 and json.loads(out)["duplicates_skipped"] == 4
    assert _sql(run_cli, "SELECT count(*) AS n FROM samples") == [{"n": 2}]
    code, out, _ = run_cli("import", "--help")
    assert "dummy" in out and "A dummy band" in out
    code, out, _ = run_cli("status", "--json")
    assert any(s["source"] == "dummy" and s["rows"]["samples"] == 2 for s in json.loads(out)["sources"])


def test_a_bad_file_of_the_new_source_leaves_nothing(dummy_source, rhythm_home, run_cli, tmp_path):
    good = tmp_path / "good.csv"
    good.write_text("day,steps\n2025-01-01,1200\n")
    assert run_cli("import", "dummy", good)[0] == 0
    bad = tmp_path / "bad.csv"
    bad.write_text("day,steps\n2025-01-03,10\n2025-01-04,many\n")
    code, _, err = run_cli("import", "dummy", bad)
    assert code == 1 and len(err.strip().splitlines()) == 1 and "row 3" in err
    assert _sql(run_cli, "SELECT count(*) AS n FROM samples") == [{"n": 1}]


def test_a_failed_first_import_leaves_no_raw_table(dummy_source, rhythm_home, run_cli, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("day,steps\n2025-01-04,many\n")
    assert run_cli("import", "dummy", bad)[0] == 1
    assert _sql(run_cli, "SELECT count(*) AS n FROM duckdb_tables() WHERE table_name = 'raw_dummy'") == [{"n": 0}]


def test_a_new_api_source_syncs_with_its_own_settings_and_cursor(dummy_source, rhythm_home, run_cli, monkeypatch):
    (rhythm_home / "tokens").mkdir(exist_ok=True)
    (rhythm_home / "tokens" / "dummycloud.json").write_text("{}")
    (rhythm_home / "config.toml").write_text("[dummycloud]\nscale = 2\n")
    monkeypatch.setenv("RHYTHM_DUMMYCLOUD_API_BASE", "http://127.0.0.1:9")
    code, out, err = run_cli("sync", "--json")  # every authorised source: the dummy one
    assert code == 0, err
    assert json.loads(out)["sources"]["dummycloud"]["ok"]
    assert _sql(run_cli, "SELECT cursor FROM sync_state WHERE source = 'dummycloud'") == [{"cursor": "3"}]
    assert _sql(run_cli, "SELECT sum(value) AS s FROM samples") == [{"s": 1200.0}]  # (100+200+300) x 2
    assert _sql(run_cli, "SELECT payload->>'base' AS b FROM raw_dummy WHERE kind = 'base'") == [
        {"b": "http://127.0.0.1:9"}]
    assert run_cli("sync", "dummycloud")[0] == 0  # from the cursor on: three more days
    assert _sql(run_cli, "SELECT count(*) AS n FROM samples") == [{"n": 6}]
    code, out, _ = run_cli("config", "show", "--json")
    shown = json.loads(out)
    assert shown["dummycloud_scale"] == {"value": 2, "from": "config"}
    assert shown["dummycloud_api_base"]["from"] == "env"


def test_an_unknown_source_is_one_clear_line(rhythm_home, run_cli, tmp_path):
    code, _, err = run_cli("sync", "nosuch")
    assert code == 2 and "unknown source 'nosuch'" in err and len(err.strip().splitlines()) == 1
    code, _, err = run_cli("import", "nosuch", tmp_path)
    assert code == 2 and "nosuch" in err
