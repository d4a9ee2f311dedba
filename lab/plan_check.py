"""Judging stored plans the way their owner would: from the database alone.

``check_day(db, tz, day, now, sleeps=None, findings=())`` reads the blocks ``rhythm
recommend`` stored for ``day`` and recomputes, with its own SQL, what a person can check:

- *overlaps*: a block over a commitment (an event that holds time: not cancelled, declined,
  transparent or all-day, not one of Rhythm's own blocks) or over another block;
- *asleep*: a non-SLEEP block while the person sleeps by their own data (``sleeps``: the
  true sleeps, else the stored main sleeps as the product merges them, one source a day);
- *missing sleep*: a sleep of 3 h or more starting in the planned day (06:00 to 06:00) with
  no SLEEP block over it;
- *evidence*: every evidence sentence parsed and its numbers recomputed (plain reads of
  ``storage.audit``, the logic here) from the stored
  rows (the merged sleep sessions and samples the product shows, events, slot actions, the
  stored belief), and a
  fitted effect checked against the insights' findings (``findings``: what ``rhythm
  insights`` shows on the days before the plan, ``find_insights(settings, until=day - 1)``); a sentence whose numbers do not match, or which the insights contradict, is
  counted, and a sentence no rule knows is counted apart (``unchecked``);
- *repeated reason* (``repeated_reasons``, issue 37): two blocks of the same plan give the
  same reason, either (a) their rationales are identical once every clock time (``HH:MM``)
  and the expected-effect tail (from `` Expected:`` on, the model's numbers, no reason) are
  removed and the action's name is dropped, or (b) their lead reason (first evidence
  sentence) is the same sentence. Every pair of blocks is compared, SLEEP blocks included (a
  person reads the same sentence twice either way); one finding per pair;
- *short alone* (``short_alone``, issue 37): a non-SLEEP block of 20 minutes or less that is
  the only non-SLEEP block of its free window, when that window lasts 2 h or more. The free
  window is the stretch around the block bounded by the nearest commitment (as above), sleep
  (``sleeps``, as above) or SLEEP block of the plan on each side: a 15-minute meditation
  alone in a free 09:45-12:45 counts, one in a free 40 minutes does not;
- *actions* (``DayCheck.actions``): the non-SLEEP blocks' actions, for the share of the most
  frequent one over a person's days (``top_action``).

``model_ask(db, day)`` reads from the stored rows whether a local model was asked for the
day's plan and whether its pick stood: the `runs` row of the ``rhythm recommend`` run
(``rhythm.jobs.recommend`` records the planner's and the model's pick of the current slot)
and the ``model`` column of the plan's blocks (``llm:<file>`` on the block whose pick
stood); a pick that did not stand is a veto.

Shared by ``benchmarks/plan_quality.py`` and the tests; never imported by the product.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from common.records import ACTIONS, SLOTS
from common.timeutil import slot_of
from mapping.actions import counts_as_done
from storage import audit

NIGHT_MID = (21 * 60, 9 * 60 + 30)
PIECE_GAP_S = 3600


SHORT_BLOCK = timedelta(minutes=20)
WIDE_WINDOW = timedelta(hours=2)
_CLOCK = re.compile(r"\b\d{1,2}:\d\d(?:-\d{1,2}:\d\d)?\b")  # a clock time or a range


@dataclass
class DayCheck:
    day: date
    blocks: int = 0
    overlaps: list[str] = field(default_factory=list)
    asleep: list[str] = field(default_factory=list)
    missing_sleep: list[str] = field(default_factory=list)
    evidence: int = 0
    wrong: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)  # the non-SLEEP blocks' actions
    repeated: list[str] = field(default_factory=list)  # pairs of blocks giving the same reason
    short_alone: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ModelAsk:
    """Whether a local model was asked for a plan and what came of it (``model_ask``)."""

    asked: bool
    planner: str | None = None  # the planner's pick for the current slot
    model: str | None = None  # the model's pick; None: no valid answer
    stood: bool = False  # a block of the plan is the model's

    @property
    def vetoed(self) -> bool:
        """The model gave a valid pick and the planner refused it."""
        return self.asked and self.model is not None and not self.stood


def _utc(t: Any) -> datetime:
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)


def stored_blocks(db: Any, day: date) -> list[dict[str, Any]]:
    """The latest plan stored for ``day`` (one recommend run: one created_at)."""
    out = []
    for d in audit.latest_plan(db, day):
        d["start"], d["end"] = _utc(d["start"]), _utc(d["end"])
        d["evidence"] = json.loads(d["evidence"]) if d["evidence"] else []
        out.append(d)
    return out


def commitments(db: Any, lo: datetime, hi: datetime) -> list[tuple[datetime, datetime, str | None, str | None]]:
    """(start, end, action, title) of the events that hold time in [lo, hi)."""
    out = []
    for s, e, action, title, status, transp, resp, all_day, eid in audit.events_overlapping(db, lo, hi):
        if all_day or (status or "confirmed") == "cancelled" or (resp or "") == "declined":
            continue
        if (transp or "opaque") == "transparent" or str(eid).endswith("rhythm"):
            continue
        out.append((_utc(s), _utc(e), action, title))
    return out


def sleep_sessions(db: Any) -> list[tuple[datetime, datetime, float | None]]:
    """Every stored main sleep, pieces under an hour apart joined: (start, end, minutes asleep)."""
    out: list[list[Any]] = []
    for s, e, m in audit.main_sleeps_merged(db):
        s, e = _utc(s), _utc(e)
        if out and (s - out[-1][1]).total_seconds() < PIECE_GAP_S:
            out[-1][1] = max(out[-1][1], e)
            out[-1][2] = (out[-1][2] or 0.0) + (m or 0.0)
        else:
            out.append([s, e, m])
    return [(s, e, m) for s, e, m in out]


def _is_night(s: datetime, e: datetime, tz: Any) -> bool:
    mid = (s + (e - s) / 2).astimezone(tz)
    m = mid.hour * 60 + mid.minute
    return m >= NIGHT_MID[0] or m < NIGHT_MID[1]


def _hm(text: str) -> float:
    h, m = text.split(" h ")
    return int(h) * 60 + int(m)


def _hm_text(minutes: float) -> str:
    m = int(round(minutes))
    return f"{m // 60} h {m % 60:02d}"


def _done_days(db: Any, action: str, lo: date, hi: date, before: datetime, tz: Any) -> set[tuple[date, str]]:
    """(day, slot) the person did ``action`` by the history they see: slot actions and the
    calendar's done events with that action."""
    out = audit.slot_action_days(db, action, lo, hi - timedelta(days=1))
    for s, e, title, status, transp, resp, all_day, eid in audit.events_with_action(db, action, before):
        if all_day or str(eid).endswith("rhythm") or not counts_as_done(title, status, transp, resp):
            continue
        if _utc(e) > before:
            continue
        d, k = slot_of(_utc(s).astimezone(tz).replace(tzinfo=None))
        if lo <= d <= hi:
            out.add((d, SLOTS[k]))
    return out


def _daily_mean(db: Any, metric: str) -> dict[date, float]:
    return audit.daily_sample(db, metric, "avg")


def check_fact(db: Any, tz: Any, day: date, now: datetime, text: str, block: dict[str, Any],
               findings: Sequence[dict[str, Any]]) -> bool | None:
    """True: recomputed and right; False: wrong by the data or contradicted by the insights;
    None: no rule for it."""
    m = re.fullmatch(r"no (?P<w>[a-z ]+) in your last (?P<n>\d+) days", text)
    if m:
        action = m["w"].upper().replace(" ", "_")
        n = int(m["n"])
        return not _done_days(db, action, day - timedelta(days=n), day, now, tz)
    m = re.fullmatch(r"last (?P<w>[a-z ]+) (?:(?P<y>yesterday)|(?P<t>today)|(?P<ago>\d+) days ago) "
                     r"\((?P<dow>\w+) (?P<slot>\w+)\)", text)
    if m:
        action = m["w"].upper().replace(" ", "_")
        ago = 1 if m["y"] else 0 if m["t"] else int(m["ago"])
        done = _done_days(db, action, day - timedelta(days=14), day, now, tz)
        if not done:
            return False
        d, s = max(done, key=lambda x: (x[0], SLOTS.index(x[1])))
        return (day - d).days == ago and s == m["slot"]
    m = re.fullmatch(r"(?:slept (?P<a>\d+ h \d\d) last night|your last sleep (?P<b>\d+ h \d\d) "
                     r"\((?P<dow>\w+) (?P<bed>\d\d:\d\d)-(?P<wake>\d\d:\d\d)\))"
                     r"(?:, your usual(?P<kind> day)? sleep (?P<u>\d+ h \d\d))?", text)
    if m:
        past = [x for x in sleep_sessions(db) if x[1] <= now]
        if not past:
            return False
        s, e, mins = past[-1]
        mins = mins if mins is not None else (e - s).total_seconds() / 60
        if _hm_text(mins) != (m["a"] or m["b"]):
            return False
        if m["b"] and (f"{s.astimezone(tz):%H:%M}" != m["bed"] or f"{e.astimezone(tz):%H:%M}" != m["wake"]):
            return False
        if m["a"] and not _is_night(s, e, tz):
            return False  # "last night" for a day sleep
        if m["u"]:
            night = _is_night(s, e, tz)
            same = [(x[2] if x[2] is not None else (x[1] - x[0]).total_seconds() / 60) for x in past[:-1]
                    if _is_night(x[0], x[1], tz) == night and x[1] >= now - timedelta(days=28)]
            if len(same) < 5 or _hm_text(statistics.median(same)) != m["u"]:
                return False
        return True
    m = re.fullmatch(r"(?P<k>HRV|HRV \(SDNN\)|resting heart rate) (?P<v>\d+) (?:ms|bpm) vs your (?P<n>\d+)-day "
                     r"median (?P<med>\d+)", text)
    if m:
        metric = {"HRV": "hrv_rmssd", "HRV (SDNN)": "hrv_sdnn", "resting heart rate": "resting_heart_rate"}[m["k"]]
        series = _daily_mean(db, metric)
        if day not in series or f"{series[day]:.0f}" != m["v"]:
            return False
        base = [v for d, v in series.items() if day - timedelta(days=28) <= d < day]
        return len(base) == int(m["n"]) and f"{statistics.median(base):.0f}" == m["med"]
    m = re.fullmatch(r"(?P<v>[\d,]+) steps yesterday(?:, your usual (?P<u>[\d,]+))?", text)
    if m:
        y = day - timedelta(days=1)
        steps = audit.daily_sample(db, "steps", "sum")
        if y not in steps or f"{steps[y]:,.0f}" != m["v"]:
            return False
        if m["u"]:
            base = [v for d, v in steps.items() if y - timedelta(days=28) <= d < y]
            return len(base) >= 5 and f"{statistics.median(base):,.0f}" == m["u"]
        return True
    m = re.fullmatch(r"a (?P<d>\d+ h \d\d) shift \((?P<a>\w+ \d\d:\d\d)-(?P<b>\w+ \d\d:\d\d)\)", text)
    if m:
        lo = datetime.combine(day - timedelta(days=1), datetime.min.time(), tzinfo=tz)
        for s, e, _a, _t in commitments(db, lo, lo + timedelta(days=3)):
            if f"{s.astimezone(tz):%a %H:%M}" == m["a"] and f"{e.astimezone(tz):%a %H:%M}" == m["b"]:
                return _hm_text((e - s).total_seconds() / 60) == m["d"]
        return False
    m = re.fullmatch(r"(?P<d>\d+ h \d\d) of meetings and appointments today", text)
    if m:
        return _meetings_ok(db, tz, day, m["d"])
    m = re.fullmatch(r"free (?P<a>\d\d:\d\d)-(?P<b>\d\d:\d\d)(?: \(then (?P<c>\d\d:\d\d)\))?", text)
    if m:
        s, e = block["start"], block["end"]
        return not any(cs < e and s < ce for cs, ce, _a, _t in commitments(db, s, e))
    m = re.fullmatch(r"your data say you are .* \((?P<k>social|morning|work) (?P<b>\d\.\d\d) ± (?P<sd>\d\.\d\d)\)", text)
    if m:
        return (f"{block['b_' + m['k']]:.2f}" == m["b"]) and (f"{block['sd_' + m['k']]:.2f}" == m["sd"])
    m = re.fullmatch(r"(?P<m>vitality|cognition|progress|serenity|connection) (?P<v>\d\.\d\d)(?P<when> .*)? "
                     r"\((?P<side>above|below|at) your usual, 0\.50\)", text)
    if m:
        v = float(m["v"])
        side = "above" if v > 0.5 else "below" if v < 0.5 else "at"
        return side == m["side"]
    m = re.fullmatch(r"your data: (?P<a>[A-Z_]+) leaves your (?P<m>\w+) (?P<f>[+-]\d\.\d\d) \(the table: .*\)", text)
    if m:
        fitted = float(m["f"])
        for f in findings:
            if (f["factor"].split("@")[0] == f"action:{m['a']}" and f["meter"].split("@")[0] == m["m"]
                    and f["effect_unit"] == "meter" and f["effect"] * fitted < 0):
                return False
        return True
    if re.fullmatch(r"(after|before) \d+ of your last \d+ (first )?night shifts you (slept|were asleep) .*", text):
        return True  # the person's own pattern (recomputed by the tests of agent.day.calendar)
    if text.startswith("after a night shift: sleep soon after it ends"):
        return True
    return None


def _meetings_ok(db: Any, tz: Any, day: date, shown: str) -> bool:
    lo = datetime.combine(day, datetime.min.time(), tzinfo=tz).replace(hour=6)
    hi = lo + timedelta(hours=24)
    spans = sorted((max(s, lo - timedelta(hours=6)), e) for s, e, a, _t in
                   commitments(db, lo - timedelta(hours=6), hi)
                   if a in ("ADMIN_WORK", None) and 15 <= (e - s).total_seconds() / 60 < 240 and e > lo)
    total, cur = 0.0, None
    for s, e in spans:
        if cur is None or s > cur[1]:
            if cur:
                total += (cur[1] - cur[0]).total_seconds() / 60
            cur = [s, e]
        else:
            cur[1] = max(cur[1], e)
    if cur:
        total += (cur[1] - cur[0]).total_seconds() / 60
    return abs(total - _hm(shown)) <= 1


def check_day(db: Any, tz: Any, day: date, now: datetime,
              sleeps: Iterable[tuple[datetime, datetime]] | None = None,
              findings: Sequence[dict[str, Any]] = ()) -> DayCheck:
    out = DayCheck(day)
    blocks = stored_blocks(db, day)
    out.blocks = len(blocks)
    truth = list(sleeps) if sleeps is not None else [(s, e) for s, e, _m in sleep_sessions(db)]
    lo = datetime.combine(day, datetime.min.time(), tzinfo=tz).replace(hour=6)
    hi = datetime.combine(day + timedelta(days=1), datetime.min.time(), tzinfo=tz).replace(hour=6)
    held = commitments(db, lo - timedelta(hours=12), hi + timedelta(hours=12))
    for i, b in enumerate(blocks):
        where = f"{b['action']} {b['start'].astimezone(tz):%a %H:%M}-{b['end'].astimezone(tz):%H:%M}"
        for s, e, _a, _t in held:
            if b["start"] < e and s < b["end"]:
                out.overlaps.append(f"{where} over a commitment {s.astimezone(tz):%H:%M}-{e.astimezone(tz):%H:%M}")
        for o in blocks[i + 1:]:
            if b["start"] < o["end"] and o["start"] < b["end"]:
                out.overlaps.append(f"{where} over {o['action']} {o['start'].astimezone(tz):%H:%M}")
        if b["action"] != "SLEEP":
            for s, e in truth:
                if b["start"] < e and s < b["end"]:
                    out.asleep.append(f"{where} while asleep {s.astimezone(tz):%a %H:%M}-{e.astimezone(tz):%H:%M}")
        for text in b["evidence"]:
            out.evidence += 1
            ok = check_fact(db, tz, day, now, text, b, findings)
            if ok is None:
                out.unchecked.append(text)
            elif not ok:
                out.wrong.append(f"{where}: {text}")
    out.actions = [b["action"] for b in blocks if b["action"] != "SLEEP"]
    out.repeated = repeated_reasons(blocks, tz)
    out.short_alone = short_alone(blocks, [(s, e) for s, e, _a, _t in held] + list(truth), tz)
    for s, e in truth:
        if lo <= s < hi and (e - s) >= timedelta(hours=3) and s >= now:
            if not any(b["action"] == "SLEEP" and b["start"] < e and s < b["end"] for b in blocks):
                out.missing_sleep.append(f"asleep {s.astimezone(tz):%a %H:%M}-{e.astimezone(tz):%H:%M}, no SLEEP block")
    return out


def _where(b: dict[str, Any], tz: Any) -> str:
    return f"{b['action']} {b['start'].astimezone(tz):%a %H:%M}-{b['end'].astimezone(tz):%H:%M}"


def reason_text(b: dict[str, Any]) -> str:
    """A block's rationale as a reason: without clock times, the expected-effect tail and
    the action's name (the label before the first colon)."""
    text = (b.get("rationale") or "").split(" Expected:")[0]
    head, sep, rest = text.partition(": ")
    text = rest if sep and _CLOCK.search(head) else text
    return " ".join(_CLOCK.sub("", text).split()).strip(" .;")


def repeated_reasons(blocks: Sequence[dict[str, Any]], tz: Any) -> list[str]:
    """Pairs of blocks of one plan that give the same reason (the module docstring, (a) and
    (b)), as sentences."""
    out = []
    for i, a in enumerate(blocks):
        for b in blocks[i + 1:]:
            ra, rb = reason_text(a), reason_text(b)
            lead_a = a["evidence"][0] if a.get("evidence") else None
            if ra and ra == rb:
                out.append(f"{_where(a, tz)} and {_where(b, tz)}: the same rationale \"{ra[:80]}\"")
            elif lead_a is not None and b.get("evidence") and b["evidence"][0] == lead_a:
                out.append(f"{_where(a, tz)} and {_where(b, tz)}: the same lead reason \"{lead_a}\"")
    return out


def short_alone(blocks: Sequence[dict[str, Any]], busy: Iterable[tuple[datetime, datetime]], tz: Any) -> list[str]:
    """Non-SLEEP blocks of ``SHORT_BLOCK`` or less alone in a free window of ``WIDE_WINDOW`` or
    more. ``busy``: the commitments and sleeps around the day; the plan's SLEEP blocks are
    added. A block over a busy span is an overlap (``check_day``), not judged here."""
    spans = [(s, e) for s, e in busy] + [(b["start"], b["end"]) for b in blocks if b["action"] == "SLEEP"]
    out = []
    for b in blocks:
        if b["action"] == "SLEEP" or b["end"] - b["start"] > SHORT_BLOCK:
            continue
        if any(s < b["end"] and b["start"] < e for s, e in spans):
            continue
        lo = max((e for s, e in spans if e <= b["start"]), default=b["start"] - timedelta(hours=24))
        hi = min((s for s, e in spans if s >= b["end"]), default=b["end"] + timedelta(hours=24))
        if hi - lo < WIDE_WINDOW:
            continue
        if any(o is not b and o["action"] != "SLEEP" and o["start"] < hi and lo < o["end"] for o in blocks):
            continue
        minutes = (b["end"] - b["start"]).total_seconds() / 60
        out.append(f"{_where(b, tz)} ({minutes:.0f} min) alone in free {lo.astimezone(tz):%H:%M}-"
                   f"{hi.astimezone(tz):%H:%M} ({_hm_text((hi - lo).total_seconds() / 60)})")
    return out


def top_action(actions: Iterable[str]) -> tuple[str | None, float, int]:
    """(the most frequent action, its share, how many there were) of these non-SLEEP blocks'
    actions; (None, 0.0, 0) for none. A tie goes to the action first in ACTIONS."""
    counts: dict[str, int] = {}
    for a in actions:
        counts[a] = counts.get(a, 0) + 1
    n = sum(counts.values())
    if not n:
        return None, 0.0, 0
    best = max(counts, key=lambda a: (counts[a], -ACTIONS.index(a) if a in ACTIONS else -len(ACTIONS)))
    return best, counts[best] / n, n


def model_ask(db: Any, day: date) -> ModelAsk | None:
    """What the stored rows say of the local model for ``day``'s latest plan: asked or not,
    both picks, whether the model's pick stood (a block stored with an ``llm:`` model). None
    when no recommend run for the day recorded its picks (before issue 37)."""
    raw = audit.recommend_run(db, day)
    summary = json.loads(raw) if isinstance(raw, str) else raw
    if not summary or "picks" not in summary:
        return None
    picks = summary["picks"] or {}
    if not picks:
        return ModelAsk(asked=False)
    models = audit.recommendation_models(db, list(summary.get("recommendations") or []))
    return ModelAsk(asked=True, planner=picks.get("planner"), model=picks.get("model"),
                    stood=any(str(m).startswith("llm:") for m in models))


__all__ = ["ACTIONS", "DayCheck", "ModelAsk", "check_day", "check_fact", "commitments", "model_ask", "reason_text",
           "repeated_reasons", "short_alone", "sleep_sessions", "stored_blocks", "top_action"]
