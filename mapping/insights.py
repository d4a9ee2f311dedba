"""What moves this person's meters: days with a factor against days without it. Pure.

Two halves (docs/insights.md explains the method):

- ``daily_table(slots, inputs, tz, factors, first, last)``: from the stored meters and slot
  actions (``SlotRow``) and the stored sleep, workouts, events and day values
  (``StoredInputs``), each factor's value per day (True, False, or absent = unknown) and
  each outcome's value per day (the meters per slot, their day means, and sleep, HRV and
  resting heart rate in their own units).
- ``compare(table)``: every factor x outcome x lag (0 = the same day, 1 = the next day)
  that the timing rule allows, as a difference of means with Welch's 95 % interval (widened
  for autocorrelated days), a p-value and a Benjamini-Hochberg q-value over everything
  tested in the run. Fewer than ``MIN_DAYS`` days in either arm: not tested, and the result
  says how many more days are needed.

The timing rule: every factor has an *end* and every outcome a *start*, in slots counted from
the morning of the factor's day (-1 = the night before it, 0 morning, 1 afternoon, 2
evening, 3 night). An outcome is compared with a factor only when it starts after the factor
ends: ``4 * lag + outcome.start > factor.end``. So an evening workout meets that night's and
the next day's meters, never the evening's own; a night's sleep meets the day after it.

Factor expressions (``parse_factor``): ``action:NAME[@slot]``, ``title:TEXT[@slot]``,
``workout[@slot]``, ``late-meeting``, ``meetings:BIN``, ``sleep:BIN``, ``bedtime:BIN``,
where a BIN is ``<X``, ``>=X`` or ``A-B`` (A inclusive, B exclusive) in hours (``6h``, ``7.5``)
or, for bedtime, clock times (``23:30``); ``meetings:none``; and ``defaults`` for the
built-in set.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, tzinfo
from typing import Any

import numpy as np

from common.errors import ConfigError
from common.records import ACTIONS, METERS, SLOTS
from common.rows import SlotRow, StoredInputs
from common.timeutil import slot_of
from mapping.features import DataBundle, bundle_from_inputs, day_signals, union_min
from mapping.rules import Rules, default_rules
from mapping.stats import bh_qvalues, days_for_power, inflation, welch

MIN_DAYS = 3  # fewer days than this in either arm: not tested
LAGS = (0, 1)
Q_MAX = 0.1
POWER = 0.8
MEETING_HOURS = (6, 18)  # "meeting load": meetings between 06:00 and 18:00
LATE_HOUR = 18  # a late meeting runs past 18:00
SLOT_UNITS = 4

# -- factors -------------------------------------------------------------------------------------
KINDS = ("action", "title", "workout", "late-meeting", "meetings", "sleep", "bedtime")


@dataclass(frozen=True)
class Factor:
    """A yes/no property of a day. ``lo``/``hi`` bound a bin (``lo <= x < hi``, None = open):
    minutes for sleep and meetings, minutes after 12:00 for bedtime."""

    name: str
    kind: str
    slot: int | None = None
    arg: str | None = None
    lo: float | None = None
    hi: float | None = None

    @property
    def end(self) -> int:
        """The slot the factor ends in, counted from its day's morning (-1: the night before)."""
        if self.kind in ("sleep", "bedtime"):
            return -1
        if self.kind == "meetings":
            return 1
        if self.kind == "late-meeting":
            return SLOT_UNITS - 1
        return SLOT_UNITS - 1 if self.slot is None else self.slot

    def in_bin(self, x: float) -> bool:
        return (self.lo is None or x >= self.lo) and (self.hi is None or x < self.hi)

    def describe(self) -> str:
        where = f" in the {SLOTS[self.slot]}" if self.slot is not None else ""
        if self.kind == "action":
            return f"{(self.arg or '').lower().replace('_', ' ')}{where}"
        if self.kind == "title":
            return f"an event titled '...{self.arg}...'{where}"
        if self.kind == "workout":
            return f"a workout{where}"
        if self.kind == "late-meeting":
            return f"a meeting after {LATE_HOUR}:00"
        if self.kind == "meetings" and self.name == "meetings:none":
            return f"no meetings {MEETING_HOURS[0]:02d}-{MEETING_HOURS[1]}h"
        if self.kind == "meetings":
            return f"{_bin_text(self, _hours)} of meetings {MEETING_HOURS[0]:02d}-{MEETING_HOURS[1]}h"
        if self.kind == "sleep":
            return f"{_bin_text(self, _hours)} of sleep the night before"
        return f"bedtime {_bin_text(self, _clock)} the night before"


_SLOT_RE = re.compile(r"^(?P<body>.*)@(?P<slot>[A-Za-z]+)\s*$", re.S)
_EXAMPLES = ("title:Choir, action:EXERCISE@evening, workout@evening, late-meeting, meetings:>=3h, "
             "sleep:<6h, bedtime:>=00:00, defaults")


def _fail(expr: str, why: str) -> ConfigError:
    shown = expr if len(expr) <= 60 else expr[:57] + "..."
    return ConfigError(f"factor {shown!r}: {why} (examples: {_EXAMPLES})")


def _split_slot(expr: str, body: str, strict: bool) -> tuple[str, int | None]:
    m = _SLOT_RE.match(body)
    if not m:
        return body, None
    slot = m.group("slot").lower()
    if slot in SLOTS:
        return m.group("body"), SLOTS.index(slot)
    if strict:
        raise _fail(expr, f"unknown slot {m.group('slot')!r}; slots are {', '.join(SLOTS)}")
    return body, None


def _hours(v: float) -> str:
    return f"{v / 60:g}h"


def _clock(v: float) -> str:
    m = int(round(v + 12 * 60)) % (24 * 60)
    return f"{m // 60:02d}:{m % 60:02d}"


def _bin_text(f: Factor, fmt) -> str:
    if f.lo is None and f.hi is not None:
        return f"<{fmt(f.hi)}"
    if f.hi is None and f.lo is not None:
        return f">={fmt(f.lo)}"
    if fmt is _hours:
        return f"{f.lo / 60:g}-{f.hi / 60:g}h"
    return f"{fmt(f.lo)}-{fmt(f.hi)}"


def _parse_hours(expr: str, text: str) -> float:
    t = text.strip().lower()
    t = t[:-1] if t.endswith("h") else t
    try:
        v = float(t)
    except ValueError:
        raise _fail(expr, f"expected hours like 6h or 7.5, got {text!r}") from None
    if not math.isfinite(v) or not 0 <= v <= 24:
        raise _fail(expr, f"hours must be between 0 and 24, got {text!r}")
    return v * 60.0


def _parse_clock(expr: str, text: str) -> float:
    m = re.fullmatch(r"\s*(\d{1,2})(?::(\d{2}))?\s*", text)
    if not m or int(m.group(1)) > 24 or int(m.group(2) or 0) > 59:
        raise _fail(expr, f"expected a clock time like 23:30, got {text!r}")
    minutes = (int(m.group(1)) * 60 + int(m.group(2) or 0)) % (24 * 60)
    return float((minutes - 12 * 60) % (24 * 60))  # minutes after noon: 22:00 < 00:30


def _parse_bin(expr: str, text: str, parse) -> tuple[float | None, float | None]:
    t = text.strip()
    if t.startswith(">="):
        return parse(expr, t[2:]), None
    if t.startswith("<"):
        return None, parse(expr, t[1:])
    if "-" in t[1:]:
        i = t.index("-", 1)
        lo, hi = parse(expr, t[:i]), parse(expr, t[i + 1 :])
        if lo >= hi:
            raise _fail(expr, "a range A-B needs A before B")
        return lo, hi
    raise _fail(expr, "expected a bin: <X, >=X or A-B")


def parse_factor(expr: str) -> Factor:
    """A factor from its expression (see the module docstring); ConfigError if malformed."""
    if not isinstance(expr, str) or not expr.strip():
        raise _fail(str(expr), "empty")
    raw = expr.strip()
    head, sep, rest = raw.partition(":")
    kind = head.strip().lower().replace("_", "-")
    if not sep:
        body, slot = _split_slot(raw, raw, strict=True)
        word = body.strip().lower().replace("_", "-")
        if word in ("workout", "workouts"):
            return Factor("workout" + (f"@{SLOTS[slot]}" if slot is not None else ""), "workout", slot)
        if word in ("late-meeting", "late-meetings") and slot is None:
            return Factor("late-meeting", "late-meeting")
        raise _fail(raw, "unknown factor")
    if kind == "action":
        body, slot = _split_slot(raw, rest, strict=True)
        name = body.strip().upper().replace("-", "_").replace(" ", "_")
        if name not in ACTIONS:
            raise _fail(raw, f"unknown action {body.strip()!r}; actions are {', '.join(ACTIONS)}")
        return Factor(f"action:{name}" + (f"@{SLOTS[slot]}" if slot is not None else ""), "action", slot, name)
    if kind == "title":
        body, slot = _split_slot(raw, rest, strict=False)
        text = " ".join(body.split())
        if not text:
            raise _fail(raw, "title text is empty")
        if len(text) > 100:
            raise _fail(raw, "title text is longer than 100 characters")
        if any(not ch.isprintable() for ch in text):
            raise _fail(raw, "title text has control characters")
        return Factor(f"title:{text}" + (f"@{SLOTS[slot]}" if slot is not None else ""), "title", slot, text)
    if kind == "meetings":
        if rest.strip().lower() in ("none", "0", "0h"):
            return Factor("meetings:none", "meetings", lo=None, hi=1e-9)
        lo, hi = _parse_bin(raw, rest, _parse_hours)
        f = Factor("", "meetings", lo=lo, hi=hi)
        return Factor(f"meetings:{_bin_text(f, _hours)}", "meetings", lo=lo, hi=hi)
    if kind == "sleep":
        lo, hi = _parse_bin(raw, rest, _parse_hours)
        f = Factor("", "sleep", lo=lo, hi=hi)
        return Factor(f"sleep:{_bin_text(f, _hours)}", "sleep", lo=lo, hi=hi)
    if kind == "bedtime":
        lo, hi = _parse_bin(raw, rest, _parse_clock)
        f = Factor("", "bedtime", lo=lo, hi=hi)
        return Factor(f"bedtime:{_bin_text(f, _clock)}", "bedtime", lo=lo, hi=hi)
    raise _fail(raw, f"unknown kind {head.strip()!r}; kinds are action, title, workout, late-meeting, "
                     "meetings, sleep, bedtime")


DEFAULT_EXPRESSIONS: tuple[str, ...] = (
    *(f"action:{a}@{s}" for a in ACTIONS for s in SLOTS),
    "sleep:<6h", "sleep:6-7h", "sleep:7-8h", "sleep:>=8h",
    "bedtime:<22:00", "bedtime:22:00-23:00", "bedtime:23:00-00:00", "bedtime:00:00-01:00", "bedtime:>=01:00",
    "meetings:<1h", "meetings:1-3h", "meetings:>=3h", "late-meeting",
    "workout", "workout@morning", "workout@afternoon", "workout@evening", "workout@night",
)


def default_factors() -> list[Factor]:
    return [parse_factor(e) for e in DEFAULT_EXPRESSIONS]


def parse_factors(exprs: Iterable[str] | None) -> list[Factor]:
    """The factors of a run: the built-in set when ``exprs`` is empty or None (``defaults``
    adds it to user factors); duplicates dropped, order kept."""
    exprs = [exprs] if isinstance(exprs, str) else list(exprs or ())
    out: dict[str, Factor] = {}
    for e in exprs or ["defaults"]:
        if isinstance(e, str) and e.strip().lower() == "defaults":
            for f in default_factors():
                out.setdefault(f.name, f)
        else:
            f = parse_factor(e)
            out.setdefault(f.name, f)
    return list(out.values())


# -- outcomes ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Outcome:
    """What a factor may move: a meter in one slot, a meter's day mean, or a body measure of
    the night before the day (its own unit). ``start``: the slot it begins in."""

    name: str
    unit: str  # "meter" (0-1, 0.5 = usual for you), "min", "ms", "bpm"
    start: int


MEASURES = (("sleep_min", "min"), ("hrv_rmssd_ms", "ms"), ("hrv_sdnn_ms", "ms"), ("resting_hr_bpm", "bpm"))
OUTCOMES: tuple[Outcome, ...] = (
    *(Outcome(f"{m}@{s}", "meter", i) for m in METERS for i, s in enumerate(SLOTS)),
    *(Outcome(m, "meter", 0) for m in METERS),
    *(Outcome(name, unit, -1) for name, unit in MEASURES),
)
OUTCOME_BY_NAME = {o.name: o for o in OUTCOMES}


def allowed(factor: Factor, outcome: Outcome, lag: int) -> bool:
    """The timing rule: the outcome starts after the factor ends."""
    return SLOT_UNITS * lag + outcome.start > factor.end


# -- the daily table -----------------------------------------------------------------------------
@dataclass(frozen=True)
class DailyTable:
    """Factor days ``first..last``; each factor's known days (True/False) and each
    outcome's values (outcome days run to ``last + max lag``)."""

    first: date
    last: date
    factors: dict[Factor, dict[date, bool]]
    outcomes: dict[Outcome, dict[date, float]]

    @property
    def days(self) -> int:
        return (self.last - self.first).days + 1


def _days(first: date, last: date) -> list[date]:
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]


def _noon_minutes(t: datetime) -> float:
    return float((t.hour * 60 + t.minute - 12 * 60) % (24 * 60))


def _at(day: date, hour: float) -> datetime:
    return datetime(day.year, day.month, day.day) + timedelta(hours=hour)


def daily_table(
    slots: Sequence[SlotRow],
    inputs: StoredInputs,
    tz: tzinfo,
    factors: Sequence[Factor],
    first: date,
    last: date,
    rules: Rules | None = None,
) -> DailyTable:
    """Factor values of the days [first, last] and outcome values of [first, last + 1].

    Known days: slot actions on mapped days (a slot without a recognised action counts as
    without); sleep and bedtime when a main sleep ended that morning; meetings, late
    meetings and titles when the calendar covers the day (an event within the mapping's
    coverage window); workouts when a wearable recorded anything that day."""
    model = (rules or default_rules()).model
    b = bundle_from_inputs(inputs, tz)
    stored_action = {(e.source, e.calendar_id, e.event_id): e.action for e in inputs.events}
    days = _days(first, last)
    out_days = _days(first, last + timedelta(days=max(LAGS)))

    by_slot: dict[tuple[date, str], SlotRow] = {(r.day, r.slot): r for r in slots}
    mapped = {r.day for r in slots}

    # -- outcomes
    outcomes: dict[Outcome, dict[date, float]] = {o: {} for o in OUTCOMES}
    for d in out_days:
        for mi, m in enumerate(METERS):
            vals = []
            for s in SLOTS:
                r = by_slot.get((d, s))
                v = None if r is None else r.meters[mi]
                if v is not None and math.isfinite(v):
                    outcomes[OUTCOME_BY_NAME[f"{m}@{s}"]][d] = float(v)
                    vals.append(float(v))
            if len(vals) >= 2:
                outcomes[OUTCOME_BY_NAME[m]][d] = sum(vals) / len(vals)
        sig = day_signals(b, d, model)
        for name, _unit in MEASURES:
            if name in sig:
                outcomes[OUTCOME_BY_NAME[name]][d] = float(sig[name])

    # -- per-day facts the factors read
    k = model.calendar_coverage_days
    covered = {d for d in days if any((d + timedelta(days=i)) in b.event_days for i in range(-k, k + 1))}
    titled: dict[date, list[tuple[int | None, str]]] = {}  # day -> (slot or None for all-day, title)
    for e in b.events:
        if not e.active or not e.title:
            continue
        if e.all_day:
            d, end = e.start.date(), max(e.end.date(), e.start.date() + timedelta(days=1))
            while d < end:
                titled.setdefault(d, []).append((None, e.title.casefold()))
                d += timedelta(days=1)
        else:
            d, s = slot_of(e.start)
            titled.setdefault(d, []).append((s, e.title.casefold()))

    def is_meeting(e: Any) -> bool:
        return (e.attendees or 0) >= 2 or stored_action.get(e.key) == "ADMIN_WORK"

    workouts: dict[date, set[int]] = {}
    for w in b.workouts:
        d, s = slot_of(w.start)
        workouts.setdefault(d, set()).add(s)

    def sleep_facts(d: date) -> tuple[float, float] | None:
        main = b.main_sleep(d)
        if not main:
            return None
        total = sum(r.sleep_min if r.sleep_min is not None else max(0.0, (r.end - r.start).total_seconds() / 60)
                    for r in main)
        return total, _noon_minutes(min(r.start for r in main))

    table: dict[Factor, dict[date, bool]] = {}
    for f in factors:
        vals: dict[date, bool] = {}
        for d in days:
            v = _factor_value(f, d, by_slot, mapped, covered, titled, workouts, b, is_meeting, sleep_facts)
            if v is not None:
                vals[d] = v
        table[f] = vals
    return DailyTable(first, last, table, outcomes)


def _factor_value(f, d, by_slot, mapped, covered, titled, workouts, b: DataBundle, is_meeting, sleep_facts):
    """True / False for factor ``f`` on day ``d``, None when it cannot be known that day."""
    if f.kind == "action":
        if d not in mapped:
            return None
        if f.slot is not None:
            r = by_slot.get((d, SLOTS[f.slot]))
            return None if r is None else r.action == f.arg
        return any((r := by_slot.get((d, s))) is not None and r.action == f.arg for s in SLOTS)
    if f.kind == "workout":
        if d not in b.wearable_days:
            return None
        return bool(workouts.get(d)) if f.slot is None else f.slot in workouts.get(d, ())
    if f.kind in ("sleep", "bedtime"):
        facts = sleep_facts(d)
        if facts is None:
            return None
        return f.in_bin(facts[0] if f.kind == "sleep" else facts[1])
    if d not in covered:  # calendar factors
        return None
    if f.kind == "title":
        needle = (f.arg or "").casefold()
        return any(needle in t and (f.slot is None or s == f.slot) for s, t in titled.get(d, ()))
    if f.kind == "meetings":
        lo, hi = _at(d, MEETING_HOURS[0]), _at(d, MEETING_HOURS[1])
        minutes = union_min([(e.start, e.end) for e in b.events_between(lo, hi) if is_meeting(e)], lo, hi)
        return f.in_bin(minutes)
    if f.kind == "late-meeting":
        lo, hi = _at(d, LATE_HOUR), _at(d, 30)
        return any(is_meeting(e) for e in b.events_between(lo, hi))
    raise ValueError(f"unknown factor kind {f.kind!r}")


# -- the comparisons -----------------------------------------------------------------------------
FINDING, NOT_SIGNIFICANT, NOT_ENOUGH_DAYS, NO_VARIATION = "finding", "not_significant", "not_enough_days", "no_variation"


@dataclass
class Comparison:
    """One factor x outcome x lag: its days, and once tested its effect, interval, p and q."""

    factor: Factor
    outcome: Outcome
    lag_days: int
    n_with: int
    n_without: int
    status: str = NOT_ENOUGH_DAYS
    mean_with: float | None = None
    mean_without: float | None = None
    effect: float | None = None
    ci95: tuple[float, float] | None = None
    p_value: float | None = None
    q_value: float | None = None
    effect_size: float | None = None  # effect / pooled standard deviation (Cohen's d)
    inflation: float = 1.0  # variance inflation for autocorrelated days
    more_days: tuple[int, int] | None = None  # (with, without) still needed; None: no effect seen
    arm_sd: tuple[float, float] = (0.0, 0.0)  # each arm's spread as the test used it
    df: float = math.inf  # the test's degrees of freedom

    def to_dict(self) -> dict[str, Any]:
        def r(v: float | None, nd: int = 4) -> float | None:
            return None if v is None else float(round(v, nd))

        return {
            "factor": self.factor.name,
            "meter": self.outcome.name,
            "lag_days": self.lag_days,
            "effect": r(self.effect),
            "effect_unit": self.outcome.unit,
            "ci95": None if self.ci95 is None else [r(self.ci95[0]), r(self.ci95[1])],
            "n_with": self.n_with,
            "n_without": self.n_without,
            "mean_with": r(self.mean_with),
            "mean_without": r(self.mean_without),
            "effect_size": r(self.effect_size, 3),
            "p_value": None if self.p_value is None else float(f"{self.p_value:.3g}"),
            "q_value": None if self.q_value is None else float(f"{self.q_value:.3g}"),
            "status": self.status,
            "more_days_needed": None if self.more_days is None else
            {"with": self.more_days[0], "without": self.more_days[1]},
        }


@dataclass
class InsightResult:
    first_day: date | None
    last_day: date | None
    factors: list[Factor] = field(default_factory=list)
    comparisons: list[Comparison] = field(default_factory=list)
    q_max: float = Q_MAX

    @property
    def days(self) -> int:
        return 0 if self.first_day is None or self.last_day is None else (self.last_day - self.first_day).days + 1

    @property
    def tested(self) -> list[Comparison]:
        return [c for c in self.comparisons if c.p_value is not None]

    @property
    def findings(self) -> list[Comparison]:
        """Comparisons with q <= q_max, the most certain first."""
        return sorted((c for c in self.comparisons if c.status == FINDING),
                      key=lambda c: (c.q_value, c.p_value, -abs(c.effect_size or 0)))

    def closest(self, limit: int = 5) -> list[Comparison]:
        """Tested comparisons that are not findings yet, by p-value (those with an effect)."""
        rest = [c for c in self.comparisons if c.status == NOT_SIGNIFICANT and c.more_days is not None]
        return sorted(rest, key=lambda c: c.p_value)[:limit]

    def below_floor(self) -> list[dict[str, Any]]:
        """Factors with no comparison that reached MIN_DAYS days in both arms: the most days
        seen with and without it, and how many more of each are needed."""
        per: dict[str, list[Comparison]] = {}
        for c in self.comparisons:
            per.setdefault(c.factor.name, []).append(c)
        out = []
        for f in self.factors:
            cs = per.get(f.name, [])
            if any(c.status != NOT_ENOUGH_DAYS for c in cs):
                continue
            n_with = max((c.n_with for c in cs), default=0)
            n_without = max((c.n_without for c in cs), default=0)
            out.append({"factor": f.name, "n_with": n_with, "n_without": n_without,
                        "more_days_needed": {"with": max(0, MIN_DAYS - n_with),
                                             "without": max(0, MIN_DAYS - n_without)}})
        out.sort(key=lambda r: r["more_days_needed"]["with"] + r["more_days_needed"]["without"])
        return out


def _arrays(table: DailyTable) -> tuple[list[date], dict[Factor, np.ndarray], dict[Outcome, np.ndarray]]:
    days = _days(table.first, table.last + timedelta(days=max(LAGS)))
    idx = {d: i for i, d in enumerate(days)}
    n = table.days
    fx: dict[Factor, np.ndarray] = {}
    for f, vals in table.factors.items():
        a = np.full(n, np.nan)
        for d, v in vals.items():
            i = idx.get(d)
            if i is not None and i < n:
                a[i] = 1.0 if v else 0.0
        fx[f] = a
    oy: dict[Outcome, np.ndarray] = {}
    for o, vals in table.outcomes.items():
        a = np.full(len(days), np.nan)
        for d, v in vals.items():
            i = idx.get(d)
            if i is not None and v is not None and math.isfinite(v):
                a[i] = float(v)
        oy[o] = a
    return days, fx, oy


def compare(
    table: DailyTable,
    *,
    lags: Sequence[int] = LAGS,
    q_max: float = Q_MAX,
    min_days: int = MIN_DAYS,
    power: float = POWER,
    outcomes: Sequence[Outcome] | None = None,
) -> InsightResult:
    """Every allowed factor x outcome x lag of the table (see the module docstring)."""
    if not 0 < q_max < 1:
        raise ConfigError(f"q threshold must be between 0 and 1, got {q_max}")
    _, fx, oy = _arrays(table)
    n = table.days
    result = InsightResult(table.first, table.last, list(table.factors), q_max=q_max)
    wanted = [o for o in (outcomes or OUTCOMES) if o in oy]
    for f, x in fx.items():
        if not np.isfinite(x).any():
            continue
        for lag in lags:
            for o in wanted:
                if not allowed(f, o, lag):
                    continue
                y = oy[o][lag : lag + n]
                if len(y) < n:
                    y = np.concatenate([y, np.full(n - len(y), np.nan)])
                ok = np.isfinite(x) & np.isfinite(y)
                w_mask, wo_mask = ok & (x == 1.0), ok & (x == 0.0)
                c = Comparison(f, o, lag, int(w_mask.sum()), int(wo_mask.sum()))
                result.comparisons.append(c)
                if c.n_with < min_days or c.n_without < min_days:
                    c.more_days = (max(0, min_days - c.n_with), max(0, min_days - c.n_without))
                    continue
                yw, yo = y[w_mask], y[wo_mask]
                c.mean_with, c.mean_without = float(yw.mean()), float(yo.mean())
                resid = np.where(w_mask, y - c.mean_with, np.where(wo_mask, y - c.mean_without, np.nan))
                c.inflation = inflation(np.where(ok, x, np.nan), resid)
                w = welch(yw, yo, c.inflation)
                if w is None:
                    c.status = NO_VARIATION
                    continue
                c.effect, c.ci95, c.p_value = w.effect, w.ci95, w.p_value
                c.effect_size = w.effect / w.sd_pooled if w.sd_pooled > 0 else None
                c.arm_sd, c.df = (w.sd_with, w.sd_without), w.df
    tested = result.tested
    for c, q in zip(tested, bh_qvalues([c.p_value for c in tested]), strict=True):
        c.q_value = q
        c.status = FINDING if q <= q_max else NOT_SIGNIFICANT
    # Days still needed: for the next finding, BH asks p <= q_max (R + 1) / m.
    alpha = q_max * (sum(1 for c in tested if c.status == FINDING) + 1) / max(1, len(tested))
    for c in tested:
        if c.status == FINDING:
            c.more_days = (0, 0)
        else:
            c.more_days = days_for_power(c.effect, *c.arm_sd, c.n_with, c.n_without, alpha, power, c.inflation, c.df)
    return result


def analyse(
    slots: Sequence[SlotRow],
    inputs: StoredInputs,
    tz: tzinfo,
    factors: Sequence[Factor],
    first: date,
    last: date,
    *,
    q_max: float = Q_MAX,
    rules: Rules | None = None,
) -> InsightResult:
    """``daily_table`` then ``compare``: the whole analysis of stored rows."""
    return compare(daily_table(slots, inputs, tz, factors, first, last, rules), q_max=q_max)


def when_text(c: Comparison | Mapping[str, Any]) -> str:
    """'same day' / 'next day' (a night's sleep belongs to the day it ends on)."""
    lag = c.lag_days if isinstance(c, Comparison) else c["lag_days"]
    return "same day" if lag == 0 else "next day" if lag == 1 else f"{lag} days later"


def format_effect(value: float | None, unit: str, sign: bool = True) -> str:
    """An effect (or a bound) in its unit: meters with two decimals, minutes whole, ms and
    bpm with one decimal."""
    if value is None:
        return "-"
    s = "+" if sign else ""
    if unit == "meter":
        return f"{value:{s}.2f}"
    if unit == "min":
        return f"{value:{s}.0f} min"
    return f"{value:{s}.1f} {unit}"


def effect_text(d: Mapping[str, Any]) -> str:
    """A finding's effect with its interval: '+0.15 [+0.09, +0.21]', '-42 min [-60, -24]'."""
    unit = d["effect_unit"]
    head = format_effect(d["effect"], unit)
    if not d.get("ci95"):
        return head
    lo, hi = (format_effect(v, unit).split(" ")[0] for v in d["ci95"])
    return f"{head} [{lo}, {hi}]"
