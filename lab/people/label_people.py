"""Synthetic people whose calendars carry titles no keyword table knows, for things their
wearables record (issue 40: labels learned from behaviour; benchmarks/learned_labels.py and
tests/mapping/test_labels_db.py).

Each person (seeded) has a watch (nightly sleep, hourly steps, workouts) and a calendar with:

- ``exercise`` titles: invented words ("Velmora Dienstag") for a weekly sport; the watch
  records a workout during most occurrences (sometimes they forget it);
- ``walk`` titles: brisk walks, no workout recorded, but 5,000-7,000 steps an hour;
- ``nap`` titles: an afternoon nap the watch sleeps through;
- ``other`` titles: invented words for meetings, clubs and visits (gold: not exercise): a
  random workout lands on one now and then, some sit right before a run (a little overlap),
  and some are walking meetings (many steps: the honest hard case);
- known titles the table labels ("Daily standup", "Focus time").

``truth`` maps each unknown title to its gold action. Records go through the real storage
writer (``make_db``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone

from common.records import Event, Sample, SleepSession, Workout

TZ = timezone(timedelta(hours=1))
OFF = 60
START = date(2024, 1, 1)  # a Monday
SYLLABLES = ["vel", "mor", "tar", "vik", "zun", "dal", "bre", "qui", "sol", "nax", "ombr", "fel", "gri", "lun",
             "pax", "rud", "sev", "tol", "ukk", "wen", "yor", "zeb", "kap", "lix", "mub", "nor", "plo", "hask"]
SUFFIXES = ["", " Dienstag", " Thursday", " am Kanal", " @ the hall", " (weekly)", " Runde 2", ""]


def at(day: date, hour: float) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=TZ) + timedelta(hours=hour)


def invented(rng: random.Random, used: set[str]) -> str:
    while True:
        word = "".join(rng.choice(SYLLABLES) for _ in range(rng.choice((2, 3)))).capitalize()
        title = word + rng.choice(SUFFIXES)
        if word.lower() not in used:
            used.add(word.lower())
            return title


@dataclass
class Person:
    seed: int
    days: int
    records: list = field(default_factory=list)
    truth: dict[str, str] = field(default_factory=dict)  # unknown title -> gold action
    kinds: dict[str, str] = field(default_factory=dict)  # unknown title -> kind


def person(seed: int, days: int = 42) -> Person:
    rng = random.Random(seed)
    p = Person(seed, days)
    used: set[str] = set()
    n_ex, n_walk, n_nap, n_other = rng.randint(1, 3), rng.randint(0, 1), rng.randint(0, 1), rng.randint(3, 6)
    plans: list[tuple[str, str, int, float, float]] = []  # title, kind, weekday, start hour, hours
    for kind, n in (("exercise", n_ex), ("walk", n_walk), ("nap", n_nap), ("other", n_other)):
        for _ in range(n):
            title = invented(rng, used)
            hours = {"exercise": rng.choice((1.0, 1.5)), "walk": 1.0, "nap": 1.0, "other": rng.choice((1.0, 2.0))}[kind]
            while True:  # no two of them at once (a double booking would blur the truth)
                wd = rng.randrange(7)
                h0 = {"exercise": rng.choice((7.0, 12.0, 18.0, 19.5)), "walk": rng.choice((7.5, 12.5, 17.5)),
                      "nap": 14.0, "other": rng.choice((10.0, 13.0, 16.0, 19.0))}[kind]
                if all(w != wd or h0 + hours + 1 <= a or a + b + 1 <= h0 for _, _, w, a, b in plans):
                    break
            plans.append((title, kind, wd, h0, hours))
            p.truth[title] = {"exercise": "EXERCISE", "walk": "EXERCISE", "nap": "SLEEP",
                              "other": rng.choice(("SOCIALIZE", "ADMIN_WORK", "LEARN"))}[kind]
            p.kinds[title] = kind
    others = [pl for pl in plans if pl[1] == "other"]
    walking_meeting = others[0][0] if others and rng.random() < 0.3 else None
    before_run = others[-1][0] if len(others) > 1 and rng.random() < 0.5 else None
    forget = rng.uniform(0.0, 0.25)  # share of sessions without the watch
    noise = rng.uniform(0.03, 0.12)  # share of days with a random workout
    for i in range(days):
        d = START + timedelta(days=i)
        sleep = rng.uniform(380, 480)
        s0 = at(d, -1.0 + rng.uniform(-0.5, 0.5))
        p.records.append(SleepSession("watch", f"s{seed}-{i}", s0, s0 + timedelta(minutes=sleep + 25), d,
                                      sleep_min=sleep, in_bed_min=sleep + 25, tz_offset_min=OFF))
        steps = {h: rng.uniform(150, 700) for h in range(7, 23)}
        if d.weekday() < 5:
            p.records.append(Event("calendar", "primary", f"std-{i}", at(d, 9), at(d, 9.25), False, d,
                                   title="Daily standup", attendees_count=6))
            p.records.append(Event("calendar", "primary", f"foc-{i}", at(d, 10), at(d, 12), False, d, title="Focus time"))
        for j, (title, kind, wd, h0, hours) in enumerate(plans):
            if d.weekday() != wd:
                continue
            eid = f"u{j}-{i}"
            p.records.append(Event("calendar", "primary", eid, at(d, h0), at(d, h0 + hours), False, d, title=title,
                                   recurring_event_id=f"series-{seed}-{j}"))
            wears = rng.random() >= forget
            if kind == "exercise" and wears:
                a = h0 + rng.uniform(0, 0.15)
                p.records.append(Workout("watch", f"w{eid}", at(d, a), at(d, a + hours * rng.uniform(0.7, 0.95)), d,
                                         rng.choice(("running", "strength", "cycling")), tz_offset_min=OFF))
            if kind == "walk" and wears:
                for h in range(int(h0), int(h0 + hours)):
                    steps[h] = rng.uniform(5000, 7000)
            if kind == "nap":
                p.records.append(SleepSession("watch", f"n{eid}", at(d, h0 + 0.1), at(d, h0 + hours - 0.1), d,
                                              sleep_min=(hours - 0.2) * 60, is_nap=True, tz_offset_min=OFF))
            if title == walking_meeting and wears:
                for h in range(int(h0), int(h0 + hours)):
                    steps[h] = rng.uniform(4200, 6000)
            if title == before_run and wears:  # a run that starts near the end of it
                a = h0 + hours - 0.25
                p.records.append(Workout("watch", f"r{eid}", at(d, a), at(d, a + 0.75), d, "running", tz_offset_min=OFF))
        if rng.random() < noise:  # a workout at a random time of day
            a = rng.uniform(7, 20)
            p.records.append(Workout("watch", f"x{seed}-{i}", at(d, a), at(d, a + 1), d, "running", tz_offset_min=OFF))
        for h, v in steps.items():
            p.records.append(Sample("watch", "steps", at(d, h), at(d, h + 1), round(v), "count", d, "watch",
                                    tz_offset_min=OFF))
    return p
