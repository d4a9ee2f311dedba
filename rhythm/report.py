"""`rhythm report`: one self-contained HTML file about the last N days.

Sections: today's plan with its belief and the evidence behind it; the five meters per
slot over time; what moves the meters (`rhythm insights`' findings as a forest plot); what
the person did (slot actions, workouts, calendar); the
recommendations with their accept/ignore answers; the belief over time with its
uncertainty band; and the data behind it all (rows per source and day).

Self-contained: inline CSS, plots as base64 PNG drawn with matplotlib's Agg canvas (no
pyplot, no global state), no JavaScript, no external URL (a Content-Security-Policy in the
page forbids any). Works with partial data: an empty table gives a clear "no data yet"
section, never an error. Read-only on the database.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from common.errors import ConfigError
from common.records import ACTIONS, METERS, SLOTS
from rhythm.settings import Settings, local_today, user_zone
from storage import open_db, overview

BELIEFS = ("social", "morning", "work")
METER_COLORS = {"vitality": "#d1495b", "cognition": "#00798c", "progress": "#edae49",
                "serenity": "#66a182", "connection": "#8e6c8a"}
ACTION_COLORS = ("#3d5a80", "#98c1d9", "#e0fbfc", "#293241", "#ee6c4d",
                 "#9bc53d", "#f4a259", "#e55934", "#c3b299", "#7d5ba6")
BELIEF_COLORS = {"social": "#e55934", "morning": "#edae49", "work": "#3d5a80"}
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


@dataclass
class ReportData:
    today: date
    start: date
    generated_at: datetime
    database: str
    meters: list[dict[str, Any]] = field(default_factory=list)
    slot_actions: list[dict[str, Any]] = field(default_factory=list)
    recommendations: list[dict[str, Any]] = field(default_factory=list)
    workouts: list[dict[str, Any]] = field(default_factory=list)
    events_by_action: dict[str, int] = field(default_factory=dict)
    coverage: list[dict[str, Any]] = field(default_factory=list)
    events_near_today: list[dict[str, Any]] = field(default_factory=list)
    tz: Any = UTC
    insights: Any = None  # mapping.insights.InsightResult over every day with meters

    @property
    def today_plan(self) -> list[dict[str, Any]]:
        """Today's latest plan: the recommendations made together most recently, in time order
        (a block per open slot; older plans' blocks for other slots are not mixed in)."""
        rows = [r for r in self.recommendations if r["local_day"] == self.today]
        if not rows:
            return []
        last = max(r["created_at"] for r in rows)
        plan = [r for r in rows if r["created_at"] == last]
        return sorted(plan, key=lambda r: (r.get("start_ts") or datetime.max.replace(tzinfo=UTC), _slot_key(r)))

    @property
    def commitments(self) -> list[Any]:
        """Today's commitments (cancelled, free, all-day, declined and Rhythm's own blocks left out)."""
        from agent.day.calendar import CalendarEvent, commitments, is_rhythm_event_id, slot_window

        evs = [
            CalendarEvent(e["start_ts"].astimezone(self.tz), e["end_ts"].astimezone(self.tz), e["title"], e["action"],
                          e["source"], e["status"], e["transparency"], bool(e["all_day"]), e["self_response"],
                          is_rhythm_event_id(str(e["event_id"])))
            for e in self.events_near_today
        ]
        lo, _ = slot_window(self.today, 0, self.tz)
        _, hi = slot_window(self.today, 3, self.tz)
        return commitments(evs, lo, hi)


@dataclass(frozen=True)
class Report:
    path: Path
    sections: dict[str, bool]  # section -> has data
    plots: int


# -- gathering -------------------------------------------------------------------------------
def gather(settings: Settings, today: date, days: int) -> ReportData:
    start = today - timedelta(days=days - 1)
    data = ReportData(today=today, start=start, generated_at=datetime.now(UTC), database=str(settings.database))
    if not settings.database.exists():
        return data
    data.tz = user_zone(settings)
    with open_db(settings.database, read_only=True) as db:
        rows = overview.report_rows(db, start, today)
    for name, value in rows.items():
        setattr(data, name, value)
    for r in data.recommendations:  # JSON columns arrive as text
        for k in ("evidence", "expected_effect"):
            if isinstance(r.get(k), str):
                r[k] = json.loads(r[k])
    from rhythm.insights import run_insights

    data.insights = run_insights(settings)
    return data


def _slot_order(keys: Any) -> list[str]:
    return sorted(keys, key=lambda s: (SLOTS.index(s) if s in SLOTS else len(SLOTS), s))


def _slot_key(row: dict[str, Any]) -> tuple[int, str]:
    return (SLOTS.index(row["slot"]) if row["slot"] in SLOTS else len(SLOTS), row["slot"])


# -- plots -----------------------------------------------------------------------------------
def _figure(w: float, h: float) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h), dpi=96, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _png(fig: Any, alt: str) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    b64 = base64.b64encode(buf.getvalue()).decode("ascii")
    return f'<img class="plot" alt="{html.escape(alt)}" src="data:image/png;base64,{b64}">'


def _num(v: Any) -> float:
    return float("nan") if v is None else float(v)


def _day_axis(ax: Any, start: date, today: date) -> None:
    import matplotlib.dates as mdates

    ax.set_xlim(start - timedelta(days=0.5), today + timedelta(days=0.5))
    ax.xaxis.set_major_locator(mdates.AutoDateLocator(maxticks=8))
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%d %b"))
    ax.grid(alpha=0.25)


def meters_plot(data: ReportData, slot: str) -> str | None:
    rows = [r for r in data.meters if r["slot"] == slot]
    if not rows:
        return None
    fig = _figure(9.4, 2.3)
    ax = fig.add_subplot()
    days = [r["local_day"] for r in rows]
    for m in METERS:
        ax.plot(days, [_num(r[m]) for r in rows], marker="o", markersize=2.5, lw=1.4, label=m, color=METER_COLORS[m])
    ax.set_ylim(0, 1)
    ax.set_title(f"{slot}", loc="left", fontsize=10)
    _day_axis(ax, data.start, data.today)
    ax.legend(fontsize=7, ncols=5, loc="lower left", frameon=False)
    return _png(fig, f"meters in the {slot} over time")


def _mpl_text(text: str) -> str:
    """Imported text for a matplotlib label: no mathtext ($...$), no control characters, no
    emoji or symbols the bundled font lacks (they would draw as boxes)."""
    clean = "".join(ch if ch.isprintable() and ord(ch) < 0x2500 else " " for ch in str(text))
    return " ".join(clean.split()).replace("$", r"\$")


def day_plot(data: ReportData) -> str | None:
    """Today side by side: the calendar's commitments (left) and the plan's blocks (right),
    06:00 to 06:00 the next morning."""
    commitments, plan = data.commitments, [r for r in data.today_plan if r.get("start_ts")]
    if not commitments and not plan:
        return None
    base = datetime.combine(data.today, datetime.min.time(), tzinfo=data.tz)

    def hours(t: datetime) -> float:
        return (t.astimezone(data.tz) - base).total_seconds() / 3600.0

    fig = _figure(7.5, 6.5)
    ax = fig.add_subplot()
    for c in commitments:
        y0, y1 = max(6.0, hours(c.start)), min(30.0, hours(c.end))
        if y1 <= y0:
            continue
        ax.add_patch(_rect(0.05, y0, 0.9, y1 - y0, "#b8c0c8"))
        ax.text(0.1, (y0 + y1) / 2, f"{c.start.astimezone(data.tz):%H:%M} {_mpl_text(c.title)[:34]}",
                va="center", fontsize=7, clip_on=True)
    for r in plan:
        y0, y1 = max(6.0, hours(r["start_ts"])), min(30.0, hours(r["end_ts"]))
        if y1 <= y0:
            continue
        color = ACTION_COLORS[ACTIONS.index(r["action"])] if r["action"] in ACTIONS else "#888888"
        ax.add_patch(_rect(1.05, y0, 0.9, y1 - y0, color, alpha=0.85))
        ax.text(1.1, (y0 + y1) / 2, f"{r['start_ts'].astimezone(data.tz):%H:%M} {r['action'].lower()}",
                va="center", fontsize=7, clip_on=True)
    ax.set_xlim(0, 2)
    ax.set_ylim(30, 6)
    ax.set_xticks([0.5, 1.5], ["your calendar", "the plan"])
    ticks = list(range(6, 31, 2))
    ax.set_yticks(ticks, [f"{t % 24:02d}:00" for t in ticks], fontsize=7)
    ax.set_axisbelow(True)
    ax.grid(axis="y", color="#eeeeee")
    ax.set_title(f"{data.today:%A %d %B}", fontsize=9)
    return _png(fig, f"your calendar and the plan for {data.today}")


def _rect(x: float, y: float, w: float, h: float, color: str, alpha: float = 1.0) -> Any:
    from matplotlib.patches import Rectangle

    return Rectangle((x, y), w, h, facecolor=color, edgecolor="white", alpha=alpha)


def actions_plot(data: ReportData) -> str | None:
    if not data.slot_actions:
        return None
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    n_days = (data.today - data.start).days + 1
    grid = [[math.nan] * n_days for _ in SLOTS]
    seen = set()
    for r in data.slot_actions:
        if r["slot"] in SLOTS and r["action"] in ACTIONS:
            grid[SLOTS.index(r["slot"])][(r["local_day"] - data.start).days] = ACTIONS.index(r["action"])
            seen.add(r["action"])
    fig = _figure(9.4, 2.4)
    ax = fig.add_subplot()
    cmap = ListedColormap(ACTION_COLORS).with_extremes(bad="#eeeeee")
    ax.imshow(grid, aspect="auto", cmap=cmap, vmin=-0.5, vmax=len(ACTIONS) - 0.5, interpolation="nearest")
    ax.set_yticks(range(len(SLOTS)), SLOTS, fontsize=8)
    ticks = list(range(0, n_days, max(1, n_days // 8)))
    ax.set_xticks(ticks, [(data.start + timedelta(days=i)).strftime("%d %b") for i in ticks], fontsize=8)
    handles = [Patch(color=ACTION_COLORS[ACTIONS.index(a)], label=a.lower()) for a in ACTIONS if a in seen]
    fig.legend(handles=handles, fontsize=7, loc="outside right upper", frameon=False)
    return _png(fig, "what you did, per day and slot")


def belief_plot(data: ReportData) -> str | None:
    rows = [r for r in data.recommendations if any(r[f"belief_{b}"] is not None for b in BELIEFS)]
    if not rows:
        return None
    fig = _figure(9.4, 2.8)
    ax = fig.add_subplot()
    x = [r["created_at"] for r in rows]
    for b in BELIEFS:
        mean = [_num(r[f"belief_{b}"]) for r in rows]
        sd = [_num(r[f"belief_sd_{b}"]) for r in rows]
        ax.plot(x, mean, lw=1.6, marker="o", markersize=2.5, color=BELIEF_COLORS[b], label=b)
        if not all(math.isnan(s) for s in sd):
            lo = [m - (0 if math.isnan(s) else s) for m, s in zip(mean, sd, strict=True)]
            hi = [m + (0 if math.isnan(s) else s) for m, s in zip(mean, sd, strict=True)]
            ax.fill_between(x, lo, hi, color=BELIEF_COLORS[b], alpha=0.18, lw=0)
    ax.grid(alpha=0.25)
    ax.set_title("belief about you (mean and ±1 sd)", loc="left", fontsize=10)
    ax.legend(fontsize=7, ncols=3, loc="upper left", frameon=False)
    import matplotlib.dates as mdates

    ax.xaxis.set_major_formatter(mdates.DateFormatter("%d %b"))
    return _png(fig, "belief over time with its uncertainty")


def coverage_plot(data: ReportData) -> str | None:
    if not data.coverage:
        return None
    by_source: dict[str, dict[date, int]] = defaultdict(dict)
    for r in data.coverage:
        by_source[r["source"]][r["local_day"]] = int(r["n"])
    fig = _figure(9.4, 2.2)
    ax = fig.add_subplot()
    n_days = (data.today - data.start).days + 1
    days = [data.start + timedelta(days=i) for i in range(n_days)]
    bottom = [0] * n_days
    for i, (source, counts) in enumerate(sorted(by_source.items())):
        vals = [counts.get(d, 0) for d in days]
        ax.bar(days, vals, bottom=bottom, label=source, color=ACTION_COLORS[i % len(ACTION_COLORS)], width=0.8)
        bottom = [a + b for a, b in zip(bottom, vals, strict=True)]
    _day_axis(ax, data.start, data.today)
    ax.set_ylabel("rows", fontsize=8)
    ax.legend(fontsize=7, ncols=4, loc="upper left", frameon=False)
    return _png(fig, "rows per source and day")


INSIGHTS_SHOWN = 12
UNIT_AXIS = {"meter": "difference in meter units (0-1; 0.5 = usual for you)", "min": "difference in minutes of sleep",
             "ms": "difference in ms of HRV", "bpm": "difference in bpm of resting heart rate"}


def _finding_label(c: Any) -> str:
    from mapping.insights import when_text

    return _mpl_text(f"{c.factor.name} -> {c.outcome.name}, {when_text(c)}")[:70]


def insights_plot(findings: list[Any]) -> str | None:
    """A forest plot: each finding's effect (days with minus days without) with its 95 %
    interval, one panel per unit, the most certain finding on top."""
    if not findings:
        return None
    units = [u for u in UNIT_AXIS if any(c.outcome.unit == u for c in findings)]
    rows = {u: [c for c in findings if c.outcome.unit == u] for u in units}
    fig = _figure(9.4, 0.9 + 0.32 * len(findings) + 0.5 * len(units))
    grid = fig.add_gridspec(len(units), 1, height_ratios=[len(rows[u]) + 1.2 for u in units])
    for k, u in enumerate(units):
        ax = fig.add_subplot(grid[k])
        cs = rows[u]
        ys = list(range(len(cs)))[::-1]
        for y, c in zip(ys, cs, strict=True):
            base = c.outcome.name.split("@")[0]
            color = METER_COLORS.get(base, "#555555")
            ax.plot([c.ci95[0], c.ci95[1]], [y, y], color=color, lw=2.2, solid_capstyle="butt")
            ax.plot([c.effect], [y], "o", color=color, markersize=5)
        ax.axvline(0.0, color="#888888", lw=0.8, ls="--")
        ax.set_yticks(ys, [_finding_label(c) for c in cs], fontsize=7.5)
        ax.set_ylim(-0.7, len(cs) - 0.3)
        ax.set_xlabel(UNIT_AXIS[u], fontsize=8)
        ax.tick_params(axis="x", labelsize=7.5)
        ax.grid(axis="x", alpha=0.25)
    return _png(fig, "what moves your meters: effects with 95% intervals")


def section_insights(data: ReportData) -> tuple[str, bool, int]:
    from mapping.insights import effect_text, when_text

    res = data.insights
    out = ["<h2>What moves your meters</h2>"]
    if res is None or res.first_day is None:
        out.append(empty("No meters yet, so nothing to compare. Import data and run `rhythm map`."))
        return "\n".join(out), False, 0
    findings = res.findings[:INSIGHTS_SHOWN]
    out.append(
        f'<p class="note">Days with a factor against days without it, over all {res.days} days with meters '
        f"({res.first_day} to {res.last_day}; {len(res.tested):,} comparisons tested). A finding has a q-value "
        f"below {res.q_max:g} (Benjamini-Hochberg over every comparison). Correlation, not cause: days with a "
        "factor differ in other ways too. `rhythm insights` lists them all and how many more days the others "
        "need.</p>")
    if not findings:  # still a result: the comparisons ran and found nothing yet
        out.append(empty(f"No finding at q < {res.q_max:g} yet over {res.days} days "
                         f"({len(res.tested):,} comparisons tested)."))
        return "\n".join(out), bool(res.tested), 0
    plot = insights_plot(findings)
    out.append(f"<figure>{plot}</figure>")
    rows = []
    for c in findings:
        d = c.to_dict()
        rows.append([d["factor"], d["meter"], when_text(c), effect_text(d), f"{d['n_with']} / {d['n_without']}",
                     f"{d['q_value']:.2g}"])
    out.append(table(["factor", "meter", "when", "effect [95% interval]", "days with / without", "q"], rows))
    return "\n".join(out), True, 1


# -- HTML ------------------------------------------------------------------------------------
def e(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.2f}"
    if isinstance(v, datetime):
        return v.strftime("%Y-%m-%d %H:%M")
    return html.escape(str(v))


def table(columns: list[str], rows: list[list[Any]], cls: str = "") -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{c if isinstance(c, _Raw) else e(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


class _Raw(str):
    """Already-escaped HTML for a table cell."""


def empty(text: str) -> str:
    return f'<p class="empty">{html.escape(text)}</p>'


def _belief_cell(r: dict[str, Any]) -> _Raw:
    parts = []
    for b in BELIEFS:
        m, sd = r.get(f"belief_{b}"), r.get(f"belief_sd_{b}")
        if m is None:
            continue
        parts.append(f"{b} {m:.2f}" + (f" ± {sd:.2f}" if sd is not None else ""))
    return _Raw(html.escape(", ".join(parts)) if parts else "—")


def _evidence_html(obj: Any, depth: int = 0) -> str:
    if isinstance(obj, str):
        try:
            obj = json.loads(obj)
        except ValueError:
            return html.escape(obj)
    if depth > 3:
        return html.escape(json.dumps(obj, default=str)[:200])
    if isinstance(obj, dict):
        items = list(obj.items())[:40]
        return "<ul>" + "".join(f"<li><b>{html.escape(str(k))}</b>: {_evidence_html(v, depth + 1)}</li>" for k, v in items) + "</ul>"
    if isinstance(obj, list):
        if all(not isinstance(x, dict | list) for x in obj):
            return html.escape(", ".join(e(x) if isinstance(x, float) else str(x) for x in obj[:40]))
        return "<ol>" + "".join(f"<li>{_evidence_html(x, depth + 1)}</li>" for x in obj[:40]) + "</ol>"
    if isinstance(obj, float):
        return f"{obj:.3g}"
    return html.escape(str(obj))


def section_plan(data: ReportData) -> tuple[str, bool, int]:
    plan = data.today_plan
    n = 0
    out = [f"<h2>Today's plan <small>{data.today:%A %d %B %Y}</small></h2>"]
    if not plan:
        out.append(empty(f"No plan for {data.today} yet. Run `rhythm recommend` (or the daemon's morning run)."))
    else:
        picture = day_plot(data)
        if picture:
            out.append(picture)
            n += 1
        out.append(table(
            ["when", "slot", "do", "why", "the facts behind it", "expected", "belief", "model", "your answer"],
            [[_when_cell(r, data), r["slot"], r["action"], r["rationale"], _list_cell(r.get("evidence")),
              _effect_cell(r.get("expected_effect")), _belief_cell(r), r["model"], r["response"]] for r in plan],
            "plan",
        ))
        held = data.commitments
        if held:
            out.append("<h3>Your commitments today</h3>")
            out.append(table(["when", "what", "counted as"], [
                [f"{c.start.astimezone(data.tz):%H:%M}-{c.end.astimezone(data.tz):%H:%M}", c.title,
                 c.action or "unclassified"] for c in held]))
    # the evidence: the meters the plan starts from (today's, else the latest day before)
    meter_days = sorted({r["local_day"] for r in data.meters if r["local_day"] <= data.today})
    if meter_days:
        day = meter_days[-1]
        rows = [r for r in data.meters if r["local_day"] == day]
        out.append(f"<h3>Evidence: meters on {day}</h3>")
        out.append(table(["slot", *METERS, "confidence"], [[r["slot"], *(r[m] for m in METERS), r["confidence"]]
                                                           for r in sorted(rows, key=_slot_key)]))
        for r in sorted(rows, key=_slot_key):
            if r.get("evidence"):
                out.append(f"<details><summary>signals behind the {html.escape(r['slot'])} meters</summary>"
                           f'<div class="evidence">{_evidence_html(r["evidence"])}</div></details>')
    else:
        out.append(empty("No meters yet, so no evidence to show. Import data and run `rhythm map`."))
    return "\n".join(out), bool(plan), n


def _when_cell(r: dict[str, Any], data: ReportData) -> str:
    if not r.get("start_ts"):
        return r["slot"]
    return f"{r['start_ts'].astimezone(data.tz):%H:%M}-{r['end_ts'].astimezone(data.tz):%H:%M}"


def _list_cell(items: Any) -> _Raw:
    if not items:
        return _Raw("—")
    return _Raw("<ul>" + "".join(f"<li>{html.escape(str(x))}</li>" for x in items) + "</ul>")


def _effect_cell(effect: Any) -> str:
    if not effect:
        return "—"
    return ", ".join(f"{k} {v:+.2f}" for k, v in sorted(effect.items(), key=lambda kv: -abs(kv[1])))


def section_meters(data: ReportData) -> tuple[str, bool, int]:
    out = ["<h2>Meters per slot</h2>",
           '<p class="note">Each meter is in [0, 1]; 0.5 is "usual for you". Gaps are days without the signals.</p>']
    plots = [p for p in (meters_plot(data, s) for s in SLOTS) if p]
    if not plots:
        out.append(empty("No meters yet: import data, then run `rhythm map`."))
    out.extend(f'<figure>{p}</figure>' for p in plots)
    return "\n".join(out), bool(plots), len(plots)


def _action_cell(row: dict[str, Any] | None) -> str | None:
    """A slot's action, with where it came from when a label decided it."""
    if not row or not row.get("action"):
        return None
    ev = row.get("evidence")
    if isinstance(ev, str):
        try:
            ev = json.loads(ev)
        except ValueError:
            ev = {}
    source = (ev or {}).get("source") if isinstance(ev, dict) else None
    tag = {"your label": " (your label)", "learned from your devices": " (learned)"}.get(source or "", "")
    return f"{row['action']}{tag}"


def section_did(data: ReportData) -> tuple[str, bool, int]:
    out = ["<h2>What you did</h2>"]
    n = 0
    p = actions_plot(data)
    if p:
        out.append(f"<figure>{p}</figure>")
        n += 1
        recent = sorted({r["local_day"] for r in data.slot_actions}, reverse=True)[:7]
        by = {(r["local_day"], r["slot"]): r for r in data.slot_actions}
        out.append(table(["day", *SLOTS], [[d.strftime("%a %d %b"), *(_action_cell(by.get((d, s))) for s in SLOTS)]
                                           for d in recent]))
        out.append("<p>(your label): a label you gave decided it (<code>rhythm label</code>); (learned): a label "
                   "learned from what your devices recorded (<code>rhythm label --suggested</code>).</p>")
    else:
        out.append(empty("No slot actions yet: run `rhythm map` after importing data."))
    if data.workouts:
        out.append("<h3>Workouts</h3>")
        out.append(table(["day", "sport", "minutes", "kcal", "avg HR", "source"],
                         [[w["local_day"], w["sport"], None if w["duration_min"] is None else round(w["duration_min"]),
                           None if w["energy_kcal"] is None else round(w["energy_kcal"]),
                           None if w["avg_hr_bpm"] is None else round(w["avg_hr_bpm"]), w["source"]]
                          for w in data.workouts[-12:]]))
    if data.events_by_action:
        out.append("<h3>Calendar</h3>")
        out.append(table(["classified as", "events"], [[k.lower(), v] for k, v in data.events_by_action.items()]))
    return "\n".join(out), bool(p or data.workouts or data.events_by_action), n


def section_recommendations(data: ReportData) -> tuple[str, bool]:
    recs = data.recommendations
    out = ["<h2>Recommendations and your answers</h2>"]
    if not recs:
        out.append(empty("No recommendations yet: run `rhythm recommend`."))
        return "\n".join(out), False
    answered = [r for r in recs if r["response"]]
    accepted = sum(1 for r in answered if r["response"] == "accept")
    out.append(f'<p class="summary">{len(recs)} recommendations, {len(answered)} answered, '
               f"{accepted} accepted, {len(answered) - accepted} ignored.</p>")
    per_action: dict[str, Counter[str]] = defaultdict(Counter)
    for r in recs:
        per_action[r["action"]][r["response"] or "unanswered"] += 1
    out.append(table(["action", "accepted", "ignored", "unanswered"],
                     [[a, c["accept"], c["ignore"], c["unanswered"]] for a, c in sorted(per_action.items())]))
    out.append("<h3>Latest</h3>")
    out.append(table(["#", "day", "slot", "do", "answer", "why"],
                     [[r["id"], r["local_day"], r["slot"], r["action"], r["response"], r["rationale"]]
                      for r in list(reversed(recs))[:20]]))
    return "\n".join(out), True


def section_belief(data: ReportData) -> tuple[str, bool, int]:
    out = ["<h2>Belief over time</h2>",
           '<p class="note">What the assistant believes about you (how social, how much of a morning person, '
           "how work-driven), with a band of ±1 standard deviation: narrow bands mean it is sure.</p>"]
    p = belief_plot(data)
    if p:
        out.append(f"<figure>{p}</figure>")
    else:
        out.append(empty("No belief yet: it starts with the first recommendation."))
    return "\n".join(out), bool(p), int(bool(p))


def section_data(data: ReportData) -> tuple[str, bool, int]:
    out = ["<h2>Data behind it</h2>"]
    p = coverage_plot(data)
    if p:
        out.append(f"<figure>{p}</figure>")
    else:
        out.append(empty("No data in this period: import an export or run `rhythm sync`."))
    return "\n".join(out), bool(p), int(bool(p))


STYLE = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;background:#fafaf7;color:#222}
main{max-width:980px;margin:0 auto;padding:24px}
header h1{margin:0 0 4px;font-size:26px}
header p{margin:0;color:#666}
section{background:#fff;border:1px solid #e4e4dc;border-radius:10px;padding:16px 20px;margin:18px 0}
h2{margin:0 0 10px;font-size:19px} h2 small{font-weight:normal;color:#777;font-size:14px}
h3{font-size:15px;margin:16px 0 6px}
table{border-collapse:collapse;width:100%;font-size:13px;margin:6px 0}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #eee;vertical-align:top}
th{background:#f3f3ee}
table.plan td:nth-child(2){font-weight:600}
figure{margin:8px 0} img.plot{max-width:100%;height:auto;display:block}
.empty{color:#8a6d3b;background:#fcf8e3;border:1px solid #faebcc;padding:8px 12px;border-radius:6px}
.note,.summary{color:#555;font-size:13px}
details{margin:4px 0;font-size:13px} .evidence{max-height:320px;overflow:auto}
footer{color:#888;font-size:12px;text-align:center;margin:20px 0}
"""


def render(data: ReportData) -> tuple[str, dict[str, bool], int]:
    plan_html, has_plan, n0 = section_plan(data)
    meters_html, has_meters, n1 = section_meters(data)
    insights_html, has_insights, n5 = section_insights(data)
    did_html, has_did, n2 = section_did(data)
    recs_html, has_recs = section_recommendations(data)
    belief_html, has_belief, n3 = section_belief(data)
    data_html, has_data, n4 = section_data(data)
    sections = {"plan": has_plan, "meters": has_meters, "insights": has_insights, "did": has_did,
                "recommendations": has_recs, "belief": has_belief, "data": has_data}
    body = "\n".join(
        f'<section id="{sid}">{h}</section>'
        for sid, h in (("plan", plan_html), ("meters", meters_html), ("insights", insights_html), ("did", did_html),
                       ("recommendations", recs_html), ("belief", belief_html), ("data", data_html))
    )
    page = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Rhythm report {data.start} to {data.today}</title>
<style>{STYLE}</style>
</head>
<body>
<main>
<header><h1>Rhythm report</h1>
<p>{data.start:%d %b %Y} to {data.today:%d %b %Y} ({(data.today - data.start).days + 1} days) · generated {e(data.generated_at)} UTC · {html.escape(data.database)}</p></header>
{body}
<footer>Made by Rhythm on this machine from your own data; nothing left it.</footer>
</main>
</body>
</html>
"""
    return page, sections, n0 + n1 + n2 + n3 + n4 + n5


def write_report(
    settings: Settings,
    *,
    days: int = 28,
    today: date | None = None,
    out: Path | None = None,
    now: datetime | None = None,
) -> Report:
    """Render the report for the `days` ending on `today` (default: the person's today, in
    their zone, at `now`) to `out` (default RHYTHM_HOME/reports/report-<today>.html)."""
    if days < 1:
        raise ConfigError(f"--days must be at least 1, got {days}")
    today = today or local_today(settings, now)
    data = gather(settings, today, days)
    page, sections, plots = render(data)
    path = Path(out).expanduser() if out else settings.home / "reports" / f"report-{today}.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return Report(path=path, sections=sections, plots=plots)
