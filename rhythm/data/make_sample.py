"""Write the bundled sample data (rhythm/data/sample/): five weeks of one coherent person.

    python -m rhythm.data.make_sample            # rewrites rhythm/data/sample/
    python -m rhythm.data.make_sample OUT_DIR    # writes elsewhere (tests compare the bytes)

Mara lives in Utrecht (Europe/Amsterdam, UTC+01:00 for the whole sample). She is a
morning person: asleep by ~22:45, up at ~06:20, deep work before lunch, meetings after it,
the gym at 07:00 on Mondays, Wednesdays and Fridays and a long run on Sundays. She
socialises on weekends (Friday drinks, Saturday dinners), sleeps late and recovers worse
after those nights, and has Sunday dinner with her family. Week four is a product launch:
more meetings, shorter nights, lower HRV.

Three files, in the shapes of the real exports (connectors/*/README.md describe them):

- ``apple_health_export.zip``: ``apple_health_export/export.xml`` with HeartRate,
  RestingHeartRate, HRV SDNN (with beat lists), StepCount from both the iPhone and the
  Watch, ActiveEnergyBurned, iOS 16 sleep stages (the Watch) plus InBed (the iPhone),
  MindfulSession and Workouts with WorkoutStatistics;
- ``whoop_export.zip``: physiological_cycles.csv, sleeps.csv, workouts.csv,
  journal_entries.csv (the WHOOP app's CSV headers);
- ``calendar.ics``: work meetings, focus blocks, family dinners, social events, the gym,
  titles in Dutch, English, German, French and Spanish, weekly recurring series (one with
  an EXDATE and a moved occurrence) and a cancelled event.

Everything is drawn from one seeded generator and the zips carry fixed timestamps, so the
files are byte-for-byte reproducible. The sample ends on ``SAMPLE_TODAY`` (the demo's fixed
"today"); the export was taken that morning at 07:45.
"""

from __future__ import annotations

import io
import random
import sys
import zipfile
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path
from xml.sax.saxutils import quoteattr

SAMPLE_START = date(2025, 2, 20)  # a Thursday
SAMPLE_TODAY = date(2025, 3, 26)  # a Wednesday: the demo's "today"
SAMPLE_TIMEZONE = "Europe/Amsterdam"
TZ = timezone(timedelta(hours=1))  # CET; summer time starts after the sample (30 March)
EXPORTED_AT = datetime(2025, 3, 26, 7, 45, tzinfo=TZ)
SEED = 20250326
OUT = Path(__file__).resolve().parent / "sample"

FILES = ("apple_health_export.zip", "whoop_export.zip", "calendar.ics")

WATCH = "Mara’s Apple Watch"
PHONE = "Mara’s iPhone"
WATCH_DEVICE = (
    "<<HKDevice: 0x{n:09x}>, name:Apple Watch, manufacturer:Apple Inc., model:Watch, "
    "hardware:Watch7,2, software:11.3>"
)
PHONE_DEVICE = (
    "<<HKDevice: 0x{n:09x}>, name:iPhone, manufacturer:Apple Inc., model:iPhone, "
    "hardware:iPhone15,2, software:18.3>"
)
LAUNCH_WEEK = (date(2025, 3, 10), date(2025, 3, 16))


def days() -> list[date]:
    return [SAMPLE_START + timedelta(days=i) for i in range((SAMPLE_TODAY - SAMPLE_START).days + 1)]


def at(d: date, hour: float) -> datetime:
    """Local time on day d, `hour` may exceed 24 or be negative (minutes kept whole)."""
    return datetime(d.year, d.month, d.day, tzinfo=TZ) + timedelta(minutes=round(hour * 60))


def hk(ts: datetime) -> str:
    return ts.strftime("%Y-%m-%d %H:%M:%S %z")


def wl(ts: datetime) -> str:
    return ts.strftime("%Y-%m-%d %H:%M:%S")


def in_launch(d: date) -> bool:
    return LAUNCH_WEEK[0] <= d <= LAUNCH_WEEK[1]


# -- the person's days ---------------------------------------------------------------------
@dataclass
class Night:
    """The sleep that ends on the morning of `day`."""

    day: date
    onset: datetime
    wake: datetime
    late: bool  # after a social evening
    hrv_sdnn: float
    hrv_rmssd: float
    rhr: float
    stages: list[tuple[str, datetime, datetime]]


@dataclass
class WorkoutPlan:
    day: date
    kind: str  # HK activity type suffix
    whoop_name: str
    start: datetime
    end: datetime
    distance_km: float | None
    kcal: float
    avg_hr: int
    max_hr: int
    strain: float


def social_evening(d: date) -> bool:
    """Friday drinks and Saturday dinners (not on the launch Friday)."""
    return d.weekday() == 5 or (d.weekday() == 4 and d != date(2025, 3, 14))


def build_nights(rng: random.Random) -> list[Night]:
    nights = []
    for d in days():
        prev = d - timedelta(days=1)
        late = social_evening(prev)
        if late:
            onset = at(prev, 24.5 + rng.uniform(-0.3, 0.6))
            wake = at(d, 8.2 + rng.uniform(-0.3, 0.5))
        else:
            onset = at(prev, 22.75 + rng.uniform(-0.3, 0.35) + (0.6 if in_launch(prev) else 0.0))
            wake = at(d, 6.3 + rng.uniform(-0.2, 0.25) - (0.25 if in_launch(d) else 0.0))
        base = 64.0 - (9.0 if in_launch(d) else 0.0) - (14.0 if late else 0.0)
        sdnn = round(base + rng.gauss(0, 4), 3)
        rmssd = round(sdnn * 0.85 + rng.gauss(0, 2), 1)
        rhr = round(51 + (5 if late else 0) + (3 if in_launch(d) else 0) + rng.gauss(0, 1.2))
        nights.append(Night(d, onset, wake, late, sdnn, rmssd, rhr, sleep_stages(rng, onset, wake, late)))
    return nights


def sleep_stages(rng: random.Random, onset: datetime, wake: datetime, late: bool) -> list[tuple[str, datetime, datetime]]:
    """~90-minute cycles: deep early in the night, REM late, brief wakes."""
    out = []
    t = onset + timedelta(minutes=rng.randint(6, 18))  # falling asleep: in bed, not asleep
    cycle = 0
    while t < wake - timedelta(minutes=10):
        deep = max(5, int((38 - 9 * cycle - (12 if late else 0)) + rng.gauss(0, 4)))
        rem = max(6, int(12 + 7 * cycle + rng.gauss(0, 3)))
        core = max(20, int(45 + rng.gauss(0, 6)))
        for stage, minutes in (("Core", core // 2), ("Deep", deep), ("Core", core - core // 2), ("REM", rem)):
            end = min(t + timedelta(minutes=minutes), wake)
            if end > t:
                out.append((stage, t, end))
            t = end
            if t >= wake:
                break
        if t < wake - timedelta(minutes=20) and rng.random() < 0.5:
            end = t + timedelta(minutes=rng.randint(1, 4))
            out.append(("Awake", t, end))
            t = end
        cycle += 1
    return out


def build_workouts(rng: random.Random) -> list[WorkoutPlan]:
    out = []
    for d in days():
        wd = d.weekday()
        if wd in (0, 2, 4) and not (in_launch(d) and wd == 2):
            s = at(d, 7.0 + rng.uniform(-0.05, 0.1))
            dur = rng.randint(48, 62)
            out.append(WorkoutPlan(d, "TraditionalStrengthTraining", "Weightlifting", s, s + timedelta(minutes=dur),
                                   None, round(rng.uniform(260, 340), 1), rng.randint(112, 124), rng.randint(150, 164),
                                   round(rng.uniform(8.5, 11.5), 1)))
        elif wd == 6:
            s = at(d, 10.0 + rng.uniform(0, 0.4))
            km = round(rng.uniform(8.5, 11.5), 2)
            dur = int(km * rng.uniform(5.3, 5.8))
            out.append(WorkoutPlan(d, "Running", "Running", s, s + timedelta(minutes=dur), km,
                                   round(km * 68 + rng.uniform(-20, 20), 1), rng.randint(148, 158), rng.randint(172, 182),
                                   round(rng.uniform(12.5, 15.0), 1)))
        elif wd == 5 and rng.random() < 0.75:
            s = at(d, 10.5)
            out.append(WorkoutPlan(d, "Yoga", "Yoga", s, s + timedelta(minutes=60), None,
                                   round(rng.uniform(150, 190), 1), rng.randint(88, 96), rng.randint(118, 128),
                                   round(rng.uniform(4.0, 6.0), 1)))
    return out


# -- Apple Health ---------------------------------------------------------------------------
APPLE_DTD = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE HealthData [
<!-- HealthKit Export Version: 13 -->
<!ELEMENT HealthData (ExportDate,Me,(Record|Correlation|Workout|ActivitySummary|ClinicalRecord|Audiogram|VisionPrescription)*)>
<!ATTLIST HealthData
  locale CDATA #REQUIRED
>
<!ELEMENT ExportDate EMPTY>
<!ATTLIST ExportDate
  value CDATA #REQUIRED
>
<!ELEMENT Me EMPTY>
<!ATTLIST Me
  HKCharacteristicTypeIdentifierDateOfBirth                   CDATA #REQUIRED
  HKCharacteristicTypeIdentifierBiologicalSex                 CDATA #REQUIRED
  HKCharacteristicTypeIdentifierBloodType                     CDATA #REQUIRED
  HKCharacteristicTypeIdentifierFitzpatrickSkinType           CDATA #REQUIRED
  HKCharacteristicTypeIdentifierCardioFitnessMedicationsUse   CDATA #REQUIRED
>
<!ELEMENT Record ((MetadataEntry|HeartRateVariabilityMetadataList)*)>
<!ATTLIST Record
  type          CDATA #REQUIRED
  unit          CDATA #IMPLIED
  value         CDATA #IMPLIED
  sourceName    CDATA #REQUIRED
  sourceVersion CDATA #IMPLIED
  device        CDATA #IMPLIED
  creationDate  CDATA #IMPLIED
  startDate     CDATA #REQUIRED
  endDate       CDATA #REQUIRED
>
<!ELEMENT Workout ((MetadataEntry|WorkoutEvent|WorkoutRoute|WorkoutStatistics)*)>
<!ATTLIST Workout
  workoutActivityType   CDATA #REQUIRED
  duration              CDATA #IMPLIED
  durationUnit          CDATA #IMPLIED
  totalDistance         CDATA #IMPLIED
  totalDistanceUnit     CDATA #IMPLIED
  totalEnergyBurned     CDATA #IMPLIED
  totalEnergyBurnedUnit CDATA #IMPLIED
  sourceName            CDATA #REQUIRED
  sourceVersion         CDATA #IMPLIED
  device                CDATA #IMPLIED
  creationDate          CDATA #IMPLIED
  startDate             CDATA #REQUIRED
  endDate               CDATA #REQUIRED
>
<!ELEMENT WorkoutStatistics EMPTY>
<!ATTLIST WorkoutStatistics
  type                 CDATA #REQUIRED
  startDate            CDATA #REQUIRED
  endDate              CDATA #REQUIRED
  average              CDATA #IMPLIED
  minimum              CDATA #IMPLIED
  maximum              CDATA #IMPLIED
  sum                  CDATA #IMPLIED
  unit                 CDATA #IMPLIED
>
<!ELEMENT MetadataEntry EMPTY>
<!ATTLIST MetadataEntry
  key   CDATA #REQUIRED
  value CDATA #REQUIRED
>
<!ELEMENT HeartRateVariabilityMetadataList (InstantaneousBeatsPerMinute*)>
<!ELEMENT InstantaneousBeatsPerMinute EMPTY>
<!ATTLIST InstantaneousBeatsPerMinute
  bpm  CDATA #REQUIRED
  time CDATA #REQUIRED
>
]>
"""


class _Apple:
    def __init__(self, rng: random.Random):
        self.rng = rng
        self.lines: list[str] = []

    def record(self, type_: str, source: str, device: str, start: datetime, end: datetime, value: str | None,
               unit: str | None = None, version: str = "11.3", children: str = "") -> None:
        attrs = f' type="{type_}" sourceName={quoteattr(source)} sourceVersion="{version}"'
        attrs += f" device={quoteattr(device.format(n=0x280000000 + self.rng.randrange(1 << 24)))}"
        if unit:
            attrs += f' unit="{unit}"'
        created = end + timedelta(minutes=self.rng.randint(1, 9))
        attrs += f' creationDate="{hk(created)}" startDate="{hk(start)}" endDate="{hk(end)}"'
        if value is not None:
            attrs += f' value="{value}"'
        self.lines.append(f" <Record{attrs}>\n{children} </Record>\n" if children else f" <Record{attrs}/>\n")


def apple_xml(rng: random.Random, nights: list[Night], workouts: list[WorkoutPlan]) -> str:
    a = _Apple(rng)
    by_day = {w.day: w for w in workouts}
    social = {d for d in days() if social_evening(d)}
    for n in nights:
        d = n.day
        last = d == SAMPLE_TODAY
        # sleep: the iPhone's sleep schedule (InBed) and the Watch's stages (iOS 16+)
        in_bed = (n.onset - timedelta(minutes=rng.randint(5, 15)), n.wake + timedelta(minutes=rng.randint(2, 10)))
        a.record("HKCategoryTypeIdentifierSleepAnalysis", PHONE, PHONE_DEVICE, in_bed[0], in_bed[1],
                 "HKCategoryValueSleepAnalysisInBed", version="18.3")
        for stage, s, e in n.stages:
            a.record("HKCategoryTypeIdentifierSleepAnalysis", WATCH, WATCH_DEVICE, s, e,
                     f"HKCategoryValueSleepAnalysis{'Awake' if stage == 'Awake' else 'Asleep' + stage}")
        # HRV (SDNN) during the night and after waking, with a few instantaneous beats
        for k, frac in enumerate((0.3, 0.7)):
            t = n.onset + (n.wake - n.onset) * frac
            v = n.hrv_sdnn + rng.gauss(0, 5) * (1 if k else -1)
            beats = "".join(
                f'   <InstantaneousBeatsPerMinute bpm="{round(60 + rng.gauss(0, 5))}" '
                f'time="{(t + timedelta(seconds=i)).strftime("%H:%M:%S")},{rng.randint(10, 99)}"/>\n'
                for i in range(6)
            )
            a.record("HKQuantityTypeIdentifierHeartRateVariabilitySDNN", WATCH, WATCH_DEVICE, t,
                     t + timedelta(seconds=60), f"{max(12.0, v):.3f}", unit="ms",
                     children=f"  <HeartRateVariabilityMetadataList>\n{beats}  </HeartRateVariabilityMetadataList>\n")
        # heart rate: every 30 min asleep, every 15 min awake, higher in workouts and evenings out
        w = by_day.get(d)
        t = n.onset
        i = nights.index(n)
        stop = nights[i + 1].onset if i + 1 < len(nights) else EXPORTED_AT
        while t < stop:
            asleep = t < n.wake
            if w and w.start <= t < w.end:
                bpm = w.avg_hr + rng.gauss(0, 8)
                ctx = "2"
            elif asleep:
                bpm = n.rhr - 2 + rng.gauss(0, 2.5)
                ctx = "1"
            else:
                bpm = n.rhr + 18 + rng.gauss(0, 7) + (12 if (t.date() in social and t.hour >= 20) else 0)
                ctx = "1" if rng.random() < 0.6 else "0"
            a.record("HKQuantityTypeIdentifierHeartRate", WATCH, WATCH_DEVICE, t, t, f"{round(bpm)}", unit="count/min",
                     children=f'  <MetadataEntry key="HKMetadataKeyHeartRateMotionContext" value="{ctx}"/>\n')
            t += timedelta(minutes=(30 if asleep else 15) + rng.randint(-2, 2))
        if not last:
            a.record("HKQuantityTypeIdentifierRestingHeartRate", WATCH, WATCH_DEVICE, n.wake, at(d, 21.5),
                     f"{n.rhr}", unit="count/min")
        # steps: the iPhone in the pocket, the Watch on the wrist (overlapping; the Watch wins)
        h = (n.wake - at(d, 0)).total_seconds() / 3600 + 0.3
        until = 7.6 if last else (21.5 if not social_evening(d) else 23.5)
        while h < until:
            dur = rng.randint(4, 18)
            s = at(d, h)
            e = s + timedelta(minutes=dur)
            steps = dur * rng.randint(60, 105)
            if rng.random() < 0.85:
                a.record("HKQuantityTypeIdentifierStepCount", WATCH, WATCH_DEVICE, s, e, f"{steps}", unit="count")
            if rng.random() < 0.7:
                a.record("HKQuantityTypeIdentifierStepCount", PHONE, PHONE_DEVICE, s - timedelta(minutes=1),
                         e + timedelta(minutes=2), f"{int(steps * rng.uniform(0.85, 1.05))}", unit="count", version="18.3")
            h += rng.uniform(0.6, 1.6)
        # active energy: hourly from the Watch
        for hour in range(7, 8 if last else 22):
            s = at(d, hour)
            kcal = rng.uniform(12, 35) + (w.kcal if w and w.start.hour == hour else 0)
            a.record("HKQuantityTypeIdentifierActiveEnergyBurned", WATCH, WATCH_DEVICE, s, s + timedelta(hours=1),
                     f"{kcal:.3f}", unit="kcal")
        # mindfulness: a Breathe session most weekday mornings, longer on Sundays
        if (d.weekday() < 5 and rng.random() < 0.45) or d.weekday() == 6:
            s = n.wake + timedelta(minutes=rng.randint(10, 25))
            a.record("HKCategoryTypeIdentifierMindfulSession", WATCH, WATCH_DEVICE, s,
                     s + timedelta(minutes=10 if d.weekday() == 6 else rng.choice((3, 5))), None)
    body = "".join(a.lines)
    body += "".join(apple_workout(rng, w) for w in workouts)
    head = APPLE_DTD + '<HealthData locale="nl_NL">\n'
    head += f' <ExportDate value="{hk(EXPORTED_AT)}"/>\n'
    head += (' <Me HKCharacteristicTypeIdentifierDateOfBirth="1991-05-14" '
             'HKCharacteristicTypeIdentifierBiologicalSex="HKBiologicalSexFemale" '
             'HKCharacteristicTypeIdentifierBloodType="HKBloodTypeNotSet" '
             'HKCharacteristicTypeIdentifierFitzpatrickSkinType="HKFitzpatrickSkinTypeNotSet" '
             'HKCharacteristicTypeIdentifierCardioFitnessMedicationsUse="None"/>\n')
    return head + body + "</HealthData>\n"


def apple_workout(rng: random.Random, w: WorkoutPlan) -> str:
    dur = (w.end - w.start).total_seconds() / 60
    dev = WATCH_DEVICE.format(n=0x280000000 + rng.randrange(1 << 24))
    attrs = (f' workoutActivityType="HKWorkoutActivityType{w.kind}" duration="{dur:.6f}" durationUnit="min"'
             f" sourceName={quoteattr(WATCH)} sourceVersion=\"11.3\" device={quoteattr(dev)}"
             f' creationDate="{hk(w.end + timedelta(minutes=1))}" startDate="{hk(w.start)}" endDate="{hk(w.end)}"')
    inner = ' <MetadataEntry key="HKTimeZone" value="Europe/Amsterdam"/>\n'
    inner += f'  <MetadataEntry key="HKIndoorWorkout" value="{0 if w.kind == "Running" else 1}"/>\n'
    span = f'startDate="{hk(w.start)}" endDate="{hk(w.end)}"'
    inner += f'  <WorkoutStatistics type="HKQuantityTypeIdentifierActiveEnergyBurned" {span} sum="{w.kcal}" unit="kcal"/>\n'
    inner += (f'  <WorkoutStatistics type="HKQuantityTypeIdentifierHeartRate" {span} average="{w.avg_hr}" '
              f'minimum="{w.avg_hr - 30}" maximum="{w.max_hr}" unit="count/min"/>\n')
    if w.distance_km:
        inner += f'  <WorkoutStatistics type="HKQuantityTypeIdentifierDistanceWalkingRunning" {span} sum="{w.distance_km}" unit="km"/>\n'
    return f" <Workout{attrs}>\n {inner} </Workout>\n"


# -- WHOOP ------------------------------------------------------------------------------------
CYCLE_HEADER = (
    "Cycle start time,Cycle end time,Cycle timezone,Recovery score %,Resting heart rate (bpm),"
    "Heart rate variability (ms),Skin temp (celsius),Blood oxygen %,Day Strain,Energy burned (cal),"
    "Max HR (bpm),Average HR (bpm),Sleep onset,Wake onset,Sleep performance %,Respiratory rate (rpm),"
    "Asleep duration (min),In bed duration (min),Light sleep duration (min),Deep (SWS) duration (min),"
    "REM duration (min),Awake duration (min),Sleep need (min),Sleep debt (min),Sleep efficiency %,"
    "Sleep consistency %"
)
SLEEP_HEADER = (
    "Cycle start time,Cycle end time,Cycle timezone,Sleep onset,Wake onset,Sleep performance %,"
    "Respiratory rate (rpm),Asleep duration (min),In bed duration (min),Light sleep duration (min),"
    "Deep (SWS) duration (min),REM duration (min),Awake duration (min),Sleep need (min),"
    "Sleep debt (min),Sleep efficiency %,Sleep consistency %,Nap"
)
WORKOUT_HEADER = (
    "Cycle start time,Cycle end time,Cycle timezone,Workout start time,Workout end time,Duration (min),"
    "Activity name,Activity Strain,Energy burned (cal),Max HR (bpm),Average HR (bpm),HR Zone 1 %,"
    "HR Zone 2 %,HR Zone 3 %,HR Zone 4 %,HR Zone 5 %,GPS enabled,Distance (meters),"
    "Altitude gain (meters),Altitude change (meters)"
)
JOURNAL_HEADER = "Cycle start time,Cycle end time,Cycle timezone,Question text,Answered yes,Notes"
WHOOP_TZ = "UTC+01:00"


def _sleep_numbers(n: Night) -> dict[str, int]:
    mins = {"Core": 0, "Deep": 0, "REM": 0, "Awake": 0}
    for stage, s, e in n.stages:
        mins[stage] += int((e - s).total_seconds() // 60)
    in_bed = int((n.wake - n.onset).total_seconds() // 60)
    asleep = mins["Core"] + mins["Deep"] + mins["REM"]
    return {"in_bed": in_bed, "asleep": asleep, "light": mins["Core"], "deep": mins["Deep"], "rem": mins["REM"],
            "awake": in_bed - asleep}


def whoop_files(rng: random.Random, nights: list[Night], workouts: list[WorkoutPlan]) -> dict[str, str]:
    cycles, sleeps, wos, journal = [CYCLE_HEADER], [SLEEP_HEADER], [WORKOUT_HEADER], [JOURNAL_HEADER]
    by_day = {w.day: w for w in workouts}
    rows_c, rows_s, rows_w, rows_j = [], [], [], []
    for i, n in enumerate(nights):
        start = n.onset
        end = nights[i + 1].onset if i + 1 < len(nights) else None
        sn = _sleep_numbers(n)
        need = 470 + (30 if nights[i - 1].late else 0)
        perf = min(100, round(100 * sn["asleep"] / need))
        eff = round(100 * sn["asleep"] / sn["in_bed"])
        debt = max(0, need - sn["asleep"])
        cons = rng.randint(62, 90) - (15 if n.late else 0)
        resp = round(14.6 + rng.gauss(0, 0.3) + (0.6 if n.late else 0), 1)
        recovery = max(8, min(99, round(30 + (n.hrv_rmssd - 35) * 2.1 + rng.gauss(0, 4))))
        sleep_cols = [wl(n.onset), wl(n.wake), perf, resp, sn["asleep"], sn["in_bed"], sn["light"], sn["deep"],
                      sn["rem"], sn["awake"], need, debt, eff, cons]
        w = by_day.get(n.day)
        if end is not None:
            strain = round(rng.uniform(6.5, 9.5) + (w.strain * 0.55 if w else 0) + (2.5 if social_evening(n.day) else 0), 1)
            energy = round(1850 + strain * 55 + rng.uniform(-60, 60))
            day_cols = [strain, energy, rng.randint(150, 185) if w else rng.randint(118, 140), rng.randint(66, 78)]
        else:
            day_cols = ["", "", "", ""]  # the open cycle: strain and energy are still running
        skin = f"{33.6 + rng.gauss(0, 0.25):.2f}"
        spo2 = f"{96.2 + rng.gauss(0, 0.6):.2f}"
        rows_c.append([wl(start), wl(end) if end else "", WHOOP_TZ, recovery, round(n.rhr + rng.gauss(0, 0.8)),
                       round(n.hrv_rmssd), skin, spo2, *day_cols, *sleep_cols])
        rows_s.append([wl(start), wl(end) if end else "", WHOOP_TZ, *sleep_cols, "false"])
        if n.day.weekday() == 6 and end is not None and rng.random() < 0.6:  # a Sunday afternoon nap
            ns = at(n.day, 15.0 + rng.uniform(0, 0.5))
            nap = rng.randint(20, 35)
            rows_s.append([wl(start), wl(end), WHOOP_TZ, wl(ns), wl(ns + timedelta(minutes=nap + 4)), "", "",
                           nap, nap + 4, nap - 6, 6, 0, 4, "", "", round(100 * nap / (nap + 4)), "", "true"])
        if w is not None:
            dur = int((w.end - w.start).total_seconds() // 60)
            zones = [rng.randint(10, 30) for _ in range(5)]
            total = sum(zones)
            zones = [round(100 * z / total) for z in zones]
            rows_w.append([wl(start), wl(end) if end else "", WHOOP_TZ, wl(w.start), wl(w.end), dur, w.whoop_name,
                           w.strain, round(w.kcal * 1.9), w.max_hr, w.avg_hr, *zones,
                           "true" if w.distance_km else "false",
                           round(w.distance_km * 1000) if w.distance_km else "",
                           rng.randint(20, 60) if w.distance_km else "", rng.randint(-5, 5) if w.distance_km else ""])
        # the journal is answered in the morning about the day before
        prev = n.day - timedelta(days=1)
        qa = [
            ("Have any alcoholic drinks?", social_evening(prev)),
            ("Have any caffeine? ", rng.random() < 0.85),
            ("Read (non-screen) device while in bed?", not n.late and rng.random() < 0.6),
            ("Feeling sick or ill?", False),
        ]
        for q, yes in qa:
            rows_j.append([wl(start), wl(end) if end else "", WHOOP_TZ, q, "true" if yes else "false", ""])
    for target, rows in ((cycles, rows_c), (sleeps, rows_s), (wos, rows_w), (journal, rows_j)):
        for r in reversed(rows):  # the app writes the newest cycle first
            target.append(",".join(_csv(v) for v in r))
    return {
        "physiological_cycles.csv": "\n".join(cycles) + "\n",
        "sleeps.csv": "\n".join(sleeps) + "\n",
        "workouts.csv": "\n".join(wos) + "\n",
        "journal_entries.csv": "\n".join(journal) + "\n",
    }


def _csv(v: object) -> str:
    s = "" if v is None else str(v)
    return f'"{s}"' if ("," in s or '"' in s) else s


# -- calendar --------------------------------------------------------------------------------
VTIMEZONE = """BEGIN:VTIMEZONE
TZID:Europe/Amsterdam
X-LIC-LOCATION:Europe/Amsterdam
BEGIN:DAYLIGHT
TZOFFSETFROM:+0100
TZOFFSETTO:+0200
TZNAME:CEST
DTSTART:19700329T020000
RRULE:FREQ=YEARLY;BYMONTH=3;BYDAY=-1SU
END:DAYLIGHT
BEGIN:STANDARD
TZOFFSETFROM:+0200
TZOFFSETTO:+0100
TZNAME:CET
DTSTART:19701025T030000
RRULE:FREQ=YEARLY;BYMONTH=10;BYDAY=-1SU
END:STANDARD
END:VTIMEZONE"""


def _ics_dt(ts: datetime) -> str:
    return ts.strftime("%Y%m%dT%H%M%S")


def _fold(line: str) -> list[str]:
    """RFC 5545 folding at 75 octets."""
    out, cur = [], b""
    for ch in line:
        b = ch.encode()
        if len(cur) + len(b) > (75 if not out else 74):
            out.append(cur.decode())
            cur = b""
        cur += b
    out.append(cur.decode())
    return [out[0]] + [" " + x for x in out[1:]]


class _Calendar:
    def __init__(self, rng: random.Random):
        self.rng = rng
        self.events: list[list[str]] = []
        self.n = 0

    def add(self, title: str, start: datetime, end: datetime, *, extra: list[str] | None = None,
            uid: str | None = None, attendees: int = 0, location: str = "", status: str = "CONFIRMED",
            description: str = "", transparent: bool = False) -> str:
        self.n += 1
        uid = uid or f"{self.n:04d}{self.rng.randrange(16**8):08x}@rhythm.sample"
        lines = [
            "BEGIN:VEVENT",
            f"DTSTART;TZID=Europe/Amsterdam:{_ics_dt(start)}",
            f"DTEND;TZID=Europe/Amsterdam:{_ics_dt(end)}",
            *(extra or []),
            f"DTSTAMP:{EXPORTED_AT.astimezone(UTC).strftime('%Y%m%dT%H%M%SZ')}",
            f"UID:{uid}",
            f"CREATED:{(start - timedelta(days=9)).astimezone(UTC).strftime('%Y%m%dT%H%M%SZ')}",
            f"DESCRIPTION:{_esc(description)}",
            f"LOCATION:{_esc(location)}",
            "SEQUENCE:0",
            f"STATUS:{status}",
            f"SUMMARY:{_esc(title)}",
            f"TRANSP:{'TRANSPARENT' if transparent else 'OPAQUE'}",
        ]
        lines.append("ORGANIZER;CN=Mara Jansen:mailto:mara.jansen@example.nl")
        for k in range(attendees):
            lines.append(f"ATTENDEE;CN=Colleague {k + 1};PARTSTAT=ACCEPTED:mailto:c{k + 1}@example.nl")
        lines.append("END:VEVENT")
        self.events.append(lines)
        return uid

    def all_day(self, title: str, d: date, days_: int = 1) -> None:
        self.n += 1
        self.events.append([
            "BEGIN:VEVENT",
            f"DTSTART;VALUE=DATE:{d.strftime('%Y%m%d')}",
            f"DTEND;VALUE=DATE:{(d + timedelta(days=days_)).strftime('%Y%m%d')}",
            f"DTSTAMP:{EXPORTED_AT.astimezone(UTC).strftime('%Y%m%dT%H%M%SZ')}",
            f"UID:{self.n:04d}allday@rhythm.sample",
            f"SUMMARY:{_esc(title)}",
            "TRANSP:TRANSPARENT",
            "END:VEVENT",
        ])

    def text(self) -> str:
        head = [
            "BEGIN:VCALENDAR",
            "PRODID:-//Google Inc//Google Calendar 70.9054//EN",
            "VERSION:2.0",
            "CALSCALE:GREGORIAN",
            "METHOD:PUBLISH",
            "X-WR-CALNAME:Mara Jansen",
            "X-WR-TIMEZONE:Europe/Amsterdam",
            *VTIMEZONE.splitlines(),
        ]
        lines = head + [ln for ev in self.events for ln in ev] + ["END:VCALENDAR"]
        return "".join(f + "\r\n" for ln in lines for f in _fold(ln))


def _esc(s: str) -> str:
    return s.replace("\\", "\\\\").replace(";", "\\;").replace(",", "\\,").replace("\n", "\\n")


def calendar_ics(rng: random.Random, workouts: list[WorkoutPlan]) -> str:
    cal = _Calendar(rng)
    last = SAMPLE_TODAY + timedelta(days=7)  # the week ahead is planned too
    until = at(last, 23.99).astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    # Weekly series: the stand-up (one skipped, one moved), the 1:1, the family dinner, Spanish.
    standup = cal.add("Team stand-up", at(SAMPLE_START, 9.5), at(SAMPLE_START, 9.75), attendees=6,
                      location="Teams", extra=[
                          f"RRULE:FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;UNTIL={until}",
                          f"EXDATE;TZID=Europe/Amsterdam:{_ics_dt(at(date(2025, 3, 7), 9.5))}",
                      ])
    moved = date(2025, 3, 12)
    cal.add("Team stand-up", at(moved, 10.25), at(moved, 10.5), uid=standup, attendees=6, location="Teams",
            extra=[f"RECURRENCE-ID;TZID=Europe/Amsterdam:{_ics_dt(at(moved, 9.5))}"])
    wed = SAMPLE_START + timedelta(days=(2 - SAMPLE_START.weekday()) % 7)
    cal.add("1:1 met Sanne", at(wed, 14.0), at(wed, 14.5), attendees=1,
            extra=[f"RRULE:FREQ=WEEKLY;BYDAY=WE;UNTIL={until}"])
    sun = SAMPLE_START + timedelta(days=(6 - SAMPLE_START.weekday()) % 7)
    cal.add("Familie-etentje bij mama en papa", at(sun, 17.5), at(sun, 20.5), location="Amersfoort",
            extra=[f"RRULE:FREQ=WEEKLY;BYDAY=SU;UNTIL={until}"])
    tue = SAMPLE_START + timedelta(days=(1 - SAMPLE_START.weekday()) % 7)
    cal.add("Clase de español (B1)", at(tue, 19.0), at(tue, 20.0), location="Instituto Cervantes",
            extra=[f"RRULE:FREQ=WEEKLY;BYDAY=TU;UNTIL={until}"])
    gym = {w.day: w for w in workouts}
    afternoon_meetings = [
        ("Sprint review", 4), ("Roadmap sync with design", 3), ("Kundengespräch Müller GmbH", 2),
        ("Réunion fournisseurs", 3), ("Stakeholder update", 5), ("Hiring interview – backend", 2),
        ("Budget review Q2", 3), ("Retro", 6),
    ]
    admin = ["Expenses & invoices", "Inbox zero", "Belastingaangifte voorbereiden", "Plan next sprint tickets"]
    learn = ["Online course: Bayesian statistics", "Read: Thinking in Systems", "Workshop: SQL for PMs"]
    d = SAMPLE_START
    while d <= last:
        wd = d.weekday()
        launch = in_launch(d)
        if wd < 5:
            if wd in (1, 3) or (wd == 0 and rng.random() < 0.5):
                cal.add("Focus: roadmap & specs" if wd != 3 else "Deep work – launch plan", at(d, 8.25), at(d, 11.5),
                        description="Niet storen / do not disturb")
            n_meet = rng.randint(2, 3) + (2 if launch else 0)
            slots = sorted(rng.sample([13.0, 13.5, 14.5, 15.0, 15.5, 16.0, 16.5, 17.0], n_meet))
            for h in slots:
                if wd == 2 and 14.0 <= h < 14.5:
                    continue
                title, people = rng.choice(afternoon_meetings)
                cal.add(title if not launch else f"{title} (launch)", at(d, h), at(d, h + 0.5), attendees=people,
                        location=rng.choice(["Teams", "Zaal Dom", "Zaal Oudegracht"]))
            if rng.random() < 0.5:
                cal.add(rng.choice(admin), at(d, 17.0 if not launch else 17.5), at(d, 17.75 if not launch else 18.25))
            if wd == 3 and not launch and rng.random() < 0.7:
                cal.add(rng.choice(learn), at(d, 19.5), at(d, 20.75))
            if wd == 0 and rng.random() < 0.6:
                cal.add("Meditatie (Headspace)", at(d, 21.0), at(d, 21.25))
            if wd == 2 and rng.random() < 0.5:
                cal.add("Movie night 🍿 Netflix", at(d, 20.5), at(d, 22.5))
        if d in gym and gym[d].kind == "TraditionalStrengthTraining":
            cal.add("Gym – kracht (benen/rug)" if wd != 4 else "Gym – upper body", at(d, 7.0), at(d, 8.0),
                    location="Basic-Fit Utrecht")
        if d in gym and gym[d].kind == "Yoga":
            cal.add("Yoga class", at(d, 10.5), at(d, 11.5), location="Studio Lotus")
        if wd == 6:
            cal.add("Hardlopen 10k langs de Vecht", at(d, 10.0), at(d, 11.0))
        if wd == 4 and d != date(2025, 3, 14):
            cal.add(rng.choice(["Borrel met vrienden 🍻", "Vrijmibo borrel", "Drinks with the climbing crew"]),
                    at(d, 18.0), at(d, 22.5), location="Café De Zaak")
        if wd == 5:
            cal.add(rng.choice(["Brunch with Lena", "Koffie met Noor"]), at(d, 12.0), at(d, 13.5))
            cal.add(rng.choice(["Cena con amigos", "Dinner party at Joris' 🎂", "Abendessen mit Freunden",
                                "Dîner chez Camille"]), at(d, 19.0), at(d, 23.5))
        if wd == 6 and rng.random() < 0.5:
            cal.add("Me time: lezen op de bank", at(d, 14.0), at(d, 16.0))
        d += timedelta(days=1)
    cal.all_day("Mama jarig 🎉", date(2025, 3, 2))
    cal.all_day("Product launch week", LAUNCH_WEEK[0], 5)
    cal.add("Tandarts", at(date(2025, 3, 4), 8.0), at(date(2025, 3, 4), 8.5), location="Tandartspraktijk Lombok")
    cal.add("Team offsite dinner", at(date(2025, 3, 14), 18.5), at(date(2025, 3, 14), 21.0), attendees=8,
            status="CANCELLED", description="Moved to after the launch")
    return cal.text()


# -- writing ---------------------------------------------------------------------------------
def _zip(members: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for name, text in members.items():
            info = zipfile.ZipInfo(name, date_time=(2025, 3, 26, 7, 45, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, text.encode("utf-8"), compresslevel=9)
    return buf.getvalue()


def build() -> dict[str, bytes]:
    """The sample files' bytes, by file name."""
    rng = random.Random(SEED)
    nights = build_nights(rng)
    workouts = build_workouts(rng)
    apple = apple_xml(random.Random(SEED + 1), nights, workouts)
    whoop = whoop_files(random.Random(SEED + 2), nights, workouts)
    ics = calendar_ics(random.Random(SEED + 3), workouts)
    return {
        "apple_health_export.zip": _zip({"apple_health_export/export.xml": apple}),
        "whoop_export.zip": _zip({f"my_whoop_data_2025_03_26/{k}": v for k, v in whoop.items()}),
        "calendar.ics": ics.encode("utf-8"),
    }


def write(out: Path = OUT) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, data in build().items():
        p = out / name
        p.write_bytes(data)
        written.append(p)
    return written


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    for p in write(Path(args[0]) if args else OUT):
        sys.stdout.write(f"{p}  {p.stat().st_size / 1024:.0f} KiB\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
