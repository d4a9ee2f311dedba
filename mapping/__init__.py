"""From a real person's stored data to the simulator's world (issue 6).

- ``rules.toml`` + ``rules.py``: the signal -> meter table (data, not code).
- ``baseline.py``: rolling robust personal baseline (median / MAD of the previous 28 days).
- ``meters.py``: pure ``compute_meters(signals, baselines, slot)`` -> five meters in [0, 1]
  with confidence and evidence; missing signals are never invented.
- ``features.py``: the only SQL: per-(day, slot) signals from samples, sleep, workouts, events.
- ``actions.py``: the calendar event classifier (rules as data in data/keywords.toml), and the
  slot-action precedence (sleep > workout > mindful > calendar > nothing).
- ``build.py``: ``rebuild(db, since)`` writes ``meters``, ``slot_actions``, ``events.action``.
- ``observations.py``: ``observation_stream(db, start, end)`` in the simulator's format.
- ``explain.py`` / ``plot.py``: read the meters back with their evidence; the history PNG.

See mapping/README.md.
"""
