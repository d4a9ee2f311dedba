"""Synthetic people and files, shared by the tests and the benchmarks. Seeded: every call
gives the same records and writes the same bytes; nothing is copied from a real person.

Files no licence lets us copy (see tests/fixtures/NOTICE.md), in the shapes (attribute sets,
quirks, sizes) of real ones:

- `healthkit`: an Apple Health export.xml / export.zip;
- `whoop`: a WHOOP app CSV export and the WHOOP API v2 examples;
- `hae`: Health Auto Export JSON and CSV files;
- `tiny_gguf`: a tiny random-weight Llama GGUF with a tokenizer trained on our prompts
  (needs the ml extra).

People, as records or day tables:

- `watch_calendar`: a person with a watch and a calendar (or only one, or neither, for a day),
  written through the storage writer;
- `busy_week`: a busy week in Berlin, a real .ics file and a wearable's records;
- `insight_person`: 100 days of wearables and a calendar with planted habits;
- `insight_histories`: day tables of factors and meters with or without planted effects;
- `meter_histories`: histories in the real meter space with planted dynamics.
- `shift_people`: office workers, rotating shift workers, night-shift nurses, parents,
  students and retirees with calendars in four languages, across a DST change, and the
  truth of when they slept (`benchmarks/plan_quality.py`, tests/rhythm/test_plan_truth.py).

The suite writes the files once per session into a temporary folder (tests/conftest.py);
`python -m lab.people OUT_DIR` writes the Apple Health and WHOOP files for a look.
"""
