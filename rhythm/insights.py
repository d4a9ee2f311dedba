"""`rhythm insights`, the glue: which behaviours move which meters, for this person.

Storage reads (``storage.insights``), mapping computes (``mapping.insights``: the factors per
day, the timing rule and the statistics), this module wires the two and shapes the answer.
Read-only: nothing is written. See docs/insights.md.

``find_insights(settings, factors=None, since=None) -> list[dict]`` is the library call (the
MCP server's ``get_insights``): the findings at q < 0.1, the most certain first, each
``{factor, meter, lag_days, effect, effect_unit, ci95, n_with, n_without, mean_with,
mean_without, effect_size, p_value, q_value, status, more_days_needed}``.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, timedelta
from typing import Any

from common.errors import ConfigError
from common.records import SLOTS
from mapping.features import DAY_METRICS
from mapping.insights import InsightResult, analyse, parse_factors
from mapping.rules import default_rules
from rhythm.settings import Settings, user_zone
from storage import insights as store
from storage import open_db


def _since(value: date | str | None) -> date | None:
    if value is None or isinstance(value, date):
        return value
    try:
        return date.fromisoformat(str(value))
    except ValueError:
        raise ConfigError(f"since: expected a day as YYYY-MM-DD, got {value!r}") from None


def run_insights(
    settings: Settings,
    factors: Iterable[str] | None = None,
    since: date | str | None = None,
    *,
    q_max: float = 0.1,
    until: date | None = None,
) -> InsightResult:
    """The whole analysis: every factor (the built-in set when ``factors`` is empty) against
    every meter, over the days with stored meters on or after ``since``."""
    specs = parse_factors(factors)  # bad expressions fail before the database is opened
    start = _since(since)
    if not 0 < q_max < 1:
        raise ConfigError(f"q threshold must be between 0 and 1, got {q_max}")
    empty = InsightResult(None, None, specs, q_max=q_max)
    if not settings.database.exists():
        return empty
    tz = user_zone(settings)
    rules = default_rules()
    margin = timedelta(days=rules.model.calendar_coverage_days + 2)
    with open_db(settings.database, read_only=True) as db:
        span = store.meter_span(db)
        if span is None:
            return empty
        first = max(start, span[0]) if start else span[0]
        last = span[1] if until is None else min(span[1], until)
        if last < first:
            return empty
        slots, rows = store.insight_rows(
            db, first, last + timedelta(days=1), input_lo=first - margin, input_hi=last + margin,
            day_metrics=DAY_METRICS,
        )
    return analyse(slots, rows, tz, specs, first, last, q_max=q_max, rules=rules)


def find_insights(
    settings: Settings,
    factors: Iterable[str] | None = None,
    since: date | str | None = None,
    *,
    q_max: float = 0.1,
    include_all: bool = False,
    until: date | None = None,
) -> list[dict[str, Any]]:
    """The findings (q <= ``q_max``) as plain dicts, the most certain first; with
    ``include_all``, every comparison of the run (tested or not) after them; ``until``: the
    days up to it only (what a plan of the day after saw)."""
    result = run_insights(settings, factors, since, q_max=q_max, until=until)
    found = result.findings
    out = [c.to_dict() for c in found]
    if include_all:
        seen = {id(c) for c in found}
        rest = [c for c in result.comparisons if id(c) not in seen]
        rest.sort(key=lambda c: (c.p_value is None, c.p_value or 1.0))
        out += [c.to_dict() for c in rest]
    return out


def contradicted_effects(db: Any, tz: Any, departures: Iterable[dict[str, Any]], before: date,
                         q_max: float = 0.1) -> set[tuple[str, str]]:
    """(action, meter) of the fitted departures (``agent.personal`` ``departures()`` with
    action and meter names and ``fitted``) that the insights on the same stored days
    contradict: a finding (q <= ``q_max``, what `rhythm insights` shows) for doing the action
    (in any slot) on that meter
    (any slot, same or next day) with the opposite sign. Such a fitted effect is neither used
    nor shown by the plan (issue 36: one truth). Reads ``db`` (the caller's connection);
    the days before ``before``."""
    deps = [d for d in departures if d.get("fitted")]
    if not deps:
        return set()
    rules = default_rules()
    span = store.meter_span(db)
    if span is None:
        return set()
    last = min(span[1], before - timedelta(days=1))
    first = max(span[0], last - timedelta(days=179))
    if last < first:
        return set()
    actions = sorted({d["action"] for d in deps})
    specs = parse_factors([f"action:{a}" for a in actions] + [f"action:{a}@{s}" for a in actions for s in SLOTS])
    margin = timedelta(days=rules.model.calendar_coverage_days + 2)
    slots, rows = store.insight_rows(db, first, last + timedelta(days=1), input_lo=first - margin,
                                     input_hi=last + margin, day_metrics=DAY_METRICS)
    result = analyse(slots, rows, tz, specs, first, last, q_max=q_max, rules=rules)
    out = set()
    for d in deps:
        for c in result.findings:
            if (c.factor.arg == d["action"] and c.outcome.unit == "meter"
                    and c.outcome.name.split("@")[0] == d["meter"] and c.effect is not None
                    and c.effect * d["fitted"] < 0):
                out.add((d["action"], d["meter"]))
    return out
