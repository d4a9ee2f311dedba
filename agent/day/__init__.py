"""Planning a real day (pure: plain data in, a plan out; no database, no clock, no CLI).

- ``calendar``: commitments, waking hours from the person's nights, free windows, fixed slots;
- ``blocks``: where an action fits in a slot's free time, for how long; bedtimes;
- ``evidence``: the person's numbers against their own baseline, as sentences;
- ``horizon``: the rolling-horizon planner (no end of the week; calendar slots forced);
- ``plan``: ``DayPlanner(inputs).plan()`` ties them together; ``with_model_pick`` checks a
  local model's choice.
"""

from agent.day.calendar import RHYTHM_UID_SUFFIX, CalendarEvent, Night, is_rhythm_event_id
from agent.day.evidence import PersonFacts
from agent.day.plan import (
    Answer,
    Block,
    DayInputs,
    DayPlan,
    DayPlanner,
    objective_facts,
    slot_actions,
    with_model_pick,
)

#: The real-day planner's one name: in the database (``recommendations.model`` of the blocks
#: it chose), in ``rhythm sim eval --policy`` and in the docs.
PLANNER_NAME = "day-planner"

__all__ = [
    "RHYTHM_UID_SUFFIX",
    "Answer",
    "Block",
    "CalendarEvent",
    "DayInputs",
    "DayPlan",
    "DayPlanner",
    "Night",
    "PLANNER_NAME",
    "PersonFacts",
    "is_rhythm_event_id",
    "objective_facts",
    "slot_actions",
    "with_model_pick",
]
