"""A person's own labels, and labels learned from what their devices saw. Pure.

Storage keeps the labels (``storage/labels.py``, table ``labels``, in the person's database:
an upgrade of the package never touches them); this module decides, for one event, whether a
label applies. It runs BEFORE the keyword table (``mapping/actions.py`` stays the table):

1. **exact title**: the title as the classifier reads it (lower case, no accents, words only:
   "Chaostreff!" and "chaostreff" are one title); a pattern with ``*`` matches titles as a
   glob on that form ("chaos*" matches "Chaostreff Lightning Talks");
2. **the same recurring series**: an event whose recurring id (``events.recurring_event_id``:
   Google's recurringEventId, an ICS series UID) is that of an event the label names by its
   exact title: a renamed or moved occurrence keeps its series' label;
3. **the distinctive words**: every distinctive word of the label's title is in the event's
   title ("Chaostreff" labels "Chaostreff: Lightning talks"). A word is distinctive when it
   has at least ``DISTINCTIVE_MIN_LETTERS`` letters, is not a number, is not in the stop list
   (``data/labels.toml``: small words in the classifier's languages) and is no keyword of the
   table (its words say what any title says: "meeting", "club", "training"). A label whose
   title has no distinctive word applies by 1 and 2 only.

A person's label (origin ``you``) always wins: over the table, over a learned label, at
every step. A learned label (origin ``learned``) applies only where the table says nothing
or little (no keyword, a weak keyword, the description or the attendee count decided).

**Learned labels.** ``learn(facts)`` looks at every timed event whose title the table leaves
unlabelled or weakly labelled, grouped by exact title, and at what the devices recorded during
each occurrence: a workout covering ``COINCIDE_SHARE`` of it (-> EXERCISE), sleep covering
``COINCIDE_SHARE`` of it (-> SLEEP), or ``STEPS_PER_HOUR`` steps per hour (-> EXERCISE).
Only occurrences on days a wearable recorded anything count. A title is *proposed* from
``SUGGEST_MIN_OCCURRENCES`` occurrences with ``SUGGEST_MIN_SHARE`` of them coinciding, and
*applied* from ``APPLY_MIN_OCCURRENCES`` with ``APPLY_MIN_SHARE`` (workouts and sleep only:
many steps alone may be a walking meeting, so a steps label is only proposed until the person
confirms it with their own label). Each carries its evidence
("Chaostreff: 4 of 4 times a workout overlapped").
"""

from __future__ import annotations

import fnmatch
import tomllib
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources

from common.errors import ConfigError
from common.records import ACTIONS
from common.rows import EventFacts, LabelRow
from mapping.actions import (
    LABELS,
    Classification,
    KeywordRules,
    classify_event,
    keyword_rules,
    normalize,
    tokens,
)

YOU = "you"
LEARNED = "learned"
ORIGINS = (YOU, LEARNED)
SOURCE_NAMES = {"label": "your label", "learned": "learned from your devices"}

# the thresholds of learned labels (see the module docstring)
APPLY_MIN_OCCURRENCES = 3
APPLY_MIN_SHARE = 0.8
SUGGEST_MIN_OCCURRENCES = 2
SUGGEST_MIN_SHARE = 0.5
COINCIDE_SHARE = 0.5  # of the event's minutes covered by a workout (or sleep)
STEPS_PER_HOUR = 4000.0  # steps per hour of the event: a walk or a run
EVENT_MIN_MINUTES = 15.0  # shorter or longer events say nothing about what happened
EVENT_MAX_MINUTES = 360.0
LABEL_CONFIDENCE = 1.0  # a person's label
LEARNED_CONFIDENCE = 0.8
DISTINCTIVE_MIN_LETTERS = 4


class LabelError(ConfigError):
    """A label that cannot be stored: a bad action or an empty pattern."""


Label = LabelRow  # key, pattern, action, origin, evidence, applied (common/rows.py)


def new_label(pattern: str, action: str, origin: str = YOU, evidence: str | None = None,
              applied: bool = True) -> Label:
    """A label with its key, its action checked (LabelError, one line, when it is not one of
    the ten actions or NONE)."""
    return Label(label_key(pattern), str(pattern).strip(), check_action(action), origin, evidence, applied)


def is_pattern(label: Label) -> bool:
    return "*" in label.key


def check_action(action: str) -> str:
    """The action named in upper case, or LabelError (one line) for anything else."""
    a = (action or "").strip().upper().replace("-", "_").replace(" ", "_")
    if a not in LABELS:
        raise LabelError(f"unknown action {action!r}: use one of {', '.join(LABELS)} (NONE = not an action)")
    return a


def label_key(pattern: str) -> str:
    """A title or pattern in the form titles are compared in: normalised words, ``*`` kept."""
    parts = [" ".join(tokens(p)) for p in str(pattern).split("*")]
    key = "*".join(parts).strip()
    if not key.strip("* "):
        raise LabelError(f"empty label pattern {pattern!r}: give a title or a pattern such as 'chaos*'")
    return key


@cache
def stop_words() -> frozenset[str]:
    text = resources.files("mapping").joinpath("data/labels.toml").read_text(encoding="utf-8")
    doc = tomllib.loads(text)
    return frozenset(w for ws in doc["stop_words"].values() for w in ws)


def distinctive_words(title: str | None, rules: KeywordRules | None = None) -> frozenset[str]:
    """The words of a title that say which title it is (see the module docstring)."""
    rules = rules or keyword_rules()
    generic = set(rules.words) | {w for ks in rules.phrases.values() for k in ks for w in k.words}
    stop = stop_words()
    return frozenset(
        w for w in tokens(title)
        if len(w) >= DISTINCTIVE_MIN_LETTERS and not w.isdigit() and w not in stop and w not in generic
    )


@dataclass(frozen=True)
class LabelBook:
    """The labels that apply, indexed: by exact title, by series, by pattern, by words."""

    exact: Mapping[str, Label]
    patterns: tuple[Label, ...]
    series: Mapping[str, Label]
    words: tuple[tuple[frozenset[str], Label], ...]

    @classmethod
    def build(cls, labels: Iterable[Label], events: Iterable[tuple[str | None, str | None]] = ()) -> LabelBook:
        """``labels`` (the person's and the applied learned ones) and the stored events'
        (title, recurring id) pairs, to find each label's series."""
        ranked = sorted((lab for lab in labels if lab.applied), key=lambda lab: ORIGINS.index(lab.origin))
        exact: dict[str, Label] = {}
        patterns: list[Label] = []
        words: list[tuple[frozenset[str], Label]] = []
        rules = keyword_rules()
        for lab in ranked:
            if is_pattern(lab):
                patterns.append(lab)
                continue
            exact.setdefault(lab.key, lab)
            dw = distinctive_words(lab.pattern, rules)
            if dw:
                words.append((dw, lab))
        series: dict[str, Label] = {}
        for title, sid in events:
            if sid:
                lab = exact.get(normalize(title))
                if lab is not None and (sid not in series or ORIGINS.index(lab.origin) < ORIGINS.index(series[sid].origin)):
                    series[sid] = lab
        return cls(exact, tuple(patterns), series, tuple(words))

    def find(self, title: str | None, series_id: str | None = None) -> tuple[Label, str] | None:
        """The label for an event and how it applies ("exact", "pattern", "series", "words");
        the person's labels before learned ones at every step."""
        key = normalize(title)
        toks = set(key.split())
        for origin in ORIGINS:
            lab = self.exact.get(key)
            if lab is not None and lab.origin == origin:
                return lab, "exact"
            for lab in self.patterns:
                if lab.origin == origin and fnmatch.fnmatchcase(key, lab.key):
                    return lab, "pattern"
            lab = self.series.get(series_id) if series_id else None
            if lab is not None and lab.origin == origin:
                return lab, "series"
            for dw, lab in self.words:
                if lab.origin == origin and dw <= toks:
                    return lab, "words"
        return None


def weakly_labelled(c: Classification) -> bool:
    """The table said nothing or little: no keyword, a weak one, the description, attendees."""
    return c.method in ("none", "description", "attendees") or c.tier == "weak"


def classify_with_labels(
    title: str | None,
    description: str | None = None,
    attendees: int | None = None,
    event_type: str | None = None,
    series_id: str | None = None,
    book: LabelBook | None = None,
) -> Classification:
    """The person's label, else a learned label where the table is weak, else the table."""
    base = classify_event(title, description, attendees, event_type)
    hit = book.find(title, series_id) if book is not None else None
    if hit is None:
        return base
    lab, how = hit
    if lab.origin == LEARNED and not weakly_labelled(base):
        return base
    action = lab.action if lab.action in ACTIONS else None
    method, conf = ("label", LABEL_CONFIDENCE) if lab.origin == YOU else ("learned", LEARNED_CONFIDENCE)
    return Classification(action, conf, method, lab.action, (lab.pattern,), how)


def source_name(method: str | None) -> str:
    """Where an event's action came from, in words: "your label", "learned from your devices",
    "keywords" (the table, the eventType, the description or the attendees)."""
    return SOURCE_NAMES.get(method or "", "keywords")


# --- learned labels ----------------------------------------------------------------------------


SIGNALS = (  # signal, action, words for the evidence, applied on its own (else only proposed)
    ("workout", "EXERCISE", "a workout overlapped", True),
    ("sleep", "SLEEP", "you were asleep", True),
    # many steps alone are a walk, a run, or a walking meeting: proposed, never applied alone
    ("steps", "EXERCISE", f"you walked or ran ({STEPS_PER_HOUR:.0f}+ steps an hour)", False),
)


def coincides(f: EventFacts) -> dict[str, bool]:
    return {
        "workout": f.workout_min >= COINCIDE_SHARE * f.minutes,
        "sleep": f.sleep_min >= COINCIDE_SHARE * f.minutes,
        "steps": f.steps is not None and f.steps >= STEPS_PER_HOUR * f.minutes / 60.0,
    }


def learn(facts: Iterable[EventFacts], skip: Iterable[str] = ()) -> list[Label]:
    """Proposed and applied labels from behaviour, strongest first (see the module docstring).
    ``skip``: title keys the person labelled (their label wins; nothing is learned there)."""
    skipped = set(skip)
    groups: dict[str, list[EventFacts]] = defaultdict(list)
    shown: dict[str, str] = {}
    for f in facts:
        key = normalize(f.title)
        if not key or key in skipped or not f.wearable_day:
            continue
        if not EVENT_MIN_MINUTES <= f.minutes <= EVENT_MAX_MINUTES:
            continue
        if not weakly_labelled(classify_event(f.title, f.description, f.attendees, f.event_type)):
            continue
        groups[key].append(f)
        shown.setdefault(key, str(f.title).strip())
    out: list[tuple[float, int, Label]] = []
    for key, fs in groups.items():
        n = len(fs)
        if n < SUGGEST_MIN_OCCURRENCES:
            continue
        hits = {sig[0]: sum(coincides(f)[sig[0]] for f in fs) for sig in SIGNALS}
        name, action, words, alone = max(SIGNALS, key=lambda s: (hits[s[0]], s[3]))
        k = hits[name]
        share = k / n
        if share < SUGGEST_MIN_SHARE:
            continue
        applied = alone and n >= APPLY_MIN_OCCURRENCES and share >= APPLY_MIN_SHARE
        evidence = f"{shown[key]}: {k} of {n} times {words}"
        out.append((share, n, new_label(shown[key], action, LEARNED, evidence, applied)))
    out.sort(key=lambda t: (-t[0], -t[1], t[2].key))
    return [lab for _, _, lab in out]


def unlabelled_titles(titles: Sequence[tuple[str | None, str | None]], book: LabelBook | None) -> list[str]:
    """Of (title, recurring id) pairs, the distinct titles neither a label nor the table names."""
    seen: dict[str, str] = {}
    for title, sid in titles:
        key = normalize(title)
        if not key or key in seen:
            continue
        c = classify_with_labels(title, series_id=sid, book=book)
        if c.label is None:
            seen[key] = str(title).strip()
    return list(seen.values())
