"""The native Record scanner (connectors/healthkit/_scan.c) against the pure-Python path:
the same records on real, generated and synthetic exports, the same error (file, line, column) on
malformed ones, and the fallback when the extension is missing or switched off."""

from __future__ import annotations

import random
import shutil
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from common.errors import SourceFormatError
from common.records import RawRecord, RecordBatch
from connectors.healthkit import native, read_export
from connectors.healthkit import parser as parser_mod
from connectors.healthkit import source as source_mod
from lab.people import healthkit as generated
from tests.connectors.test_healthkit import (
    ALX,
    DOGSHEEP,
    HR,
    counts,
    export_xml,
    mixed_body,
    night,
    record,
    write,
)

needs_native = pytest.mark.skipif(not native.available(), reason="native scanner not built")


def outcome(path: Path, use_native: bool, monkeypatch) -> tuple:
    """Everything read_export yields, in a comparable form, or the error it raised."""
    monkeypatch.setenv(native.DISABLE_ENV, "0" if use_native else "1")
    rows, other = [], []
    try:
        for rec in read_export(path):
            if isinstance(rec, RecordBatch) and rec.record_type is RawRecord:
                c = rec.columns
                other.extend(("raw", *row) for row in zip(c["kind"], c["natural_key"], c["payload"], strict=True))
            elif isinstance(rec, RecordBatch):
                table = pa.table(rec.columns)
                rows.extend((repr(table.schema.types), sorted(r.items())) for r in table.to_pylist())
            elif isinstance(rec, RawRecord):
                other.append(("raw", rec.kind, rec.natural_key, rec.payload))
            else:
                other.append(repr(rec))
    except SourceFormatError as exc:
        return ("error", str(exc))
    return ("ok", sorted(map(repr, rows)), sorted(map(repr, other)))


def native_records(path: Path) -> int:
    """How many Records the native scanner took itself."""
    p = parser_mod.ExportParser(use_native=True)
    for chunk, _ in source_mod.chunks(source_mod.locate(path)):
        p.feed(chunk)
        list(p.drain())
    p.close()
    list(p.drain(final=True))
    return p._scanner.records()


@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="no C compiler")
def test_the_extension_is_built_where_a_compiler_is():
    assert native._Scanner is not None, "pip install -e . should have built connectors/healthkit/_scan"


def test_rhythm_no_native_forces_the_python_path(monkeypatch):
    monkeypatch.setenv(native.DISABLE_ENV, "1")
    assert not native.available()
    assert parser_mod.ExportParser()._scanner is None


@needs_native
@pytest.mark.parametrize("name", ["generated", "generated-zip", "dogsheep", "alxdrcirilo"])
def test_real_fixtures_give_the_same_records_on_both_paths(name, monkeypatch, request):
    path = {"generated": "healthkit_xml", "generated-zip": "healthkit_zip"}.get(name)
    path = request.getfixturevalue(path) if path else {"dogsheep": DOGSHEEP, "alxdrcirilo": ALX}[name]
    fast = outcome(path, True, monkeypatch)
    assert fast[0] == "ok" and len(fast[1]) > 0
    assert fast == outcome(path, False, monkeypatch)


@needs_native
def test_the_scanner_takes_the_records_and_leaves_the_rest_to_expat(healthkit_xml):
    assert native_records(healthkit_xml) == generated.RECORDS  # every Record of the generated export
    assert native_records(DOGSHEEP) == 2  # its Workout, ActivitySummary and Me went to expat


def unusual_body() -> str:
    """Records the scanner must take exactly as expat reads them, and some it must leave."""
    sleep = "HKCategoryTypeIdentifierSleepAnalysis"
    md = '<MetadataEntry key="HKTimeZone" value="Europe/Paris"/>'
    return (
        mixed_body()
        + night("Watch")
        + record(HR, "Anna &amp; Bob&apos;s W\u00e4tch &lt;2&gt;", "2024-03-02 10:00:00 +0100", "2024-03-02 10:00:00 +0100",
                 "61", unit="count/min", children='<MetadataEntry key="n&#10;o\tte" value="a &quot;b&quot; &#183; c &#x1F600;"/>')
        + record(sleep, "Watch", "2024-03-03 01:00:00 +0100", "2024-03-03 02:00:00 +0100",
                 "HKCategoryValueSleepAnalysisAsleepCore", children=md)
        # a category Record with a repeated metadata key (a dict for the Python path: left to it)
        + record(sleep, "Watch", "2024-03-03 02:00:00 +0100", "2024-03-03 03:00:00 +0100",
                 "HKCategoryValueSleepAnalysisAwake", children=md + md.replace("Paris", "Rome"))
        # a comment inside a Record, text and a comment between Records, a processing instruction
        + record(HR, "Watch", "2024-03-04 10:00:00 +0100", "2024-03-04 10:00:00 +0100", "70", unit="count/min",
                 children="<!-- kept out -->")
        + "  some text <!-- a comment --> <?pi data?>\n"
        # a MetadataEntry after a self-closing Record attaches to it (the Python path's rule)
        + record(HR, "Watch", "2024-03-04 11:00:00 +0100", "2024-03-04 11:00:00 +0100", "71", unit="count/min")
        + '  <MetadataEntry key="stray" value="1"/>\n'
        # dates of unusual shapes (the Arrow and Python date readers take those)
        + record(HR, "Watch", "2024-03-04 12:00:00 +01:00", "2024-03-04 12:00:00 Z", "72", unit="count/min")
        + record(HR, "Watch", "1969-12-31 23:59:59 -0100", "1969-12-31 23:59:59 -0100", "73", unit="count/min")
        + record("HKCategoryTypeIdentifierMindfulSession", "Breathe", "2024-03-02 12:00:00 +0530", "2024-03-02 12:10:00 +0530", None)
        + '  <Record type="HKQuantityTypeIdentifierStepCount" sourceName=\'single quoted\' startDate="2024-03-05 10:00:00 +0100"\n'
          '     endDate = "2024-03-05 10:05:00 +0100"   value="12"\n  />\n'
        + '  <Record type="HKQuantityTypeIdentifierStepCount" sourceName="ws" startDate="2024-03-05 11:00:00 +0100" '
          'endDate="2024-03-05 11:05:00 +0100" value="3"></Record >\n'
    )


@needs_native
@pytest.mark.parametrize("chunk", [7, 61, 997, 2 << 20])
def test_unusual_records_give_the_same_records_at_any_chunk_size(tmp_path, monkeypatch, chunk):
    path = write(tmp_path, "unusual.xml", export_xml(unusual_body()))
    monkeypatch.setattr(source_mod, "CHUNK", chunk)
    fast = outcome(path, True, monkeypatch)
    assert fast[0] == "ok"
    assert fast == outcome(path, False, monkeypatch)


@needs_native
def test_other_encodings_crlf_and_declared_entities_fall_back_and_agree(tmp_path, monkeypatch):
    body = unusual_body()
    crlf = write(tmp_path, "crlf.xml", "")
    crlf.write_bytes(export_xml(body).replace("\n", "\r\n").encode())
    latin = tmp_path / "latin.xml"
    latin.write_bytes(export_xml(body.replace("\U0001F600", "")).replace('encoding="UTF-8"', 'encoding="ISO-8859-1"')
                      .encode("latin-1", errors="replace"))
    entity = write(tmp_path, "entity.xml", export_xml(
        record(HR, "&watch;", "2024-03-02 10:00:00 +0100", "2024-03-02 10:00:00 +0100", "61", unit="count/min")
    ).replace("<!ELEMENT HealthData ANY>", '<!ELEMENT HealthData ANY>\n<!ENTITY watch "My Watch">'))
    for path in (crlf, latin, entity):
        fast = outcome(path, True, monkeypatch)
        assert fast[0] == "ok", fast
        assert fast == outcome(path, False, monkeypatch)
    assert "My Watch" in repr(outcome(entity, True, monkeypatch))


def malformed_cases() -> dict[str, str]:
    good = record(HR, "W", "2024-03-02 10:00:00 +0100", "2024-03-02 10:00:00 +0100", "60", unit="count/min")
    many = good * 50
    doc = export_xml(many + mixed_body())
    return {
        "truncated in a Record": doc[: doc.index("<Record", 3000) + 40],
        "truncated between Records": doc[: doc.index("<Record", 3000)],
        "unknown entity in an attribute": export_xml(many + good.replace('"W"', '"W &nope; x"') + many),
        "< in an attribute": export_xml(many + good.replace('"W"', '"W < x"') + many),
        "bad character reference": export_xml(many + good.replace('"W"', '"W &#0; x"') + many),
        "duplicate attribute": export_xml(many + good.replace('value="60"', 'value="60" value="61"') + many),
        "no space between attributes": export_xml(many + good.replace('" value=', '"value=') + many),
        "quantity Record without sourceName": export_xml(many + good.replace('sourceName="W" ', "") + many),
        "category Record without sourceName": export_xml(
            many + record("HKCategoryTypeIdentifierMindfulSession", "B", "2024-03-02 12:00:00 +0100",
                          "2024-03-02 12:10:00 +0100", None).replace('sourceName="B" ', "") + many),
        "category Record without sourceName, last": export_xml(
            many + record("HKCategoryTypeIdentifierMindfulSession", "B", "2024-03-02 12:00:00 +0100",
                          "2024-03-02 12:10:00 +0100", None).replace('sourceName="B" ', "")),
        "control character": export_xml(many + good.replace('"W"', '"W \x01"') + many),
        "mismatched end tag": export_xml(many + "  <Record type='x' sourceName='a' startDate='b' endDate='c'></Recor>\n" + many),
        "unclosed comment": export_xml(many + "  <!-- never closed\n" + many),
        "Record after the root": export_xml(many) + good,
        "unreadable quantity date": export_xml(many + good.replace('startDate="2024-03-02 10:00:00 +0100"', 'startDate="yesterday"') + many),
        "unreadable category date": export_xml(
            many + record("HKCategoryTypeIdentifierMindfulSession", "B", "2024-03-02 12:00:00 +0100", "soon", None) + many),
    }


@needs_native
@pytest.mark.parametrize("case", list(malformed_cases()))
def test_malformed_input_gives_the_same_error_on_both_paths(tmp_path, monkeypatch, case):
    path = write(tmp_path, "bad.xml", malformed_cases()[case])
    fast = outcome(path, True, monkeypatch)
    assert fast[0] == "error" and str(path) in fast[1], fast
    assert fast == outcome(path, False, monkeypatch)


@needs_native
def test_invalid_utf8_gives_the_same_error_on_both_paths(tmp_path, monkeypatch):
    good = record(HR, "W", "2024-03-02 10:00:00 +0100", "2024-03-02 10:00:00 +0100", "60", unit="count/min")
    for bad in (b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xef\xbf\xbe"):
        path = tmp_path / "utf8.xml"
        path.write_bytes(export_xml(good * 20 + good.replace('"W"', '"W_"') + good * 20).encode().replace(b"W_", b"W" + bad))
        fast = outcome(path, True, monkeypatch)
        assert fast[0] == "error" and "line 27, column" in fast[1], bad
        assert fast == outcome(path, False, monkeypatch)


@needs_native
def test_random_damage_gives_the_same_records_or_the_same_error(tmp_path, monkeypatch):
    """Seeded mutations of a varied export: truncation, stray bytes, markup inserted or
    deleted. Each file gives the same records, or the same error, on both paths."""
    src = export_xml(unusual_body() + DOGSHEEP.read_text(encoding="utf-8").split("<Me ", 1)[1].join(["<Me ", ""])
                     .rsplit("</HealthData>", 1)[0]).encode()
    rng = random.Random(20240602)
    inserts = [b"<!-- c -->", b"&amp;", b"&bogus;", b"&#0;", b"<X/>", b"</Record>", b"<Record>", b"text", b"<?pi x?>",
               b"<![CDATA[x]]>", "\u00e9".encode(), b"\t", b"<MetadataEntry key='a' value='b'/>", b"</HealthData>",
               b"<InstantaneousBeatsPerMinute bpm='1' time='2'/>"]
    path = tmp_path / "damaged.xml"
    errors = 0
    for _ in range(60):
        data = bytearray(src)
        pos = rng.randrange(len(data))
        kind = rng.randrange(4)
        if kind == 0:
            del data[pos:]
        elif kind == 1:
            data[pos] = rng.choice(b"<>&\"'/= \n\x00\xffa;#")
        elif kind == 2:
            data[pos:pos] = rng.choice(inserts)
        else:
            del data[pos : pos + rng.randrange(1, 40)]
        path.write_bytes(bytes(data))
        monkeypatch.setattr(source_mod, "CHUNK", rng.choice([61, 997, 2 << 20]))
        fast = outcome(path, True, monkeypatch)
        errors += fast[0] == "error"
        assert fast == outcome(path, False, monkeypatch), (kind, pos)
    assert 10 < errors < 60  # both kinds of outcome were exercised


@needs_native
def test_cli_bad_entity_deep_in_a_big_file_leaves_the_database_unchanged(tmp_path, rhythm_home, run_cli,
                                                                          healthkit_xml):
    assert run_cli("import", "healthkit", str(DOGSHEEP))[0] == 0
    before = {k: v for k, v in counts(rhythm_home).items() if k != "runs"}
    text = healthkit_xml.read_text(encoding="utf-8")
    source = f'sourceName="{generated.SOURCE_NAME}"'  # "test-device"
    cut = text.index(source, len(text) * 3 // 4)
    bad = write(tmp_path, "entity.xml", text[:cut] + 'sourceName="test &device;"' + text[cut + len(source):])
    code, _, err = run_cli("import", "healthkit", str(bad))
    assert code != 0
    line = text[:cut].count("\n") + 1
    assert f"entity.xml (line {line}, column" in err and "undefined entity" in err
    assert {k: v for k, v in counts(rhythm_home).items() if k != "runs"} == before


# -- dates out of range and impossible values (issue 22): the same outcome on both paths ------------
SLEEP_T = "HKCategoryTypeIdentifierSleepAnalysis"
OUT_OF_RANGE = [
    "0001-01-01 00:00:00 +1400", "9999-12-31 23:00:00 -1400", "1899-12-31 23:59:59 +0000",
    "1900-01-01 00:30:00 +0100", "2100-12-31 23:30:00 -0100", "2101-01-01 00:00:00 +0000", "0999-06-01 12:00:00 +0000",
]
IN_RANGE = ["1900-01-01 00:00:00 +0000", "1900-01-01 00:30:00 -0100", "2100-12-31 23:59:59 +0000", "2100-12-31 23:30:00 +0100"]


def varied_body(rng: random.Random, n: int) -> list[str]:
    rows = []
    for i in range(n):
        t = f"2024-03-{1 + i % 28:02d} {i % 24:02d}:{i % 60:02d}:00 +0{i % 3}00"
        if rng.random() < 0.2:
            rows.append(record(SLEEP_T, "W", t, t, "HKCategoryValueSleepAnalysisAsleepCore"))
        else:
            rows.append(record(HR, "W", t, t, str(50 + i % 60), unit="count/min"))
    return rows


@needs_native
@pytest.mark.parametrize("seed", range(6))
def test_a_date_out_of_range_anywhere_is_the_same_error_on_both_paths(tmp_path, monkeypatch, seed):
    rng = random.Random(seed)
    rows = varied_body(rng, 400)
    at = rng.randrange(len(rows))
    bad = rng.choice(OUT_OF_RANGE)
    which = rng.choice(["startDate", "endDate"])
    head, rest = rows[at].split(f'{which}="', 1)
    rows[at] = f'{head}{which}="{bad}"{rest.split(chr(34), 1)[1]}'
    path = write(tmp_path, "range.xml", export_xml("".join(rows)))
    monkeypatch.setattr(source_mod, "CHUNK", rng.choice([97, 4096, 2 << 20]))
    fast = outcome(path, True, monkeypatch)
    assert fast[0] == "error" and f"{which} '{bad}' is outside the accepted range 1900-01-01 .. 2100-12-31" in fast[1], fast
    assert ("line" in fast[1]) == (SLEEP_T in rows[at])  # category Records by line; quantity ones by number
    assert fast == outcome(path, False, monkeypatch)


@needs_native
def test_the_range_bounds_are_inclusive_on_both_paths(tmp_path, monkeypatch):
    for stamp in IN_RANGE:
        path = write(tmp_path, "edge.xml", export_xml(record(HR, "W", stamp, stamp, "60", unit="count/min")))
        fast = outcome(path, True, monkeypatch)
        assert fast[0] == "ok", (stamp, fast)
        assert fast == outcome(path, False, monkeypatch)


@needs_native
@pytest.mark.parametrize("seed", range(4))
def test_nan_inf_and_backwards_rows_are_left_out_alike_on_both_paths(tmp_path, monkeypatch, seed):
    rng = random.Random(100 + seed)
    rows, kept, nan, backwards = [], 0, 0, 0
    for i in range(300):
        t0, t1 = f"2024-03-02 {i % 24:02d}:{i % 60:02d}:00 +0100", f"2024-03-02 {i % 24:02d}:{i % 60:02d}:30 +0100"
        roll = rng.random()
        if roll < 0.08:
            rows.append(record(HR, "W", t0, t0, rng.choice(["NaN", "nan", "inf", "-inf", "1e999"]), unit="count/min"))
            nan += 1
        elif roll < 0.14:
            kind = rng.choice([(HR, "61", "count/min"), (SLEEP_T, "HKCategoryValueSleepAnalysisAsleepREM", None)])
            rows.append(record(kind[0], "W", t1, t0, kind[1], unit=kind[2]))
            backwards += 1
        else:
            t = f"2024-03-{1 + i % 28:02d} {i % 24:02d}:{i % 60:02d}:00 +0100"
            rows.append(record(HR, "W", t, t, str(40 + i), unit="count/min"))
            kept += 1
    path = write(tmp_path, "nan.xml", export_xml("".join(rows)))
    monkeypatch.setattr(source_mod, "CHUNK", rng.choice([97, 4096, 2 << 20]))
    fast = outcome(path, True, monkeypatch)
    assert fast[0] == "ok" and fast == outcome(path, False, monkeypatch)
    samples = [r for r in fast[1] if "'metric'" in r]
    assert len(samples) == kept
    skipped: Counter = Counter()
    for o in fast[2]:
        if "Skipped(" in o:
            skipped[o.split("reason=")[1].split(",")[0].strip("'\"")] += int(o.rsplit("count=", 1)[1].split(")")[0])
    assert skipped == {k: v for k, v in {"NaN or infinite value": nan, "end before start": backwards}.items() if v}
