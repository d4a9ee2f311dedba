"""Reasons from the person's own data: facts with their numbers against their own baseline.

Pure. Every fact is a sentence built from a template and numbers (never text from a model or
a calendar title): "slept 5 h 02 last night, your usual 7 h 35", "HRV 34 ms vs your 28-day
median 52", "4 h 30 of meetings today". ``facts_for(action, ...)`` picks the facts that
bear on an action, the largest departures from the person's usual first.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

from agent.day.calendar import Commitment, DayFrame, Night, Window, elapsed_min, is_night_sleep
from common.records import SLOTS as SLOT_NAMES
from common.timeutil import slot_of

BASELINE_DAYS = 28
MIN_BASELINE_DAYS = 5
METER_WORDS = {
    "vitality": "vitality",
    "cognition": "cognition",
    "progress": "progress",
    "serenity": "serenity",
    "connection": "connection",
}
# Which facts bear on which action (in order of relevance).
RELEVANT: dict[str, tuple[str, ...]] = {
    "DEEP_WORK": ("sleep", "cognition", "hrv", "morning", "work", "free", "meetings"),
    "ADMIN_WORK": ("progress", "meetings", "cognition", "sleep", "free"),
    "LEARN": ("cognition", "sleep", "morning", "free", "work"),
    "SLEEP": ("sleep", "shift", "vitality", "hrv", "resting_hr", "meetings"),
    "EXERCISE": ("shift", "hrv", "resting_hr", "steps", "vitality", "serenity", "sleep", "free"),
    "MEDITATE": ("serenity", "meetings", "hrv", "cognition", "free"),
    "FAMILY_TIME": ("connection", "social", "serenity", "meetings", "free"),
    "SOCIALIZE": ("connection", "social", "serenity", "free"),
    "ME_TIME": ("serenity", "shift", "vitality", "meetings", "social", "free"),
    "BINGE_WATCH": ("vitality", "shift", "serenity", "meetings", "free"),
}


@dataclass(frozen=True)
class PersonFacts:
    """Daily series of the person's own numbers (by local day) and the latest meters."""

    sleep_min: Mapping[date, float] = field(default_factory=dict)  # main sleep, by wake-up day
    hrv_ms: Mapping[date, float] = field(default_factory=dict)
    hrv_kind: str = "HRV"
    resting_hr: Mapping[date, float] = field(default_factory=dict)
    steps: Mapping[date, float] = field(default_factory=dict)
    recovery_pct: Mapping[date, float] = field(default_factory=dict)  # the wearable's recovery score (WHOOP)
    meters: Mapping[str, float | None] = field(default_factory=dict)  # 0.5 = usual for this slot
    meters_when: str | None = None  # e.g. "this morning"


@dataclass(frozen=True)
class Fact:
    key: str
    text: str
    weight: float  # how far from usual (z-like); larger first


def hm(minutes: float) -> str:
    m = int(round(minutes))
    return f"{m // 60} h {m % 60:02d}"


def baseline(series: Mapping[date, float], day: date, days: int = BASELINE_DAYS) -> tuple[float, int] | None:
    """Median of the ``days`` before ``day`` (the day itself excluded), with how many days."""
    vals = [v for d, v in series.items() if day - timedelta(days=days) <= d < day and v is not None]
    if len(vals) < MIN_BASELINE_DAYS:
        return None
    return float(statistics.median(vals)), len(vals)


def spread(series: Mapping[date, float], day: date) -> float:
    """The robust spread (MAD x 1.4826) of the baseline window before ``day``: what a day's
    value is measured against (1.0 with under three days; a tenth of the median when flat)."""
    vals = [v for d, v in series.items() if day - timedelta(days=BASELINE_DAYS) <= d < day and v is not None]
    if len(vals) < 3:
        return 1.0
    med = statistics.median(vals)
    mad = statistics.median(abs(v - med) for v in vals) * 1.4826
    return mad if mad > 0 else (abs(med) * 0.1 or 1.0)


def person_facts(f: PersonFacts, day: date) -> dict[str, Fact]:
    """The day's facts from the wearable series, each against the person's baseline."""
    out: dict[str, Fact] = {}
    last = f.sleep_min.get(day)
    base = baseline(f.sleep_min, day)
    if last is not None:
        z = (last - base[0]) / spread(f.sleep_min, day) if base else 0.0
        usual = f", your usual {hm(base[0])}" if base else ""
        out["sleep"] = Fact("sleep", f"slept {hm(last)} last night{usual}", abs(z))
    # two short nights in a row are worth saying
    prev = f.sleep_min.get(day - timedelta(days=1))
    if last is not None and prev is not None and base and last < base[0] - 45 and prev < base[0] - 45:
        out["sleep"] = Fact("sleep", f"two short nights ({hm(prev)}, then {hm(last)}); your usual {hm(base[0])}",
                            abs((last - base[0]) / spread(f.sleep_min, day)) + 1.0)
    for key, series, unit, label in (
        ("hrv", f.hrv_ms, "ms", f.hrv_kind),
        ("resting_hr", f.resting_hr, "bpm", "resting heart rate"),
    ):
        v = series.get(day)
        if v is None:
            continue
        b = baseline(series, day)
        if b:
            z = (v - b[0]) / spread(series, day)
            out[key] = Fact(key, f"{label} {v:.0f} {unit} vs your {b[1]}-day median {b[0]:.0f}", abs(z))
        else:
            out[key] = Fact(key, f"{label} {v:.0f} {unit} (not enough days yet for your usual)", 0.0)
    y = day - timedelta(days=1)
    if f.steps.get(y) is not None:
        b = baseline(f.steps, y)
        usual = f", your usual {b[0]:,.0f}" if b else ""
        z = (f.steps[y] - b[0]) / spread(f.steps, y) if b else 0.0
        out["steps"] = Fact("steps", f"{f.steps[y]:,.0f} steps yesterday{usual}", abs(z))
    when = f" {f.meters_when}" if f.meters_when else ""
    for m, word in METER_WORDS.items():
        v = f.meters.get(m)
        if v is None:
            continue
        shown = round(v, 2)  # the side of the number shown ("0.50 above 0.50" is no fact)
        side = "above" if shown > 0.5 else "below" if shown < 0.5 else "at"
        out[m] = Fact(m, f"{word} {v:.2f}{when} ({side} your usual, 0.50)", abs(v - 0.5) * 4)
    return out


def sleep_fact(nights: Sequence[Night], before: datetime, tz: Any) -> Fact | None:
    """The last main sleep that ended before ``before`` (a night's sleep is "last night"; a
    day sleep after a night shift says when it was), against the person's usual sleep of the
    same kind (night or day) over the four weeks before ``before``; elapsed time."""
    past = sorted((n for n in nights if n.wake <= before), key=lambda n: n.wake)
    if not past:
        return None
    last = past[-1]
    mins = last.sleep_min if last.sleep_min is not None else elapsed_min(last.bed, last.wake)
    night = is_night_sleep(last, tz)
    same = [n.sleep_min if n.sleep_min is not None else elapsed_min(n.bed, n.wake) for n in past[:-1]
            if is_night_sleep(n, tz) == night and n.wake >= before - timedelta(days=BASELINE_DAYS)]
    usual = float(statistics.median(same)) if len(same) >= MIN_BASELINE_DAYS else None
    local_bed, local_wake = last.bed.astimezone(tz), last.wake.astimezone(tz)
    if night and before.astimezone(tz) - local_wake < timedelta(hours=18):
        head = f"slept {hm(mins)} last night"
    else:
        head = f"your last sleep {hm(mins)} ({local_bed:%a %H:%M}-{local_wake:%H:%M})"
    if usual is None:
        return Fact("sleep", head, 0.0)
    spread = statistics.median(abs(v - usual) for v in same) * 1.4826 or max(1.0, usual * 0.1)
    kind = "" if night else " day"
    return Fact("sleep", f"{head}, your usual{kind} sleep {hm(usual)}", abs(mins - usual) / spread)


def calendar_facts(frame: DayFrame, slot: int, window: Window | None) -> dict[str, Fact]:
    out: dict[str, Fact] = {}
    shifts = [c for c in frame.commitments if c.action in ("ADMIN_WORK", "DEEP_WORK", None) and c.minutes >= 240]
    if shifts:  # a long work commitment is a shift, not hours of meetings (elapsed time, DST-safe)
        c = max(shifts, key=lambda c: c.minutes)
        out["shift"] = Fact("shift", f"a {hm(c.minutes)} shift ({c.start:%a %H:%M}-{c.end:%a %H:%M})",
                            max(0.0, (c.minutes - 480.0) / 120.0))
    meetings = [c for c in frame.commitments if c.action in ("ADMIN_WORK", None) and 15 <= c.minutes < 240]
    total = _union_min(meetings)
    if total >= 30:  # a heavy day (over 3 h) is what makes it worth saying
        out["meetings"] = Fact("meetings", f"{hm(total)} of meetings and appointments today",
                               max(0.0, (total - 180.0) / 90.0))
    if window is not None:
        nxt = next((c for c in frame.commitments if c.start >= window.end), None)
        until = f" (then {nxt.start:%H:%M})" if nxt is not None else ""
        out["free"] = Fact("free", f"free {window.start:%H:%M}-{window.end:%H:%M}{until}", 0.1)
    return out


def _union_min(cs: Sequence[Commitment]) -> float:
    total, cur_s, cur_e = 0.0, None, None
    for c in sorted(cs, key=lambda c: c.start):
        if cur_e is None or c.start > cur_e:
            if cur_e is not None:
                total += elapsed_min(cur_s, cur_e)
            cur_s, cur_e = c.start, c.end
        else:
            cur_e = max(cur_e, c.end)
    if cur_e is not None:
        total += elapsed_min(cur_s, cur_e)
    return total


def belief_facts(belief: Sequence[float], sd: Sequence[float]) -> dict[str, Fact]:
    names = (("social", "social", "outgoing", "someone who recharges alone"),
             ("morning", "morning", "a morning person", "an evening person"),
             ("work", "work", "energised by work", "drained by work"))
    out = {}
    for (key, dim, hi_word, lo_word), b, s in zip(names, belief, sd, strict=True):
        if abs(b - 0.5) < 0.1 or s > 0.2:
            continue
        word = hi_word if b > 0.5 else lo_word
        out[key] = Fact(key, f"your data say you are {word} ({dim} {b:.2f} ± {s:.2f})", abs(b - 0.5) * 3)
    return out


def facts_for(action: str, available: Mapping[str, Fact], limit: int = 3) -> list[Fact]:
    """The facts that bear on ``action``: the most relevant and the largest departures from
    the person's usual first (relevance order breaks near-ties), the free window last."""
    order = [k for k in ("since", *RELEVANT.get(action, ())) if k in available]
    keys = list(dict.fromkeys(order))
    rank = {k: 0.6 * (len(keys) - i) / max(1, len(keys)) for i, k in enumerate(keys)}
    facts = [available[k] for k in keys if k != "free"]
    facts.sort(key=lambda f: -(f.weight + rank[f.key]))
    out = facts[: limit - (1 if "free" in keys else 0)]
    if "free" in keys:
        out.append(available["free"])
    if not out:  # never without a number: fall back to the strongest fact there is
        rest = sorted(available.values(), key=lambda f: -f.weight)
        out = rest[:1]
    return out


#: the key of a fitted-effect fact that says the action lowers a meter (said after the facts for it)
AGAINST = "dynamics_against"

SINCE_ACTIONS = ("EXERCISE", "MEDITATE", "FAMILY_TIME", "SOCIALIZE", "ME_TIME", "LEARN", "DEEP_WORK")


def done_event(e: Any) -> bool:
    """Whether a calendar event (agent.day.CalendarEvent) is something the person did: it has
    an action, counts as done (not a hold), is timed, not Rhythm's own block, not cancelled and
    not declined."""
    return bool(e.action and e.done and not e.all_day and not e.rhythm_block
                and (e.status or "confirmed").lower() != "cancelled"
                and (e.self_response or "").lower() != "declined")


def since_fact(action: str, recent: Sequence[tuple[date, str, str]], day: date, days: int = 14,
               events: Sequence[Any] = (), before: datetime | None = None) -> Fact | None:
    """When the person last did ``action``, by the same history the person sees: their slot
    actions (``rhythm meters``) and the calendar's classified events that count as done
    (``events``: agent.day.CalendarEvent; a weekly meditation class is a meditation even in a
    slot its meetings dominate), before ``before``: "last exercise 4 days ago (Sat
    evening)", "no family time in the last 14 days"."""
    if action not in SINCE_ACTIONS:
        return None
    seen = {(d, s) for d, s, a in recent if a == action and day - timedelta(days=days) <= d < day}
    for e in events:
        if e.action != action or not done_event(e):
            continue
        if before is not None and e.end > before:
            continue
        d, s = slot_of(e.start.replace(tzinfo=None))
        if day - timedelta(days=days) <= d <= day:
            seen.add((d, SLOT_NAMES[s]))
    done = sorted(seen, key=lambda ds: (ds[0], SLOT_NAMES.index(ds[1])))  # slots in the day's order
    word = action.lower().replace("_", " ")
    if not done:
        return Fact("since", f"no {word} in your last {days} days", 1.5)
    d, s = done[-1]
    ago = (day - d).days
    when = "yesterday" if ago == 1 else "today" if ago == 0 else f"{ago} days ago"
    return Fact("since", f"last {word} {when} ({d:%a} {s})", max(0.0, (ago - 2) / 3.0))


def dynamics_facts(action: str, departures: Sequence[Mapping]) -> list[Fact]:
    """What the person's own history says ``action`` does where it departs from the table
    (``agent.personal.PersonalDynamics.departures`` with ``action`` and ``meter`` names and
    ``fitted`` and ``table`` in the plan's units, ``n``): "your data: EXERCISE leaves your
    vitality -0.08 (the table: +0.08; seen 41 times)". Largest departure first, at most two."""
    out = []
    for d in departures:
        if d["action"] != action:
            continue
        word = METER_WORDS.get(d["meter"], d["meter"])
        out.append(Fact(AGAINST if d["fitted"] < 0 else "dynamics",
                        f"your data: {action} leaves your {word} {d['fitted']:+.2f} "
                        f"(the table: {d['table']:+.2f}; seen {d['n']} times)",
                        2.0 + abs(d["fitted"] - d["table"]) * 10.0))
    return out[:2]
