"""The plan step of ``rhythm recommend``: the day's inputs and the belief into
``agent.day.DayPlanner`` (pure: commitments, fixed slots, one time block per open slot
with evidence and expected effect)."""

from __future__ import annotations

from typing import Any

from rhythm.day_inputs import DayData


def dynamics_note(data: DayData) -> str | None:
    """What the plan says when the person's own dynamics depart from the table."""
    dynamics = data.dynamics
    if not (dynamics.fitted and dynamics.departures()):
        return None
    n = len({d["action"] for d in dynamics.departures()})
    return (f"your own dynamics ({dynamics.n_transitions} slot-to-slot steps) depart from the table for "
            f"{n} action{'s' if n > 1 else ''}: the plan uses yours (`rhythm meters --fit`)")


def plan_day(data: DayData, belief: Any) -> tuple[Any, Any]:
    """(the DayPlanner, its DayPlan) for ``data.day`` with ``belief``."""
    from agent.day import Answer, DayInputs, DayPlanner

    inputs = DayInputs(
        day=data.day, tz=data.tz, events=data.events, nights=data.nights, facts=data.facts,
        meters=data.meters_now, belief=belief, now=data.now if data.day == data.today else None,
        answers=[Answer(a["local_day"], a["slot"], a["action"], a["response"], a.get("context"),
                        float(a.get("confidence", 1.0))) for a in data.feedback],
        recent_actions=data.recent_actions, wake_override=data.wake_override, bed_override=data.bed_override,
        dynamics=data.dynamics, past_events=data.past_events, contradicted=data.contradicted,
        preferred_times=preferred_times(data.feedback, data.tz), recent_blocks=data.recent_blocks,
        recent_bedtimes=data.recent_bedtimes,
        sessions={"EXERCISE": data.workout_minutes},
    )
    planner = DayPlanner(inputs)
    return planner, planner.plan()


def preferred_times(feedback: list[dict[str, Any]], tz: Any) -> dict[str, Any]:
    """action -> the local clock time the person last moved Rhythm's block of it to in their
    calendar (answers with ``moved_to``, issue 38)."""
    out: dict[str, Any] = {}
    for a in sorted((a for a in feedback if a.get("moved_to") is not None), key=lambda a: a["moved_to"]):
        out[a["action"]] = a["moved_to"].astimezone(tz).time().replace(second=0, microsecond=0)
    return out
