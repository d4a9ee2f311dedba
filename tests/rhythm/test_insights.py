"""`rhythm insights` end to end: a generated person with planted habits, written through the
real storage writer and mapped by `rhythm map`, asked through the real CLI and the library
call the MCP server uses."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
from datetime import UTC, datetime, timedelta

import matplotlib.image as mpimg
import pytest

from lab.people import insight_person
from lab.people.insight_person import FIRST, LAST
from rhythm import jobs
from rhythm.insights import find_insights, run_insights
from rhythm.report import write_report
from rhythm.settings import init_home, load_settings
from storage import open_db
from storage.writer import write_records

KEYS = {"factor", "meter", "lag_days", "effect", "ci95", "n_with", "n_without", "q_value"}
ASKED = ("--factor", "title:Choir", "--factor", "workout@evening", "--factor", "late-meeting",
         "--factor", "title:haircut")


@pytest.fixture(scope="module")
def person(tmp_path_factory):
    """100 days of the generated person, mapped (built once for this module)."""
    home = tmp_path_factory.mktemp("insights_home")
    settings = load_settings(home=home, env={}, timezone="Europe/Amsterdam")
    init_home(settings)
    with open_db(settings.database) as db:
        write_records(db, insight_person.records())
    jobs.map_data(settings, now=datetime.combine(LAST + timedelta(days=1), datetime.min.time(), tzinfo=UTC)
                  .replace(hour=12))
    return settings


@pytest.fixture
def cli(person, run_cli, monkeypatch):
    monkeypatch.setenv("RHYTHM_TIMEZONE", "Europe/Amsterdam")

    def run(*args):
        return run_cli("--db", person.database, "insights", *args)

    return run


def _found(rows, factor, meter=None, lag=1):
    return [r for r in rows if r["factor"] == factor and r["lag_days"] == lag
            and (meter is None or r["meter"] == meter or (meter.endswith("*") and r["meter"].startswith(meter[:-1])))]


def test_planted_habits_are_found_with_the_right_sign(cli):
    code, out, err = cli(*ASKED, "--json")
    assert code == 0, err
    rows = json.loads(out)
    assert rows and all(KEYS <= set(r) and r["q_value"] <= 0.1 and r["status"] == "finding" for r in rows)
    assert [r["q_value"] for r in rows] == sorted(r["q_value"] for r in rows)
    days = insight_person.planted_days()

    (serene,) = _found(rows, "workout@evening", "serenity@morning")  # lower stress the next morning
    assert serene["effect"] > 0.05 and serene["ci95"][0] > 0 and serene["effect_unit"] == "meter"
    assert serene["n_with"] == len(days.run)  # every run day, each with its next morning
    (hrv,) = _found(rows, "workout@evening", "hrv_rmssd_ms")  # +10 ms planted in the next night's HRV
    assert hrv["effect_unit"] == "ms" and 6 < hrv["effect"] < 14 and hrv["ci95"][0] > 0

    tired = _found(rows, "late-meeting", "vitality@morning")  # an hour less sleep the night after
    assert tired and tired[0]["effect"] < 0 and tired[0]["ci95"][1] < 0
    assert not _found(rows, "late-meeting", "vitality@morning", lag=0)  # the morning before: never compared

    choir = _found(rows, "title:Choir", "connection*")
    assert choir and all(r["effect"] > 0 for r in choir)

    assert not [r for r in rows if r["factor"] == "title:haircut"]  # the control moves nothing


def test_the_table_says_what_moves_what_and_what_needs_more_days(cli):
    code, out, err = cli()
    assert code == 0, err
    assert "What moves your meters" in out and "comparisons tested" in out
    assert "workout@evening" in out and "-> serenity@morning, next day" in out
    assert "Correlation, not cause" in out
    assert "Not enough days yet" in out and "more days with it" in out  # e.g. no meditation ever
    code, out, err = cli("--factor", "title:haircut")
    assert code == 0, err
    assert "No finding at q < 0.1 yet" in out


def test_the_library_call_matches_the_cli_and_since_narrows_the_days(person, cli, monkeypatch):
    monkeypatch.setenv("RHYTHM_TIMEZONE", "Europe/Amsterdam")
    code, out, _ = cli(*ASKED, "--json")
    assert find_insights(person, ["title:Choir", "workout@evening", "late-meeting", "title:haircut"]) == json.loads(out)
    since = FIRST + timedelta(days=60)
    late = run_insights(person, ["workout@evening"], since=since.isoformat())
    assert late.first_day == since and late.days <= 41
    assert all(c.n_with + c.n_without <= late.days for c in late.comparisons)
    everything = find_insights(person, ["workout@evening"], include_all=True)
    assert {r["status"] for r in everything} >= {"finding", "not_significant"}
    assert len(everything) == len(run_insights(person, ["workout@evening"]).comparisons)


@pytest.mark.parametrize(("args", "says"), [
    (("--factor", "action:EXCERSISE"), "unknown action 'EXCERSISE'"),
    (("--factor", "title:"), "title text is empty"),
    (("--factor", "sleep:<six"), "expected hours"),
    (("--factor", "workout@lunch"), "unknown slot 'lunch'"),
    (("--since", "1 April"), "--since: expected a day as YYYY-MM-DD"),
    (("--max-q", "1.5"), "q threshold must be between 0 and 1"),
])
def test_bad_input_is_one_line_exit_2_and_changes_nothing(cli, person, args, says):
    before = hashlib.sha256(person.database.read_bytes()).hexdigest()
    code, out, err = cli(*args)
    assert code == 2 and out == ""
    assert says in err and len(err.strip().splitlines()) == 1
    assert hashlib.sha256(person.database.read_bytes()).hexdigest() == before


def test_titles_are_data_not_markup(cli):
    code, out, err = cli("--factor", "title:[bold red]$x$[/]", "--factor", "defaults")
    assert code == 0, err
    assert "title:[bold red]$x$[/]" in out  # shown as typed, not interpreted
    code, out, err = cli("--factor", "title:[bold red]$x$[/]", "--json", "--all")
    assert code == 0 and any(r["factor"] == "title:[bold red]$x$[/]" for r in json.loads(out))


def test_no_data_yet(rhythm_home, run_cli):
    code, out, err = run_cli("insights")
    assert code == 0 and "no meters yet" in out
    settings = load_settings()
    init_home(settings)
    with open_db(settings.database):
        pass
    code, out, err = run_cli("insights", "--json")
    assert code == 0 and json.loads(out) == []


# -- the report ----------------------------------------------------------------------------------
IMG_RE = re.compile(r'<img class="plot" alt="([^"]*)" src="data:image/png;base64,([A-Za-z0-9+/=]+)">')


def test_the_report_draws_the_top_findings(person, tmp_path):
    rep = write_report(person, days=14, today=LAST, out=tmp_path / "r.html")
    assert rep.sections["insights"] is True
    page = rep.path.read_text()
    section = page[page.index('<section id="insights">'):page.index('<section id="did">')]
    (alt, b64), = IMG_RE.findall(section)
    assert alt == "what moves your meters: effects with 95% intervals"
    png = mpimg.imread(io.BytesIO(base64.b64decode(b64)), format="png")
    assert png.shape[0] > 200 and png.shape[1] > 600
    assert "<td>workout@evening</td><td>serenity@morning</td><td>next day</td>" in section
    assert "over all 101 days with meters" in section  # the whole history, not the report's 14 days
    assert section.count("<tr>") == 1 + 12  # header + the top twelve


def test_report_titles_are_escaped_for_html_and_mathtext():
    from matplotlib import cbook

    from mapping.insights import OUTCOME_BY_NAME, DailyTable, compare, parse_factor
    from rhythm.report import ReportData, _finding_label, insights_plot, section_insights

    evil = parse_factor(r"title:<script>alert(1)</script> $\frac{$ & co")
    days = [FIRST + timedelta(days=i) for i in range(40)]
    on = {d for i, d in enumerate(days) if i % 3 == 0}
    out = {o: {} for o in OUTCOME_BY_NAME.values()}
    for i, d in enumerate(days + [days[-1] + timedelta(days=1)]):
        after = (d - timedelta(days=1)) in on
        out[OUTCOME_BY_NAME["connection@morning"]][d] = 0.5 + 0.01 * (i % 4) + (0.2 if after else 0.0)
    res = compare(DailyTable(days[0], days[-1], {evil: {d: d in on for d in days}}, out))
    assert res.findings
    label = _finding_label(res.findings[0])
    assert not cbook.is_math_text(label) and "<script>" in label  # literal text, drawn as typed
    assert insights_plot(res.findings).startswith('<img class="plot"')  # no mathtext error
    html_out, has, plots = section_insights(ReportData(LAST, FIRST, datetime.now(UTC), "db", insights=res))
    assert has and plots == 1
    assert "<script>" not in html_out and "&lt;script&gt;alert(1)&lt;/script&gt; $\\frac{$ &amp; co" in html_out


def test_since_after_the_last_day(cli):
    code, out, err = cli("--since", (LAST + timedelta(days=30)).isoformat())
    assert code == 0, err
    assert "no days with meters on or after" in out
