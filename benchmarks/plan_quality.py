"""Plan quality: are the real-day plans advice a person could follow? (issue 36)

    .venv/bin/python benchmarks/plan_quality.py                  # 30 people x 14 days, markdown table
    .venv/bin/python benchmarks/plan_quality.py --people 6 --days 5
    .venv/bin/python benchmarks/plan_quality.py --json
    .venv/bin/python benchmarks/plan_quality.py --results-md docs/results.md   # (re)writes its section

Generated people of six kinds in turn (office, rotating shift worker, night-shift nurse,
parent, student, retiree; ``lab.people.shift_people``), their calendars in English, Spanish,
German and French, in zones whose DST change falls inside the planned days. Each person
goes through the product's own path in a throw-away home: the records through the storage
writer, ``rhythm map``, then ``rhythm recommend`` (``rhythm.jobs.recommend``) for each planned
day at 06:00 local time (the Bayesian backend: the day planner decides). Each stored plan is
then judged from the database alone (``lab.plan_check``) and counted per person and in total:

- overlaps: blocks over a commitment or over each other (goal 0);
- asleep: non-SLEEP blocks while the person sleeps by their own data (0);
- missing sleep: sleeps of 3 h or more in the planned day without a SLEEP block (0);
- wrong evidence: evidence sentences whose numbers the database does not give back, or that
  ``rhythm insights`` on the same days (those before the plan) contradicts (0); sentences no rule parses are
  counted apart (unchecked).

Progress goes to stderr; the table (markdown, or ``--json``) to stdout.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from datetime import datetime, timedelta  # noqa: E402
from datetime import time as clock  # noqa: E402
from pathlib import Path  # noqa: E402
from zoneinfo import ZoneInfo  # noqa: E402

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

SECTION = "Plan quality"
# measured once with this checker on the product before issue 36 (kept with the section)
BEFORE = ("Before issue 36 (commit 9ca224b, the same people and checker, `--people 12 --days 7`): 16 blocks over "
          "a commitment or another block, 21 blocks while the person slept, 8 sleeps without a SLEEP block, "
          "80 of 988 evidence sentences wrong by the database or the insights (143 more in a form no rule "
          "parses); after: 0, 0, 0 and 0 of 1006 (0 unparsed).")
COLUMNS = ("blocks", "overlaps", "asleep", "missing_sleep", "evidence", "wrong", "unchecked")


def run_person(seed: int, days: int, root: Path, verbose: bool = False) -> dict:
    from lab.people.shift_people import shift_person
    from lab.plan_check import check_day
    from lab.streams import throwaway_home
    from rhythm import jobs
    from rhythm.insights import find_insights
    from storage import open_db
    from storage.writer import write_records

    p = shift_person(seed, plan_days=days)
    tz = ZoneInfo(p.zone)
    s = throwaway_home(root, p.name, p.zone)
    with open_db(s.database) as db:
        write_records(db, list(p.records))
    jobs.map_data(s, now=datetime.combine(p.last, clock(23), tz))
    row = {"person": p.name, "kind": p.kind, "lang": p.lang, "zone": p.zone, "days": len(p.plan_days),
           **{k: 0 for k in COLUMNS}, "examples": []}
    for day in p.plan_days:
        now = datetime.combine(day, clock(6), tz)
        jobs.recommend(s, day, now=now)
        findings = find_insights(s, until=day - timedelta(days=1))  # what `rhythm insights` showed then
        with open_db(s.database, read_only=True) as db:
            c = check_day(db, tz, day, now, sleeps=p.sleeps, findings=findings)
        row["blocks"] += c.blocks
        row["overlaps"] += len(c.overlaps)
        row["asleep"] += len(c.asleep)
        row["missing_sleep"] += len(c.missing_sleep)
        row["evidence"] += c.evidence
        row["wrong"] += len(c.wrong)
        row["unchecked"] += len(c.unchecked)
        row["examples"] += [f"{day} {x}" for x in (*c.overlaps, *c.asleep, *c.missing_sleep, *c.wrong)][:3]
        if verbose:
            for x in (*c.overlaps, *c.asleep, *c.missing_sleep, *c.wrong, *(f"unchecked: {u}" for u in c.unchecked)):
                print(f"  {p.name} {day}: {x}", file=sys.stderr)
    return row


def table(rows: list[dict], seconds: float) -> str:
    head = "| person | kind | lang | zone | days | " + " | ".join(COLUMNS) + " |"
    out = [head, "|" + "---|" * (5 + len(COLUMNS))]
    for r in rows:
        out.append(f"| {r['person']} | {r['kind']} | {r['lang']} | {r['zone']} | {r['days']} | "
                   + " | ".join(str(r[k]) for k in COLUMNS) + " |")
    tot = {k: sum(r[k] for r in rows) for k in COLUMNS}
    out.append(f"| **total** ({len(rows)} people) | | | | {sum(r['days'] for r in rows)} | "
               + " | ".join(f"**{tot[k]}**" for k in COLUMNS) + " |")
    out.append("")
    out.append(f"Goals: overlaps 0, asleep 0, missing_sleep 0, wrong 0. {seconds:.0f} s on this machine.")
    return "\n".join(out)


def write_section(path: Path, body: str, argv: str) -> None:
    text = path.read_text() if path.exists() else ""
    cmd = "python benchmarks/plan_quality.py" + (f" {argv}" if argv else "")
    what = "" if argv else " (30 people, 14 planned days each)"
    section = (f"## {SECTION}\n\n`{cmd}`{what} (issue 36): generated people of six "
               "kinds (office, rotating shift worker, night-shift nurse, parent, student, retiree), calendars in "
               "English, Spanish, German and French, zones whose DST change falls inside the planned days; "
               "each through the storage writer, `rhythm map` and `rhythm recommend` at 06:00 of every planned "
               "day, each stored plan judged from the database alone (`lab/plan_check.py`): blocks over a "
               "commitment or each other, non-SLEEP blocks while the person sleeps by their own data, sleeps "
               "of 3 h or more without a SLEEP block, evidence sentences whose numbers the database does not "
               "give back or that `rhythm insights` contradicts (sentences no rule parses: unchecked).\n\n"
               f"{body}\n\n{BEFORE}\n")
    pat = re.compile(rf"^## {re.escape(SECTION)}\n.*?(?=^## |\Z)", re.S | re.M)
    text = pat.sub(section, text) if pat.search(text) else text.rstrip() + "\n\n" + section
    path.write_text(text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--people", type=int, default=30, help="generated people (the six kinds in turn)")
    ap.add_argument("--days", type=int, default=14, help="planned days per person")
    ap.add_argument("--seed", type=int, default=0, help="the first person's seed")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a markdown table")
    ap.add_argument("--verbose", action="store_true", help="every finding on stderr")
    ap.add_argument("--results-md", type=Path, help="replace the 'Plan quality' section of this file")
    args = ap.parse_args(argv)
    t0 = time.time()
    rows = []
    with tempfile.TemporaryDirectory(prefix="rhythm-plan-quality-") as tmp:
        for k, seed in enumerate(range(args.seed, args.seed + args.people)):
            row = run_person(seed, args.days, Path(tmp), args.verbose)
            rows.append(row)
            print(f"[{k + 1}/{args.people}] {row['person']}: " + ", ".join(f"{c} {row[c]}" for c in COLUMNS)
                  + f" ({time.time() - t0:.0f} s)", file=sys.stderr)
    seconds = time.time() - t0
    if args.json:
        print(json.dumps({"rows": rows, "seconds": round(seconds, 1)}, indent=2))
    else:
        body = table(rows, seconds)
        print(body)
        if args.results_md:
            shown = " ".join(a for a in (argv if argv is not None else sys.argv[1:]) if not a.startswith("--results-md")
                             and not a.endswith(".md"))
            write_section(args.results_md, body, shown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
