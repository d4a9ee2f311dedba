"""What a real day's plan optimises beyond the meters: the terms a person would sign. Pure.

The simulator grades a week by its meters; a person lives by a plan they can follow. On real
days the planner's score (``horizon._score``) adds, to the expected meter rewards:

- **variety** (``Variety``): diminishing returns for repeating an action: within a day every
  repeat of an action costs ``REPEAT_DAY``, within a week each earlier block of it in the last
  six days' plans costs ``REPEAT_WEEK`` more (a creature of habit pays it back through the
  habit prior and their accepts);
- **novelty** (``NOVEL_COST``): an action the person has not done in four weeks (slot actions,
  done calendar events, Rhythm's blocks judged done) is not favoured because the table's prior for it looks good; its
  first suggestion says it is a try;
- **habit** (``HABIT_WEIGHT``): what the person habitually does at that time of day (their
  slot actions of the last two weeks, by slot) is the prior of what they will accept;
- **answers by context** (``AnswerBook``): the person's answers are keyed by the kind of day
  (after a night shift, before one, a work day, a free day) and the position in it (the first
  hours after waking, before a commitment, late, open) as well as slot and action; accepts on
  unlike days count ``UNLIKE_WEIGHT`` of their weight, ignores on them only where there are no
  answers on like days, and a *time* whose blocks are ignored whatever they suggest stops being
  offered on days of that kind (``avoid_times``);
- **recovery gates strain** (``recovery``): on a poor-recovery day (the wearable's recovery
  score low, HRV well below the person's baseline with a short night, or the day after a long
  night shift) no workout is planned, unless this person's own data says exercise lifts their
  vitality.

Block lengths follow the person's own: ``usual_minutes`` (the median length of their done
calendar events of an action, within the action's bounds).
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

import numpy as np

from agent.day.calendar import DayFrame, elapsed_min
from agent.day.evidence import Fact, baseline, done_event, spread
from common.records import ACTIONS, SLOTS

REPEAT_DAY = 1.6  # score cost of each repeat of an action within a day
REPEAT_WEEK = 0.6  # ... of each block of it in the plans of the last six days
WEEK_DAYS = 6
NOVEL_COST = 0.8  # an action not done in four weeks: its table prior is not evidence
HABIT_WEIGHT = 2.5  # bonus per unit of habit share (the slot's most frequent action: ~0.5)
HABIT_MIN_DAYS = 5  # days of slot actions before a habit counts
IGNORE_WEIGHT = 8.0  # score cost of an action at p(accept) 0 vs 0.5 in its context
UNLIKE_WEIGHT = 0.25  # an answer on an unlike kind of day counts this much
OTHER_SLOT_WEIGHT = 0.35  # an answer on the same action in another slot counts this much (a person who
# never meditates says so in every slot; one who only runs in the evening outweighs it there)
AVOID_P = 0.3  # a time whose p(accept) falls below this (2+ ignores) is not offered there
FIRST_HOURS_MIN = 180  # the first hours after waking (from the night or a day sleep)
BEFORE_COMMITMENT_MIN = 60  # a block ending this close to a commitment is "before" it
LATE_MIN = 120  # a block ending this close to bedtime is "late"
# recovery
RECOVERY_POOR_PCT = 34.0  # WHOOP's red band
HRV_POOR_Z = 1.5  # HRV this many spreads below the baseline ...
SHORT_NIGHT_SHARE = 0.8  # ... together with a night under this share of the usual
LONG_SHIFT_MIN = 600  # a night shift this long: the day after it is for rest
COUNTED = tuple(a for a in ACTIONS)  # every action repeats, SLEEP too outside the night


# -- the kind of day and the position in it ---------------------------------------------------
def day_kind(frame: DayFrame) -> str:
    """after_night_shift | night_shift (one tonight) | work_day | free_day."""
    if frame.after is not None:
        return "after_night_shift"
    if frame.tonight is not None:
        return "night_shift"
    work = sum(c.minutes for c in frame.commitments
               if c.action in ("DEEP_WORK", "ADMIN_WORK", "LEARN", None) and c.start.date() == frame.day)
    return "work_day" if work >= 180 else "free_day"


def position(frame: DayFrame, start: datetime, end: datetime) -> str:
    """Where a block sits in the day: first_hours (within ``FIRST_HOURS_MIN`` of waking, from
    the night or a day sleep), before_commitment, late (near bedtime), open."""
    woke = max([frame.wake, *(sp.end for sp in frame.sleeps if sp.end <= start)])
    if 0 <= elapsed_min(woke, start) < FIRST_HOURS_MIN:
        return "first_hours"
    if any(0 <= elapsed_min(end, c.start) <= BEFORE_COMMITMENT_MIN for c in frame.commitments):
        return "before_commitment"
    if frame.tonight is None and elapsed_min(end, frame.bed) <= LATE_MIN:
        return "late"
    return "open"


def context_of(frame: DayFrame, start: datetime, end: datetime) -> str:
    """The stored context of a block: "<day kind>/<position>"."""
    return f"{day_kind(frame)}/{position(frame, start, end)}"


# -- answers by context -----------------------------------------------------------------------
@dataclass
class AnswerBook:
    """The person's answers, counted by (kind of day, slot, action) and by (kind of day, slot,
    position) whatever the action. ``answers``: objects with ``slot``, ``action``, ``response``
    and optional ``context`` ("kind/position", None for answers stored before contexts) and
    ``confidence`` (an implicit answer counts its confidence)."""

    answers: Sequence[Any] = ()
    acts: dict[tuple[str, str, str], list[float]] = field(default_factory=lambda: defaultdict(lambda: [0.0, 0.0]))
    times: dict[tuple[str, str, str], list[float]] = field(default_factory=lambda: defaultdict(lambda: [0.0, 0.0]))

    ignored_at: dict[tuple[str, str, str], set[str]] = field(default_factory=lambda: defaultdict(set))

    def __post_init__(self) -> None:
        for a in self.answers:
            kind, pos = split_context(getattr(a, "context", None))
            w = float(getattr(a, "confidence", 1.0) or 1.0)
            i = 0 if a.response == "accept" else 1
            self.acts[(kind, a.slot, a.action)][i] += w
            if pos != "?":
                self.times[(kind, a.slot, pos)][i] += w
                if i:
                    self.ignored_at[(kind, a.slot, pos)].add(a.action)

    def counts(self, kind: str, slot: str, action: str) -> tuple[float, float]:
        """(accepts, ignores) for an action in a slot of this kind of day (answers of no known
        kind, stored before contexts, count in full: slot and action were all they were keyed
        by); answers on the action in other slots weighted ``OTHER_SLOT_WEIGHT`` (not SLEEP: a
        night's bedtime, an afternoon nap and a morning sleep-in are different asks). Accepts on
        unlike kinds of day count ``UNLIKE_WEIGHT``; ignores on them count so only where the
        person answered nothing on days of this kind: ignores after night shifts do not spill
        onto an ordinary day they answered."""
        like = [0.0, 0.0]
        unlike = [0.0, 0.0]
        for (k, s, a), (ac, ig) in self.acts.items():
            if a != action:
                continue
            if s != slot and action == "SLEEP":
                continue  # a bedtime kept says nothing of an afternoon nap
            w = 1.0 if s == slot else OTHER_SLOT_WEIGHT
            into = like if k in (kind, "?") else unlike
            into[0] += w * ac
            into[1] += w * ig
        # an accept says the action suits them; an ignore on an unlike day says as much about
        # that day, so it counts only where they said nothing on days like today
        ign = like[1] if like[0] + like[1] > 0 else UNLIKE_WEIGHT * unlike[1]
        return like[0] + UNLIKE_WEIGHT * unlike[0], ign

    def repeat_scale(self) -> np.ndarray:
        """(10,) per action: (2 x (1 - p(accept)))^2 clipped to [0, 1], p from its answers
        (Beta(1, 1)): no answers 1 (a repeat costs in full), accepted every time 0.16 after
        three (a creature of habit repeats what they accept); mostly ignored: 1."""
        out = np.ones(len(ACTIONS))
        for i, a in enumerate(ACTIONS):
            acc = sum(v[0] for (k, s, x), v in self.acts.items() if x == a)
            ign = sum(v[1] for (k, s, x), v in self.acts.items() if x == a)
            if acc + ign:
                out[i] = float(np.clip(2.0 * (1.0 - (acc + 1.0) / (acc + ign + 2.0)), 0.0, 1.0)) ** 2
        return out

    def alike(self, kind: str, slot: str, action: str) -> tuple[float, float]:
        """(accepts, ignores) on days of this kind (and of no known kind) only: what the
        plan may say it learnt from."""
        acc = ign = 0.0
        for k in (kind, "?"):
            ac, ig = self.acts.get((k, slot, action), (0.0, 0.0))
            acc, ign = acc + ac, ign + ig
        return acc, ign

    def penalty(self, kind: str, slot: str, action: str) -> float:
        acc, ign = self.counts(kind, slot, action)
        if acc + ign == 0:
            return 0.0
        p = (acc + 1.0) / (acc + ign + 2.0)
        return IGNORE_WEIGHT * (0.5 - p)

    def time_p(self, kind: str, slot: str, pos: str) -> tuple[float, float, float]:
        """(p(accept), accepts, ignores) of any block at this position of this kind of day."""
        acc, ign = self.times.get((kind, slot, pos), (0.0, 0.0))
        return (acc + 1.0) / (acc + ign + 2.0), acc, ign

    def avoided(self, kind: str, slot: str, pos: str) -> bool:
        """Whether a time is ignored whatever it offers: two or more ignores there, of two or
        more actions (one action ignored again and again says "not that", not "not then"),
        and p(accept) under ``AVOID_P``."""
        p, _acc, ign = self.time_p(kind, slot, pos)
        return ign >= 2 and p < AVOID_P and len(self.ignored_at.get((kind, slot, pos), ())) >= 2


def split_context(context: str | None) -> tuple[str, str]:
    """(kind of day, position) of a stored context; ("?", "?") for one stored before contexts."""
    if not context or "/" not in context:
        return "?", "?"
    kind, pos = context.split("/", 1)
    return kind, pos


# -- habits, novelty, variety -----------------------------------------------------------------
def habit_shares(recent: Sequence[tuple[date, str, str]], day: date) -> dict[str, dict[str, float]]:
    """slot -> action -> share of the days (of the last two weeks with a slot action there)
    the person did it in that slot; {} for a slot with fewer than ``HABIT_MIN_DAYS`` days."""
    by_slot: dict[str, Counter[str]] = defaultdict(Counter)
    for d, slot, action in recent:
        if day - timedelta(days=14) <= d < day:
            by_slot[slot][action] += 1
    out = {}
    for slot, c in by_slot.items():
        n = sum(c.values())
        if n >= HABIT_MIN_DAYS:
            out[slot] = {a: k / n for a, k in c.items()}
    return out


def done_actions(recent: Sequence[tuple[date, str, str]], events: Sequence[Any], day: date,
                 days: int = 28) -> set[str]:
    """The actions the person did in the last ``days`` days: slot actions and done calendar
    events (not holds, not Rhythm's own blocks)."""
    out = {a for d, _s, a in recent if day - timedelta(days=days) <= d < day}
    for e in events:
        if done_event(e) and day - timedelta(days=days) <= e.start.date() < day:
            out.add(e.action)
    return out


@dataclass(frozen=True)
class Variety:
    """Diminishing returns for repeats (``horizon._score``'s ``variety``): ``day_of`` (L,) the
    day index of each position whose action counts (-1: forced by the calendar or the night,
    never counted), ``prior_day`` (D, 10) counts already planned on those days (blocks of an
    earlier plan of today are not counted: the plan replaces them), ``prior_week`` (10,) the
    blocks of each action in the last six days' plans."""

    day_of: np.ndarray
    prior_day: np.ndarray
    prior_week: np.ndarray
    w_day: float = REPEAT_DAY
    w_week: float = REPEAT_WEEK

    # per action, how much of the cost of a repeat stands (1: all; an action the person keeps
    # accepting repeats at a discount: what they accept, they want again)
    scale: np.ndarray | None = None

    def cost(self, plans: np.ndarray) -> np.ndarray:
        """(B,) the cost of each plan (B, L)."""
        k = np.ones(len(ACTIONS)) if self.scale is None else self.scale
        onehot = (plans[..., None] == np.arange(len(ACTIONS))).astype(np.float64)  # (B, L, 10)
        total = np.zeros(plans.shape[0])
        counted = self.day_of >= 0
        for d in range(self.prior_day.shape[0]):
            mask = self.day_of == d
            if not mask.any():
                continue
            c = onehot[:, mask].sum(axis=1)  # (B, 10)
            n = c + self.prior_day[d]
            total += self.w_day * ((np.maximum(0.0, n - 1.0) - np.maximum(0.0, self.prior_day[d] - 1.0)) * k).sum(axis=1)
        if counted.any():
            c = onehot[:, counted].sum(axis=1)
            total += self.w_week * (c * self.prior_week * k).sum(axis=1)
        return total


def week_counts(blocks: Sequence[tuple[date, str, str, str]], day: date) -> np.ndarray:
    """(10,) non-night blocks of each action in the plans of the ``WEEK_DAYS`` days before
    ``day`` (``blocks``: (day, slot, action, kind) of each day's latest plan)."""
    out = np.zeros(len(ACTIONS))
    for d, slot, action, kind in blocks:
        offered = kind in ("early_night", "nap", "sleep_in") or (
            slot != SLOTS[3] and kind not in ("bedtime", "day_sleep", "shift_nap"))
        if day - timedelta(days=WEEK_DAYS) <= d < day and offered and action in ACTIONS:
            out[ACTIONS.index(action)] += 1
    return out


# -- block lengths ----------------------------------------------------------------------------
def usual_minutes(events: Sequence[Any], day: date, bounds: Mapping[str, tuple[int, int, int]],
                  days: int = 28, sessions: Mapping[str, Sequence[float]] | None = None) -> dict[str, int]:
    """action -> the median length (minutes, on a five-minute mark) of the person's done
    calendar events (``evidence.done_event``) of that action in the last ``days`` days and their recorded ``sessions``
    of it (a device's workouts), 3 or more, clipped to the action's least and 1.5 times its
    most; actions with fewer are absent."""
    lengths: dict[str, list[float]] = defaultdict(list)
    for action, ms in (sessions or {}).items():
        lengths[action].extend(m for m in ms if 5 <= m <= 8 * 60)
    for e in events:
        if (not done_event(e) or e.action not in bounds or e.action == "SLEEP"
                or not day - timedelta(days=days) <= e.start.date() < day):
            continue  # done as the plan's facts count it: no hold, no cancelled or declined event
        m = elapsed_min(e.start, e.end)
        if 5 <= m <= 8 * 60:
            lengths[e.action].append(m)
    out = {}
    for action, ms in lengths.items():
        if len(ms) >= 3:
            least, _usual, most = bounds[action]
            out[action] = int(max(least, min(most * 1.5, round(statistics.median(ms) / 5) * 5)))
    return out


# -- recovery -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Recovery:
    poor: bool
    fact: Fact | None  # the sentence that says so (with the person's numbers)


def recovery(frame: DayFrame, day: date, recovery_pct: Mapping[date, float], hrv: Mapping[date, float],
             hrv_kind: str, sleep_min: Mapping[date, float]) -> Recovery:
    """Whether today is a poor-recovery day by the person's own data, and why: the
    wearable's recovery score under ``RECOVERY_POOR_PCT`` %; HRV ``HRV_POOR_Z`` spreads under
    the 28-day median after a night under ``SHORT_NIGHT_SHARE`` of the usual; or the day after
    a night shift of ``LONG_SHIFT_MIN`` minutes or more."""
    pct = recovery_pct.get(day)
    if pct is not None and pct < RECOVERY_POOR_PCT:
        base = baseline(recovery_pct, day)
        usual = f" (your {base[1]}-day median {base[0]:.0f}%)" if base else ""
        return Recovery(True, Fact("recovery", f"recovery {pct:.0f}% today{usual}: rest, not strain", 3.0))
    if frame.after is not None and frame.after.minutes >= LONG_SHIFT_MIN:
        c = frame.after
        return Recovery(True, Fact("recovery", f"after a {c.minutes // 60:.0f} h {c.minutes % 60:02.0f} night shift "
                                   f"(ended {c.end:%H:%M}): rest, not strain", 3.0))
    v, b, night, nb = hrv.get(day), baseline(hrv, day), sleep_min.get(day), baseline(sleep_min, day)
    if v is not None and b and night is not None and nb:
        # the same spread as the HRV fact the plan shows (agent.day.evidence.person_facts)
        if (v - b[0]) / spread(hrv, day) <= -HRV_POOR_Z and night < SHORT_NIGHT_SHARE * nb[0]:
            return Recovery(True, Fact("recovery", f"{hrv_kind} {v:.0f} ms vs your {b[1]}-day median {b[0]:.0f} "
                                       f"after a short night: rest, not strain", 3.0))
    return Recovery(False, None)


__all__ = [
    "AnswerBook", "Recovery", "Variety", "context_of", "day_kind", "done_actions", "habit_shares", "position",
    "recovery", "usual_minutes", "week_counts",
]
