"""People of varied kinds for judging real-day plans: office workers, rotating shift workers,
night-shift nurses, parents, students and retirees, with calendars in English, Spanish, German
or French, in zones whose DST change falls inside the planned days. Seeded; nothing is
copied from a real person.

``shift_person(seed, kind=None, lang=None, plan_days=14)`` gives a ``ShiftPerson``: the
records (a WHOOP-like or Garmin-like wearable: every sleep with its own wake-up day, HRV,
resting heart rate, steps on Garmin, workouts; a calendar with shifts, meetings, classes,
family and social events, a weekly meditation class, transparent "maybe gym?" holds), the
days to plan and the truth of each day (when the person slept, by the generator). A night
worker sleeps soon after a night shift ends (in the morning, for 5 to 7 hours), some take an
afternoon sleep before the first night of a run, and the day after the last night is a
transition day (a short morning sleep, an early night), as shift-work sleep guidance
describes it; a rotating worker changes between early, late and night weeks.

Every record goes through the product's own path (``storage.writer.write_records``,
``rhythm map``); the benchmark (``benchmarks/plan_quality.py``) and the tests read the plans
back as ``rhythm recommend`` stores them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np

from common.records import Event, Sample, SleepSession, Workout

KINDS = ("office", "rotating", "night_nurse", "parent", "student", "retiree")
LANGS = ("en", "es", "de", "fr")
# zones with the day their clocks change in spring 2025 (Sydney: autumn, back an hour)
ZONES = {
    "America/New_York": date(2025, 3, 9),
    "America/Chicago": date(2025, 3, 9),
    "Europe/Berlin": date(2025, 3, 30),
    "Europe/Madrid": date(2025, 3, 30),
    "Europe/Paris": date(2025, 3, 30),
    "Australia/Sydney": date(2025, 4, 6),
}
LANG_ZONES = {"en": ("America/New_York", "America/Chicago", "Australia/Sydney"), "es": ("Europe/Madrid", "America/New_York"),
              "de": ("Europe/Berlin",), "fr": ("Europe/Paris",)}
HISTORY_DAYS = 35  # before the first planned day

TITLES: dict[str, dict[str, tuple[str, ...]]] = {
    "en": {
        "night": ("Night shift", "Night shift - ward 4", "On call (night)"),
        "day": ("Day shift", "Day shift - ward 4"), "early": ("Early shift",), "late": ("Late shift",),
        "meeting": ("Team meeting", "Standup", "Client call", "1:1 with Alex"), "focus": ("Focus time", "Write report"),
        "lecture": ("Lecture: statistics", "Seminar: history"), "family": ("Kids' football", "Family lunch"),
        "social": ("Dinner with friends", "Drinks with Sam"), "exercise": ("Gym", "Swimming"),
        "meditate": ("Meditation class",), "hold": ("maybe gym?",), "volunteer": ("Book club",),
    },
    "es": {
        "night": ("Turno de noche", "Guardia"), "day": ("Turno de día",), "early": ("Turno de mañana",),
        "late": ("Turno de tarde",), "meeting": ("Reunión de equipo", "Llamada con cliente"),
        "focus": ("Tiempo de concentración", "Redactar informe"), "lecture": ("Clase de estadística",),
        "family": ("Fútbol de los niños", "Comida familiar"), "social": ("Cena con amigos",),
        "exercise": ("Gimnasio", "Natación"), "meditate": ("Meditación",), "hold": ("¿gimnasio?",),
        "volunteer": ("Club de lectura",),
    },
    "de": {
        "night": ("Nachtdienst", "Nachtschicht"), "day": ("Tagdienst", "Frühdienst"), "early": ("Frühschicht",),
        "late": ("Spätschicht",), "meeting": ("Teambesprechung", "Kundengespräch", "Jour fixe"),
        "focus": ("Fokuszeit", "Bericht schreiben"), "lecture": ("Vorlesung Statistik",),
        "family": ("Fußballtraining Kinder", "Familienessen"), "social": ("Abendessen mit Freunden",),
        "exercise": ("Fitnessstudio", "Schwimmen"), "meditate": ("Meditation",), "hold": ("vielleicht Yoga?",),
        "volunteer": ("Lesekreis",),
    },
    "fr": {
        "night": ("Garde de nuit", "Poste de nuit"), "day": ("Poste de jour",), "early": ("Poste du matin",),
        "late": ("Poste du soir",), "meeting": ("Réunion d'équipe", "Appel client"),
        "focus": ("Temps de concentration", "Rédiger le rapport"), "lecture": ("Cours de statistiques",),
        "family": ("Foot des enfants", "Déjeuner en famille"), "social": ("Dîner avec des amis",),
        "exercise": ("Salle de sport", "Piscine"), "meditate": ("Méditation",), "hold": ("peut-être piscine ?",),
        "volunteer": ("Club de lecture",),
    },
}


@dataclass(frozen=True)
class Shift:
    kind: str  # night | day | early | late
    start_h: float  # local hours from the day's midnight
    hours: float


@dataclass
class ShiftPerson:
    name: str
    kind: str
    lang: str
    zone: str
    plan_days: list[date]
    records: list[Any]
    shifts: dict[date, Shift] = field(default_factory=dict)  # by the day the shift starts
    sleeps: list[tuple[datetime, datetime]] = field(default_factory=list)  # the truth

    @property
    def last(self) -> date:
        return self.plan_days[-1]


def _rota(kind: str, rng: np.random.Generator, days: list[date]) -> dict[date, Shift]:
    out: dict[date, Shift] = {}
    if kind == "night_nurse":
        # runs of 2-4 nights (19:00 or 20:00, 12-13 h), 2-4 days off, now and then a day shift
        i = int(rng.integers(0, 3))
        start = float(rng.choice([19.0, 20.0]))
        hours = float(rng.choice([12.0, 13.0]))
        while i < len(days):
            for _ in range(int(rng.integers(2, 5))):
                if i < len(days):
                    out[days[i]] = Shift("night", start, hours)
                i += 1
            i += int(rng.integers(2, 5))
            if i < len(days) and rng.random() < 0.25:
                out[days[i]] = Shift("day", 7.0, 12.0)
                i += 2
    elif kind == "rotating":
        # weeks of early (06-14), late (14-22) and night (22-06) shifts, five days on, two off
        order = ["early", "late", "night"]
        k = int(rng.integers(0, 3))
        for j, d in enumerate(days):
            week = (j // 7 + k) % 3
            if j % 7 >= 5:
                continue
            name = order[week]
            start = {"early": 6.0, "late": 14.0, "night": 22.0}[name]
            out[d] = Shift(name, start, 8.0)
    return out


def shift_person(seed: int, kind: str | None = None, lang: str | None = None, plan_days: int = 14) -> ShiftPerson:
    """One person (module docstring), drawn from ``seed``; ``kind`` and ``lang`` by seed
    unless given."""
    rng = np.random.default_rng([int(seed), 0x534846])
    kind = kind or KINDS[int(seed) % len(KINDS)]
    lang = lang or LANGS[(int(seed) // len(KINDS)) % len(LANGS)]
    zone = str(rng.choice(LANG_ZONES[lang]))
    tz = ZoneInfo(zone)
    dst = ZONES[zone]
    first_plan = dst - timedelta(days=int(rng.integers(3, 8)))
    first = first_plan - timedelta(days=HISTORY_DAYS)
    days = [first + timedelta(days=i) for i in range(HISTORY_DAYS + plan_days)]
    name = f"{kind}-{lang}-{seed}"
    device = str(rng.choice(["whoop", "garmin"]))
    need_h = float(np.clip(rng.normal(7.4, 0.5), 6.3, 8.6))
    bed_h = {"office": 23.0, "parent": 22.5, "student": 24.5, "retiree": 22.3}.get(kind, 23.0) + rng.normal(0, 0.4)
    weekend_late = rng.uniform(0.3, 1.2)
    hrv0, rhr0 = float(np.clip(rng.normal(48, 12), 20, 100)), float(np.clip(rng.normal(58, 5), 44, 75))
    p_workout = rng.uniform(0.1, 0.5)
    pre_nap = rng.random() < 0.5  # sleeps in the afternoon before the first night of a run
    after_lag = float(rng.uniform(0.4, 1.2))  # hours from the end of a night shift to sleep
    after_h = float(rng.uniform(5.2, 7.0))
    shifts = _rota(kind, rng, days)
    recs: list[Any] = []
    sleeps: list[tuple[datetime, datetime]] = []
    titles = TITLES[lang]

    def at(d: date, hours: float) -> datetime:
        """Wall-clock hours from the day's midnight, in the zone (DST-safe: a wall time)."""
        d2 = d + timedelta(days=int(hours // 24))
        h = hours % 24
        return datetime.combine(d2, time(int(h), int(round((h % 1) * 60)) % 60), tzinfo=tz)

    def sleep(start: datetime, end: datetime, k: str) -> None:
        if end <= start:
            return
        utc_min = (end.timestamp() - start.timestamp()) / 60.0
        asleep = utc_min * float(rng.uniform(0.86, 0.94))
        wake_day = end.astimezone(tz).date()
        tzo = int(end.utcoffset().total_seconds() // 60)
        recs.append(SleepSession(device, f"{name}-s{len(sleeps)}", start, end, wake_day, sleep_min=asleep,
                                 in_bed_min=utc_min, awake_min=utc_min - asleep, deep_min=asleep * 0.18,
                                 rem_min=asleep * 0.22, light_min=asleep * 0.6,
                                 efficiency_pct=100 * asleep / utc_min, is_nap=False, tz_offset_min=tzo))
        sleeps.append((start, end))
        if k == "main":
            strain = 0.85 if utc_min < 300 else 1.0
            hrv = max(12.0, hrv0 * strain + rng.normal(0, hrv0 * 0.12))
            metric = "hrv_rmssd"
            w = end + timedelta(minutes=10)
            recs.append(Sample(device, metric, w, w, hrv, "ms", wake_day, tz_offset_min=tzo))
            recs.append(Sample(device, "resting_heart_rate", w, w, rhr0 + rng.normal(0, 2.0) + (3 if strain < 1 else 0),
                               "bpm", wake_day, tz_offset_min=tzo))
            if device == "whoop":
                recs.append(Sample(device, "recovery", w, w, float(np.clip(50 + (hrv - hrv0) / hrv0 * 120, 1, 99)),
                                   "pct", wake_day, tz_offset_min=tzo))

    def event(d: date, key: str, h0: float, hours: float, what: str, **kw: Any) -> None:
        s = at(d, h0)
        # elapsed hours (a 13-hour night across the DST change is 13 hours)
        e = datetime.fromtimestamp(s.timestamp() + hours * 3600, tz)
        recs.append(Event("calendar", "primary", f"{name}-{d.isoformat()}-{key}", s, e, False, d,
                          title=str(rng.choice(titles[what])), timezone=zone, **kw))

    # sleep: walk the days; each day decides the sleep that ends on the next morning (or the
    # day sleep after a night shift)
    for d in days:
        weekend = d.weekday() >= 5
        sh = shifts.get(d)
        prev = shifts.get(d - timedelta(days=1))
        nxt = shifts.get(d + timedelta(days=1))
        if sh is not None:
            event(d, "shift", sh.start_h, sh.hours, sh.kind)
        # the day sleep after last night's shift
        if prev is not None and prev.kind == "night":
            end = datetime.fromtimestamp(at(d - timedelta(days=1), prev.start_h).timestamp() + prev.hours * 3600, tz)
            s0 = end + timedelta(hours=after_lag + rng.normal(0, 0.15))
            last_of_run = sh is None or sh.kind != "night"
            dur = (after_h * (0.65 if last_of_run else 1.0)) + rng.normal(0, 0.3)
            sleep(s0, s0 + timedelta(hours=dur), "main")
        # tonight
        if sh is not None and sh.kind == "night":
            if pre_nap and (prev is None or prev.kind != "night"):
                nap_end = at(d, sh.start_h - float(rng.uniform(1.5, 2.0)))
                sleep(nap_end - timedelta(hours=float(rng.uniform(1.5, 2.5))), nap_end, "nap")
            continue  # awake all night
        # a night's sleep: before an early start, wake in time; after the last night of a run,
        # an early night; weekends later
        b = bed_h + (weekend_late if weekend and kind in ("office", "student", "parent") else 0.0)
        if prev is not None and prev.kind == "night":
            b = min(b, 22.0)  # the transition day: an early night
        wake_need = None
        if nxt is not None and nxt.kind in ("early", "day"):
            wake_need = nxt.start_h - 1.0 + 24
        elif kind in ("office", "parent") and not (d + timedelta(days=1)).weekday() >= 5:
            wake_need = 7.0 + 24 + rng.normal(0, 0.2)
        elif kind == "student" and (d + timedelta(days=1)).weekday() < 5:
            wake_need = 8.3 + 24
        if sh is not None and sh.kind == "late":
            b = max(b, sh.start_h + sh.hours + 1.0)
        dur = need_h + rng.normal(0, 0.4)
        wake = b + dur
        if wake_need is not None and wake > wake_need:
            wake = wake_need
            b = min(b, wake - max(5.5, dur - 1.0))
        if rng.random() < 0.03:
            continue  # the strap on the charger
        sleep(at(d, b + rng.normal(0, 0.2)), at(d, wake), "main")

    # the rest of the calendar and the workouts
    for d in days:
        weekend = d.weekday() >= 5
        sh = shifts.get(d)
        busy_day = sh is not None
        if kind in ("office", "parent") and not weekend:
            for k, h0 in enumerate(sorted(rng.choice([9.0, 10.0, 11.0, 13.5, 14.5, 15.5, 16.0],
                                                     size=int(rng.integers(1, 4)), replace=False))):
                event(d, f"m{k}", float(h0), float(rng.choice([0.5, 1.0])), "meeting", attendees_count=4)
            if rng.random() < 0.4:
                event(d, "focus", 9.0 if rng.random() < 0.5 else 13.0, 0.5 * float(rng.integers(1, 3)), "focus")
        if kind == "student" and not weekend:
            event(d, "lec", float(rng.choice([9.0, 11.0, 14.0])), 1.5, "lecture")
        if kind == "parent" and (d.weekday() in (2, 5)):
            event(d, "kids", 17.0 if d.weekday() == 2 else 10.0, 1.5, "family")
        if kind == "retiree" and d.weekday() == 3:
            event(d, "club", 15.0, 1.5, "volunteer")
        if d.weekday() == (seed % 5) and not (busy_day and sh.kind in ("late", "night")):
            event(d, "med", 18.5 if not busy_day else 19.5, 1.0, "meditate")  # the weekly class
        if weekend and rng.random() < 0.5 and not busy_day:
            event(d, "soc", float(rng.choice([12.0, 19.0])), 2.0, "social", attendees_count=3)
        if rng.random() < 0.2:  # a hold that is not a plan: transparent, never done
            event(d, "hold", 7.5 if not busy_day else 12.5, 1.0, "hold", transparency="transparent")
        if rng.random() < p_workout and not busy_day:
            h0 = float(rng.choice([7.5, 12.5, 17.5]))
            s = at(d, h0)
            dur = float(rng.choice([30, 45, 60]))
            if not any(a < s + timedelta(minutes=dur) and s < b for a, b in sleeps):
                recs.append(Workout(device, f"{name}-w{d.isoformat()}", s, s + timedelta(minutes=dur), d,
                                    str(rng.choice(["running", "strength_training", "cycling"])), duration_min=dur,
                                    tz_offset_min=int(s.utcoffset().total_seconds() // 60)))
        if device == "garmin":
            for h in range(8, 21):
                t0 = at(d, h)
                if any(a <= t0 < b for a, b in sleeps):
                    continue
                recs.append(Sample(device, "steps", t0, t0 + timedelta(hours=1), float(max(0.0, rng.normal(450, 250))),
                                   "count", d, tz_offset_min=int(t0.utcoffset().total_seconds() // 60)))
    plan = days[HISTORY_DAYS:]
    return ShiftPerson(name, kind, lang, zone, plan, recs, shifts, sleeps)


def people(n: int, start: int = 0, plan_days: int = 14) -> list[ShiftPerson]:
    """``n`` people: the six kinds in turn, the four languages in turn across them."""
    return [shift_person(s, plan_days=plan_days) for s in range(start, start + n)]
