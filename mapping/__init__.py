"""From a real person's stored rows to the simulator's world. Pure: no database, no clock.

Storage reads the rows (``storage.inputs``) and writes what comes out
(``storage.derived``); the app shell (``rhythm.derive``) wires the two.

- ``rules.toml`` + ``rules.py``: the signal -> meter table (data, not code).
- ``baseline.py``: rolling robust personal baseline (median / MAD of the previous 28 days).
- ``meters.py``: pure ``compute_meters(signals, baselines, slot)`` -> five meters in [0, 1]
  with confidence and evidence; missing signals are never invented.
- ``features.py``: per-(day, slot) signals from the stored rows (``common.rows``).
- ``actions.py``: the calendar event classifier (rules as data in data/keywords.toml), and the
  slot-action precedence (sleep > workout > mindful > calendar > nothing).
- ``build.py``: ``compute(inputs, start, end, tz=...)`` -> meters and slot actions rows.
- ``observations.py``: the stored slots in the simulator's observation format.
- ``explain.py`` / ``plot.py``: the evidence behind a meter as lines; the history PNG.

See mapping/README.md.
"""
