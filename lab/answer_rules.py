"""Hidden answer rules: simulated people who answer every block of a stored plan after the
day, accept or ignore, by a rule the planner never sees (issue 37).

A rule is a small pure function ``rule(block, day) -> bool`` (True: accept, False: ignore) of
the stored block (``Block``: its action, slot, kind and local times) and what the person
knows of their day and past (``PersonDay``: the plan's other blocks, when their night shifts
ended, what they habitually did in each slot before). ``answer(rule, block, day, base, seed)``
adds the base rule: a block the rule accepts is still accepted only with probability
``base`` (seeded by the person and the block's start, so a re-run answers alike; ``base`` 1:
always).

The rules (``RULES``):

- ``no_morning_exercise``: ignores EXERCISE starting before 12:00 local time, accepts the rest;
- ``no_repeat``: ignores a non-SLEEP block whose action an earlier block of the same plan
  already has (sleep twice a day, a day sleep and a bedtime, is no repeat);
- ``day_sleeper``: ignores every non-SLEEP block that overlaps the 8 hours after one of the
  person's night shifts ends (they sleep then); for night-shift people
  (``lab.people.shift_people`` kinds night_nurse and rotating); accepts the rest;
- ``creature_of_habit``: accepts a block only if its action is one of the person's habits in
  that slot: over the 28 days before the planned day, the actions of their own slot
  (``slot_actions``, as ``rhythm map`` derived them from their data) on at least a quarter of
  the days that slot had an action, and always the most frequent one; ignores the rest;
- ``late_starter``: ignores every non-SLEEP block starting before 10:00, whatever it offers
  (an answer about *when*: the plan has to move the time, not the action).

``person_day(db, day, tz, blocks, shift_ends)`` builds the ``PersonDay`` from the stored
rows, ``answer_plan`` answers a day's latest stored plan with it; ``benchmarks/plan_quality.py`` answers through the product's own path
(``rhythm feedback``'s ``rhythm.recommend.record_answer``, the `feedback` table) so the next day's plan sees the answers.
Lab code: the product never imports it.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

MORNING_END_H = 12
LATE_START_H = 10
DAY_SLEEP = timedelta(hours=8)
HABIT_DAYS = 28
HABIT_SHARE = 0.25


@dataclass(frozen=True)
class Block:
    """A stored block as the person reads it (``lab.plan_check.stored_blocks`` rows)."""

    id: int
    action: str
    slot: str
    start: datetime  # aware
    end: datetime
    kind: str = "block"


@dataclass(frozen=True)
class PersonDay:
    """What the person knows when answering a day's blocks."""

    day: date
    tz: Any
    blocks: tuple[Block, ...] = ()  # the whole plan, in time order
    shift_ends: tuple[datetime, ...] = ()  # when their night shifts ended (aware)
    habits: dict[str, frozenset[str]] = field(default_factory=dict)  # slot -> habitual actions


Rule = Callable[[Block, PersonDay], bool]


def no_morning_exercise(b: Block, d: PersonDay) -> bool:
    return not (b.action == "EXERCISE" and b.start.astimezone(d.tz).hour < MORNING_END_H)


def no_repeat(b: Block, d: PersonDay) -> bool:
    if b.action == "SLEEP":
        return True
    return not any(o.action == b.action and (o.start, o.id) < (b.start, b.id) for o in d.blocks if o.id != b.id)


def day_sleeper(b: Block, d: PersonDay) -> bool:
    if b.action == "SLEEP":
        return True
    return not any(b.start < end + DAY_SLEEP and end < b.end for end in d.shift_ends)


def late_starter(b: Block, d: PersonDay) -> bool:
    """Ignores every non-SLEEP block starting before ``LATE_START_H`` (not a morning person:
    *when*, whatever the block offers), accepts the rest."""
    return b.action == "SLEEP" or b.start.astimezone(d.tz).hour >= LATE_START_H


def creature_of_habit(b: Block, d: PersonDay) -> bool:
    return b.action in d.habits.get(b.slot, frozenset())


RULES: dict[str, Rule] = {
    "no_morning_exercise": no_morning_exercise,
    "no_repeat": no_repeat,
    "day_sleeper": day_sleeper,
    "creature_of_habit": creature_of_habit,
    "late_starter": late_starter,
}
#: the people each rule is run on (``lab.people.shift_people`` kinds); None: every kind in turn
RULE_KINDS: dict[str, tuple[str, ...] | None] = {"day_sleeper": ("night_nurse", "rotating")}


def answer(rule: Rule, b: Block, d: PersonDay, base: float = 1.0, seed: int = 0) -> str:
    """'accept' or 'ignore': the rule, then the base rule (module docstring)."""
    if not rule(b, d):
        return "ignore"
    if base >= 1.0:
        return "accept"
    h = hashlib.sha256(f"{seed}:{b.start.isoformat()}:{b.action}".encode()).digest()
    return "accept" if int.from_bytes(h[:8], "big") / 2**64 < base else "ignore"


def habits(slot_actions: Iterable[tuple[date, str, str | None]], day: date) -> dict[str, frozenset[str]]:
    """Each slot's habitual actions before ``day`` (module docstring, ``creature_of_habit``)
    from (local_day, slot, action) rows."""
    counts: dict[str, Counter[str]] = {}
    for d, slot, action in slot_actions:
        if action is None or not (day - timedelta(days=HABIT_DAYS) <= d < day):
            continue
        counts.setdefault(slot, Counter())[action] += 1
    out = {}
    for slot, c in counts.items():
        n = sum(c.values())
        top = max(c.values())
        out[slot] = frozenset(a for a, k in c.items() if k == top or k >= HABIT_SHARE * n)
    return out


def blocks_of(rows: Sequence[dict[str, Any]]) -> tuple[Block, ...]:
    """``Block``s of stored plan rows (``lab.plan_check.stored_blocks``)."""
    return tuple(Block(int(r["id"]), r["action"], r["slot"], r["start"], r["end"], r.get("kind") or "block")
                 for r in rows)


def person_day(db: Any, day: date, tz: Any, rows: Sequence[dict[str, Any]],
               shift_ends: Iterable[datetime] = ()) -> PersonDay:
    """The ``PersonDay`` of ``day`` from the stored rows: the plan (``rows``), the slot
    actions before the day; ``shift_ends``: the person's night shifts' ends (their own
    knowledge; the benchmark passes the generated truth)."""
    from storage import audit

    return PersonDay(day, tz, blocks_of(rows), tuple(shift_ends),
                     habits(audit.slot_actions_between(db, day - timedelta(days=HABIT_DAYS), day - timedelta(days=1)),
                            day))


def answer_plan(db: Any, day: date, tz: Any, rule: Rule, base: float = 1.0, seed: int = 0,
                shift_ends: Iterable[datetime] = ()) -> tuple[PersonDay, dict[int, str]]:
    """The person's answers to ``day``'s latest stored plan under ``rule`` (``answer``):
    the ``PersonDay`` they answered from and recommendation id -> 'accept' or 'ignore'
    (nothing recorded: the caller records them through ``rhythm feedback``'s path)."""
    from lab.plan_check import stored_blocks

    pd = person_day(db, day, tz, stored_blocks(db, day), shift_ends)
    return pd, {b.id: answer(rule, b, pd, base, seed) for b in pd.blocks}


__all__ = ["RULES", "RULE_KINDS", "Block", "PersonDay", "Rule", "answer", "answer_plan", "blocks_of", "creature_of_habit",
           "day_sleeper", "habits", "late_starter", "no_morning_exercise", "no_repeat", "person_day"]
