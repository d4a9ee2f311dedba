"""`rhythm report`: every section from real rows, "no data yet" from none, and a real
headless Chromium that renders it with the plots and no console message."""

from __future__ import annotations

import base64
import io
import json
import os
import re
import shutil
import subprocess
from datetime import date
from pathlib import Path

import matplotlib.image as mpimg
import pytest

from rhythm.jobs import import_file
from rhythm.report import write_report
from rhythm.settings import init_home, load_settings
from storage import open_db
from tests.rhythm.fakes import fill_derived

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "rhythm" / "data" / "sample"
TODAY = date(2025, 3, 26)
IMG_RE = re.compile(r'<img class="plot" alt="([^"]*)" src="data:image/png;base64,([A-Za-z0-9+/=]+)">')


@pytest.fixture(scope="module")
def full_report(tmp_path_factory):
    """A report over three weeks of every table (built once for this module)."""
    home = tmp_path_factory.mktemp("report_home")
    settings = load_settings(home=home, env={}, timezone="Europe/Amsterdam")
    init_home(settings)
    import_file(settings, "whoop", SAMPLE / "whoop_export.zip")
    with open_db(settings.database) as db:
        fill_derived(db.con, TODAY, 21)
    return write_report(settings, days=21, today=TODAY, out=home / "report.html")


def test_every_section_has_data_and_the_plots_are_real_pngs(full_report):
    assert full_report.sections == {"plan": True, "meters": True, "insights": True, "did": True,
                                    "recommendations": True, "belief": True, "data": True}
    page = full_report.path.read_text()
    imgs = IMG_RE.findall(page)
    assert full_report.plots == len(imgs) == 8  # the day, 4 slots, actions, belief, coverage
    for alt, b64 in imgs:
        png = mpimg.imread(io.BytesIO(base64.b64decode(b64)), format="png")
        assert png.shape[0] > 150 and png.shape[1] > 600, alt
    assert {a for a, _ in imgs} >= {"meters in the morning over time", "belief over time with its uncertainty",
                                    "what you did, per day and slot"}
    # today's plan: the latest recommendation per slot, with belief ± sd and the reason, escaped
    plan = page[page.index('<section id="plan">'):page.index('<section id="meters">')]
    assert plan.count("<tr>") == 1 + 3 + 1 + 4  # plan header + 3 blocks, evidence header + 4 slots
    assert "slept 7 h 20, your usual 7 h 30" in plan and "vitality +0.05" in plan  # facts and effect
    assert "your calendar and the plan for" in plan  # the day drawn
    assert "because of &lt;signals&gt; on day 20 &amp; more" in plan and "<signals>" not in page
    assert re.search(r"social 0\.60 ± 0\.07", plan)
    assert "signals behind the morning meters" in plan and "hrv_rmssd" in plan
    recs = page[page.index('<section id="recommendations">'):page.index('<section id="belief">')]
    assert re.search(r"63 recommendations, \d+ answered, \d+ accepted, \d+ ignored", recs)
    # self-contained: nothing outside the page is referenced
    assert not re.search(r'(src|href)="(?!data:)', page)
    assert "http://" not in page and "https://" not in page
    assert "<script" not in page


def test_empty_database_gives_no_data_yet_sections(rhythm_home, tmp_path):
    settings = load_settings()
    init_home(settings)
    with open_db(settings.database):
        pass
    rep = write_report(settings, days=7, today=TODAY, out=tmp_path / "empty.html")
    assert not any(rep.sections.values()) and rep.plots == 0
    page = rep.path.read_text()
    for text in ("No plan for 2025-03-26 yet", "No meters yet", "No slot actions yet", "No recommendations yet",
                 "No belief yet", "No data in this period"):
        assert text in page


def test_no_database_at_all_still_writes_a_report(rhythm_home, tmp_path):
    rep = write_report(load_settings(), days=3, today=TODAY, out=tmp_path / "r.html")
    assert rep.path.exists() and rep.plots == 0


def test_report_cli(full_report, run_cli, tmp_path):
    out = tmp_path / "cli.html"
    home = full_report.path.parent
    code, stdout, err = run_cli("--home", home, "report", "--days", "7", "--date", "2025-03-26", "--out", out, "--json")
    assert code == 0, err
    doc = json.loads(stdout)
    assert doc["path"] == str(out) and doc["plots"] == 8 and all(doc["sections"].values())
    code, _, err = run_cli("report", "--date", "26/03/2025")
    assert code == 2 and "--date: expected YYYY-MM-DD" in err
    code, stdout, _ = run_cli("--home", home, "report", "--date", "2025-03-26")  # default: RHYTHM_HOME/reports/
    assert code == 0 and (home / "reports" / "report-2025-03-26.html").exists()


# -- a real browser ----------------------------------------------------------------------------
def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    message = "chromium not installed: `apt-get install -y chromium` (Debian) to check the report in a real browser"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(message)
    pytest.skip(message)


def render(page: Path, tmp_path: Path, *args: str) -> tuple[str, list[str]]:
    """Run headless Chromium on `page`; returns (stdout, console lines from its log)."""
    cmd = [
        chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={tmp_path / 'chromium-profile'}", "--enable-logging=stderr", "--v=0",
        *args, page.resolve().as_uri(),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, proc.stderr[-2000:]
    console = [ln for ln in proc.stderr.splitlines() if ":CONSOLE" in ln or "Uncaught" in ln]
    return proc.stdout, console


@pytest.mark.slow
def test_report_renders_in_headless_chromium_with_plots_and_no_console_errors(full_report, tmp_path):
    dom, console = render(full_report.path, tmp_path, "--dump-dom")
    assert console == []
    assert dom.count('<img class="plot"') == 8 and dom.count('src="data:image/png;base64,') == 8
    for sid in ("plan", "meters", "did", "recommendations", "belief", "data"):
        assert f'<section id="{sid}">' in dom
    shot = tmp_path / "shot.png"
    _, console = render(full_report.path, tmp_path, f"--screenshot={shot}", "--window-size=1200,2400")
    assert console == []
    pixels = mpimg.imread(shot)
    assert pixels.shape[:2] == (2400, 1200)
    colours = {tuple((px * 15).round().astype(int)) for px in pixels[::7, ::7, :3].reshape(-1, 3)}
    assert len(colours) > 40  # lines, bands and legends in colour: not a blank or error page


@pytest.mark.slow
def test_the_console_check_catches_errors(tmp_path):
    """The check above would see a broken page: a script error and a blocked external load."""
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" '
                   "content=\"default-src 'none'; img-src data:; script-src 'unsafe-inline'\"></head><body>"
                   '<img src="https://example.invalid/x.png"><script>notDefined()</script></body></html>')
    _, console = render(bad, tmp_path, "--dump-dom")
    text = "\n".join(console)
    assert "Uncaught ReferenceError: notDefined is not defined" in text
    assert "violates the following Content Security Policy" in text
