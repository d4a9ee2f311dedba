"""Answers without typing (issue 38): how well the implicit judgements match what people did,
and whether the plan learns from them with zero typed answers.

Each generated person (lab.streams.synthetic_person: a device, nights, workouts, a calendar)
gets three weeks of history, then lives ``--days`` more days through the product's own path:
every morning ``rhythm recommend`` (rhythm.jobs.recommend) plans the day; the person follows
hidden rules about which blocks they do (a few actions they like and do most of the time, the
rest rarely; a real bedtime of their own, and a suggested one only followed when it is within
30 minutes of it); the generator writes what they did into their wearable data and calendar
(a workout near the block, the night's sleep onset, an event of that class, completed tasks)
next to the device's own samples of that day, and their calendar's events of the day come
in as an exported .ics (``rhythm import ics``); then ``rhythm map`` (rhythm.jobs.map_data)
judges the blocks. Run twice per person: with zero typed answers (``implicit``) and with a
typed answer to every block (``explicit``).

Every ``--google-every``-th person (default every second) also has the plan put into their
Google Calendar each morning (``rhythm plan push google``, against a loopback Calendar v3
server, lab.google_calendar) and acts on Rhythm's events there as people do: a block they
will not do is deleted with probability 0.8 (not SLEEP blocks: the night says those); a block
they will do is dragged to another time with probability 0.3 (each action by its own offset,
60-120 minutes), and then done at that time. A ``rhythm sync`` of the calendar runs before
each ``rhythm map``.

Printed: per class (EXERCISE, SLEEP, calendar-visible actions, work, the rest) the precision
(judgements that match the truth / judgements made) and the recall (blocks judged correctly /
blocks), and the share of blocks the person did in days 1-4 against the last four days.
Not scored: sleeping in (the night before is already written when the plan suggests it).
The classes are printed for everyone, and for the Google and the other people apart.

    python benchmarks/implicit.py                 # 20 people x 14 days, both modes
    python benchmarks/implicit.py --people 4 --modes implicit --google-every 0
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time as clock
from collections import defaultdict
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from common.records import Event, Sample, SleepSession, Workout  # noqa: E402
from lab.streams import synthetic_person, throwaway_home  # noqa: E402

CALENDAR_TITLES = {"FAMILY_TIME": "Family dinner", "SOCIALIZE": "Drinks with friends", "LEARN": "Spanish class",
                   "MEDITATE": "Meditation"}
LIKABLE = ("EXERCISE", "FAMILY_TIME", "SOCIALIZE", "LEARN", "MEDITATE", "DEEP_WORK", "ADMIN_WORK")


def group(action: str) -> str:
    if action in ("EXERCISE", "SLEEP"):
        return action
    if action in CALENDAR_TITLES:
        return "calendar-visible"
    if action in ("DEEP_WORK", "ADMIN_WORK"):
        return "work"
    return "other"


@dataclass
class Args:
    people: int = 20  # generated people
    days: int = 14  # days each lives with the product
    history_days: int = 21  # days of history before
    seed: int = 0  # the first person's seed
    modes: tuple[str, ...] = ("implicit", "explicit")
    google_every: int = 2  # every n-th person pushes plans to a (loopback) Google Calendar; 0: none


@dataclass
class Rules:
    """A person's hidden rules."""

    likes: set[str]
    real_bed_h: float  # their own bedtime (hours after midnight of the evening; 23.75 = 23:45)
    sleep_h: float
    p_like: float = 0.85
    p_other: float = 0.1
    p_delete: float = 0.8  # a pushed block they will not do: deleted from the calendar
    p_move: float = 0.3  # a pushed block they will do: dragged to another time first
    shift_min: dict[str, float] = field(default_factory=dict)  # where they drag each action

    def does(self, action: str, rng: np.random.Generator) -> bool:
        return bool(rng.random() < (self.p_like if action in self.likes else self.p_other))


def rules_for(seed: int) -> Rules:
    rng = np.random.default_rng([seed, 38])
    likes = set(rng.choice(LIKABLE, size=int(rng.integers(2, 5)), replace=False).tolist())
    rules = Rules(likes, float(rng.uniform(22.5, 24.5)), float(rng.uniform(6.8, 8.2)))
    rules.shift_min = {a: float(rng.choice([-1, 1]) * rng.uniform(60, 120)) for a in LIKABLE}
    return rules


@dataclass
class Outcome:
    truth: dict[int, bool] = field(default_factory=dict)  # recommendation id -> did it
    actions: dict[int, str] = field(default_factory=dict)
    day_of: dict[int, int] = field(default_factory=dict)  # 1-based day of the live period
    kinds: dict[int, str] = field(default_factory=dict)  # block | nap | bedtime | ...
    google: bool = False  # the person's plans went into their Google Calendar
    deleted: int = 0
    moved: int = 0


def live(seed: int, args: Args, root: Path, mode: str) -> tuple[Outcome, dict[int, tuple[str, float]]]:
    if args.google_every and seed % args.google_every == args.google_every - 1:
        from lab.google_calendar import GoogleServer, one_calendar
        from lab.loopback import Loopback

        with Loopback() as srv:
            zone = synthetic_person(seed, days=1).zone
            return _live(seed, args, root, mode, GoogleServer(srv, one_calendar(CALENDAR_ID, zone)))
    return _live(seed, args, root, mode, None)


CALENDAR_ID = "person@example.org"


def _google_home(root: Path, name: str, zone: str, g: Any) -> Any:
    """A home whose Google Calendar is the loopback ``g``, authorised to write."""
    import time as wall

    from connectors.oauth import FileTokenStore
    from lab.google_calendar import EVENTS, READONLY

    settings = throwaway_home(root, name, zone, google_api_base=g.api_base, google_token_url=g.token_url,
                              google_auth_url=g.auth_url, google_client_id="gid", google_client_secret="gsecret")
    FileTokenStore(settings.tokens_dir).save("google", {
        "access_token": g.grant_write(), "refresh_token": g.refresh_token, "expires_at": wall.time() + 3000,
        "scope": f"{READONLY} {EVENTS}"})
    return settings


def _act_on_calendar(g: Any, plan: Any, tz: ZoneInfo, does: dict[int, bool], rules: Rules,
                     rng: np.random.Generator, out: Outcome) -> dict[int, tuple[datetime, datetime]]:
    """The person deletes the pushed blocks they will not do (p_delete) and drags some they
    will do to their own time (p_move). Returns the moved blocks' new times."""
    from common.rhythm_blocks import GOOGLE_KEY, block_key, is_rhythm_google_event

    events = {e["extendedProperties"]["private"][GOOGLE_KEY]: e for e in g.live(CALENDAR_ID).values()
              if is_rhythm_google_event(e)}
    moved: dict[int, tuple[datetime, datetime]] = {}
    for s in plan.slots:
        ev = events.get(block_key(s.start.astimezone(tz).date(), s.slot)) if s.start else None
        if ev is None or s.id not in does or s.action == "SLEEP":
            continue
        if not does[s.id]:
            if rng.random() < rules.p_delete:
                g.cancel(CALENDAR_ID, ev["id"])
                out.deleted += 1
        elif rng.random() < rules.p_move:
            shift = timedelta(minutes=rules.shift_min.get(s.action, 90.0))
            start, end = s.start + shift, s.end + shift
            if start.astimezone(tz).date() != s.start.astimezone(tz).date():
                continue
            g.put(CALENDAR_ID, {**ev, "start": {**ev["start"], "dateTime": start.astimezone(tz).isoformat()},
                                "end": {**ev["end"], "dateTime": end.astimezone(tz).isoformat()}})
            moved[s.id] = (start, end)
            out.moved += 1
    return moved


def _live(seed: int, args: Args, root: Path, mode: str, g: Any) -> tuple[Outcome, dict[int, tuple[str, float]]]:
    from rhythm import jobs
    from storage import open_db
    from storage.implicit import implicit_answers
    from storage.writer import write_records

    person = synthetic_person(seed, days=args.history_days + args.days)
    tz = ZoneInfo(person.zone)
    first_live = person.last - timedelta(days=args.days - 1)
    rules = rules_for(seed)
    rng = np.random.default_rng([seed, 380])
    name = f"{person.name}-{mode}"
    settings = throwaway_home(root, name, person.zone) if g is None else _google_home(root, name, person.zone, g)
    src = next((r.source for r in person.records if isinstance(r, SleepSession)), "whoop")

    def day_of(r: Any) -> date | None:
        return getattr(r, "local_day", None)

    history = [r for r in person.records if (day_of(r) or first_live) < first_live]
    later = [r for r in person.records if (day_of(r) or first_live) >= first_live
             and isinstance(r, (Sample, Event))]  # the device's samples and the person's own calendar
    with open_db(settings.database) as db:
        write_records(db, history)
    jobs.map_data(settings, now=datetime.combine(first_live, time(5, 0), tz))
    out = Outcome(google=g is not None)
    for k in range(args.days):
        day = first_live + timedelta(days=k)
        morning = datetime.combine(day, time(6, 30), tz)
        plan = jobs.recommend(settings, day, now=morning)
        recs: list[Any] = [r for r in later if day_of(r) == day]
        bed_block = None
        does: dict[int, bool] = {}
        for s in plan.slots:
            if s.start is None:
                continue
            out.actions[s.id], out.day_of[s.id], out.kinds[s.id] = s.action, k + 1, s.kind or "block"
            if s.action == "SLEEP" and s.kind in ("bedtime", "early_night"):
                bed_block = s
                continue
            if s.action == "SLEEP" and s.kind == "sleep_in":
                continue  # the night before is written already: the generator cannot decide it (not scored)
            does[s.id] = out.truth[s.id] = rules.does(s.action, rng)
        moved: dict[int, tuple[datetime, datetime]] = {}
        if g is not None:
            jobs.push_google(settings, day, now=morning)
            moved = _act_on_calendar(g, plan, tz, does, rules, rng, out)
        for s in plan.slots:
            if does.get(s.id):
                at = s if s.id not in moved else replace(s, start=moved[s.id][0], end=moved[s.id][1])
                recs += did_records(at, src, tz, rng, seed)
        # the night: at the suggested bedtime when it is within 30 min of their own, else at their own
        own = datetime.combine(day, time(0, 0), tz) + timedelta(hours=rules.real_bed_h + rng.normal(0, 0.1))
        onset = own
        if bed_block is not None:
            suggested = bed_block.start  # a bedtime or an early night: in bed by its start
            follows = suggested >= own - timedelta(minutes=30)
            out.truth[bed_block.id] = bool(follows)
            if follows:
                onset = suggested + timedelta(minutes=float(rng.uniform(0, 20)))
        wake = onset + timedelta(hours=rules.sleep_h)
        recs.append(SleepSession(src, f"live-{seed}-{day}", onset, wake, wake.astimezone(tz).date(),
                                 sleep_min=rules.sleep_h * 60 - 20, in_bed_min=rules.sleep_h * 60))
        events = [r for r in recs if isinstance(r, Event)]
        with open_db(settings.database) as db:
            write_records(db, [r for r in recs if not isinstance(r, Event)])
        if events:  # the person's calendar, exported and imported as people do
            jobs.import_file(settings, "ics", write_ics(root / f"{name}-{day}.ics", events))
        if mode == "explicit":
            for rid, did in out.truth.items():
                if out.day_of[rid] == k + 1:
                    jobs.feedback(settings, rid, "accept" if did else "ignore")
        if g is not None:
            synced = jobs.sync(settings, ["google"], now=datetime.combine(day + timedelta(days=1), time(5, 50), tz))
            if not synced["ok"]:
                raise RuntimeError(f"the loopback calendar's sync failed: {synced['sources']}")
        jobs.map_data(settings, since=day - timedelta(days=1),
                      now=datetime.combine(day + timedelta(days=1), time(6, 0), tz))
    jobs.map_data(settings, since=person.last, now=datetime.combine(person.last + timedelta(days=1), time(12, 0), tz))
    with open_db(settings.database, read_only=True) as db:
        judged = {int(r["recommendation_id"]): (r["response"], float(r["confidence"])) for r in implicit_answers(db)}
    return out, judged


def write_ics(path: Path, events: list[Event]) -> Path:
    """``events`` as an iCalendar file (UTC times), as a calendar app exports them."""
    import icalendar

    cal = icalendar.Calendar()
    cal.add("prodid", "-//rhythm benchmarks//implicit//EN")
    cal.add("version", "2.0")
    cal.add("x-wr-calname", "primary")
    for e in events:
        ev = icalendar.Event()
        ev.add("uid", e.event_id)
        ev.add("summary", e.title or "")
        ev.add("dtstart", e.start_ts.astimezone(UTC))
        ev.add("dtend", e.end_ts.astimezone(UTC))
        ev.add("dtstamp", e.start_ts.astimezone(UTC))
        cal.add_component(ev)
    path.write_bytes(cal.to_ical())
    return path


def did_records(s: Any, src: str, tz: ZoneInfo, rng: np.random.Generator, seed: int) -> list[Any]:
    start = s.start + timedelta(minutes=float(rng.uniform(0, 20)))
    end = max(start + timedelta(minutes=15), s.end + timedelta(minutes=float(rng.uniform(-10, 10))))
    day = start.astimezone(tz).date()
    key = f"live-{seed}-{s.id}"
    if s.action == "EXERCISE":
        return [Workout(src, key, start, end, day, str(rng.choice(["running", "cycling", "strength_training"])),
                        duration_min=(end - start).total_seconds() / 60)]
    if s.action == "SLEEP" and s.kind == "nap":
        return [SleepSession(src, key, start, end, day, sleep_min=(end - start).total_seconds() / 60, is_nap=True)]
    if s.action in CALENDAR_TITLES:
        return [Event("calendar", "live", key, start, end, False, day, title=CALENDAR_TITLES[s.action])]
    if s.action in ("DEEP_WORK", "ADMIN_WORK"):
        t = s.end - timedelta(minutes=10)
        return [Sample("tasks", "task_completed", t, t, 1.0, "count", day, source_name="bench")]
    return []  # ME_TIME, BINGE_WATCH, sleeping in: nothing any device writes


def score(runs: list[tuple[Outcome, dict[int, tuple[str, float]]]]) -> dict[str, dict[str, float]]:
    per: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for out, judged in runs:
        for rid, did in out.truth.items():
            g = group(out.actions[rid])
            per[g]["blocks"] += 1
            if rid in judged:
                per[g]["judged"] += 1
                per[g]["right"] += int((judged[rid][0] == "accept") == did)
    return {g: {"blocks": c["blocks"], "judged": c["judged"],
                "precision": c["right"] / c["judged"] if c["judged"] else float("nan"),
                "recall": c["right"] / c["blocks"] if c["blocks"] else float("nan")} for g, c in per.items()}


def acceptance(runs: list[tuple[Outcome, dict[int, tuple[str, float]]]], days: int) -> tuple[float, float]:
    early = [d for out, _ in runs for rid, d in out.truth.items() if out.day_of[rid] <= 4]
    late = [d for out, _ in runs for rid, d in out.truth.items() if out.day_of[rid] > days - 4]
    return (float(np.mean(early)) if early else float("nan"), float(np.mean(late)) if late else float("nan"))


def main(args: Args) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode in args.modes:
            t0 = clock.perf_counter()
            runs = []
            for i in range(args.people):
                runs.append(live(args.seed + i, args, Path(tmp), mode))
                print(f"{mode}: person {i + 1}/{args.people} ({clock.perf_counter() - t0:.0f} s)", file=sys.stderr,
                      flush=True)
            google = [r for r in runs if r[0].google]
            others = [r for r in runs if not r[0].google]
            results[mode] = {"classes": score(runs), "acceptance": acceptance(runs, args.days),
                             "google": {"people": len(google), "classes": score(google),
                                        "acceptance": acceptance(google, args.days),
                                        "deleted": sum(o.deleted for o, _ in google),
                                        "moved": sum(o.moved for o, _ in google)},
                             "others": {"people": len(others), "classes": score(others),
                                        "acceptance": acceptance(others, args.days)},
                             "seconds": clock.perf_counter() - t0}
    print(f"{args.people} people x {args.days} days (after {args.history_days} days of history)")
    for mode, r in results.items():
        print(f"\n{mode}: {'zero typed answers' if mode == 'implicit' else 'a typed answer to every block'}"
              f" ({r['seconds']:.0f} s)")
        _table("everyone", r, args.days)
        g = r["google"]
        if g["people"]:
            _table(f"{g['people']} people with their plans in Google Calendar ({g['deleted']} blocks deleted, "
                   f"{g['moved']} moved)", g, args.days)
            _table(f"{r['others']['people']} people without", r["others"], args.days)
    return results


def _table(title: str, r: dict[str, Any], days: int) -> None:
    print(f"  {title}")
    print(f"    {'class':<18}{'blocks':>7}{'judged':>8}{'precision':>11}{'recall':>8}")
    for grp in ("EXERCISE", "SLEEP", "calendar-visible", "work", "other"):
        c = r["classes"].get(grp)
        if c:
            print(f"    {grp:<18}{c['blocks']:>7}{c['judged']:>8}{c['precision']:>11.2f}{c['recall']:>8.2f}")
    a, b = r["acceptance"]
    print(f"    blocks the person did: days 1-4 {a:.2f}, days {days - 3}-{days} {b:.2f} ({b - a:+.2f})")


def parse(argv: list[str] | None = None) -> Args:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--people", type=int, default=Args.people)
    p.add_argument("--days", type=int, default=Args.days)
    p.add_argument("--history-days", type=int, default=Args.history_days)
    p.add_argument("--seed", type=int, default=Args.seed)
    p.add_argument("--modes", nargs="+", default=list(Args.modes), choices=["implicit", "explicit"])
    p.add_argument("--google-every", type=int, default=Args.google_every,
                   help="every n-th person's plans go into a loopback Google Calendar (0: nobody's)")
    a = p.parse_args(argv)
    return Args(a.people, a.days, a.history_days, a.seed, tuple(a.modes), a.google_every)


if __name__ == "__main__":
    main(parse())
