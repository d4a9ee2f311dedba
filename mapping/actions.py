"""What the person did: calendar events and wearable sessions -> one of the ten actions. Pure.

Event classification. Titles and descriptions are untrusted text: they are only ever input
to the rules below (never SQL text, never a prompt, never evaluated).

``classify_event(title, description, attendees, event_type)`` applies the data in
mapping/data/keywords.toml (its header is the full specification):

1. a Google ``eventType`` with a class (focusTime -> DEEP_WORK; outOfOffice, workingLocation,
   birthday -> NONE) decides;
2. the title's *strong* keywords: the first class (or group of a class) in ``strong_order``
   that matched;
3. else its *weak* keywords, in ``weak_order``;
4. else the description, by its phrases only (keywords of two or more words): a description
   never overrides a title that matched anything, and one word in it ("fokus",
   "programmieren") never decides;
5. else an event with enough attendees is a meeting (ADMIN_WORK, low confidence);
6. else nothing (``label`` None, action None): unknown words give no action.

``NONE`` is a class of its own: holidays, birthdays (someone's, as a reminder), reminders,
placeholders ("test6", "TBD", "Busy"), appointments, travel, vacation, chores and a meal with
no one named are recognised as not being one of the ten actions and get no action, on
purpose, instead of a low-confidence guess.

Matching is word-based on lower-cased text without accents (ß -> ss), with endings,
prefixes, suffixes, phrases (the longest wins and uses up its words) and two-part German
compounds ("Chorprobe", "Fußballtraining", "Teammeeting", "Schwimmverein" from schwimmen);
see keywords.toml.

``slot_action`` decides one action per slot with the precedence of rules.toml
[slot_actions]: sleep > workout > mindful session > the dominant classified calendar events >
nothing.
"""

from __future__ import annotations

import re
import tomllib
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache, lru_cache
from importlib import resources
from typing import Any

from common.records import ACTIONS
from mapping.rules import SlotActionRules, default_rules

NONE = "NONE"  # recognised as not one of the ten actions: no action, on purpose
LABELS: tuple[str, ...] = (*ACTIONS, NONE)
METHODS = ("event_type", "title", "description", "attendees", "none", "label", "learned")  # label, learned: mapping/labels.py
SLOT_MINUTES = (360.0, 360.0, 300.0, 420.0)  # morning 06-12, afternoon 12-18, evening 18-23, night 23-06


@dataclass(frozen=True)
class Classification:
    action: str | None  # one of ACTIONS, or None (NONE or unknown)
    confidence: float
    method: str  # one of METHODS: what decided
    label: str | None = None  # one of LABELS; None when nothing was recognised
    matched: tuple[str, ...] = ()  # the keywords (or eventType) behind the label
    tier: str | None = None  # "strong" or "weak" keywords decided; None otherwise

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "confidence": round(self.confidence, 3),
            "method": self.method,
            "label": self.label,
            "matched": list(self.matched),
            "tier": self.tier,
        }


def _as_action(label: str | None) -> str | None:
    return label if label in ACTIONS else None


# --- text ---------------------------------------------------------------------------------

_WORD = re.compile(r"[^\W\d_]+|\d+")
_TAG = re.compile(r"<[^>]{0,500}>")


def tokens(text: str | None) -> list[str]:
    """Lower-cased words without accents (ß -> ss); letters and digits apart ("test6" ->
    ["test", "6"]); anything else separates words."""
    if not text:
        return []
    t = unicodedata.normalize("NFKD", str(text))
    t = "".join(c for c in t if not unicodedata.combining(c)).lower().replace("ß", "ss")
    return _WORD.findall(t)


def normalize(text: str | None) -> str:
    return " ".join(tokens(text))


# --- the rules, as data ---------------------------------------------------------------------


@dataclass(frozen=True)
class Keyword:
    text: str  # as written in keywords.toml
    label: str
    strong: bool
    group: str  # where it ranks: the class ("SOCIALIZE") or one of its groups ("SOCIALIZE.occasion")
    words: tuple[str, ...]
    prefix: bool = False  # "word*": the (last) word matches as a prefix
    suffix: bool = False  # "*word": the word matches as a suffix
    exact: bool = False  # "=word": the whole word only (no ending, never a compound part)


@dataclass(frozen=True)
class KeywordRules:
    strong_order: tuple[str, ...]
    weak_order: tuple[str, ...]
    endings: tuple[str, ...]
    links: tuple[str, ...]
    verb_endings: tuple[str, ...]  # a compound's first part may be a verb's stem: "schwimm" + "en"
    compound_min_word: int
    compound_min_keyword: int
    compound_min_rest: int
    attendee_meeting_min: int
    description_max_chars: int
    confidence: Mapping[str, float]
    event_types: Mapping[str, str]
    emoji: tuple[Keyword, ...]
    words: Mapping[str, tuple[Keyword, ...]]  # one whole word -> keywords
    prefixes: tuple[Keyword, ...]
    suffixes: tuple[Keyword, ...]
    phrases: Mapping[str, tuple[Keyword, ...]]  # first word -> phrases, longest first

    def keywords(self) -> Iterable[Keyword]:
        for ks in self.words.values():
            yield from ks
        yield from self.prefixes
        yield from self.suffixes
        for ks in self.phrases.values():
            yield from ks


def _parse_keyword(raw: str, label: str, strong: bool, group: str) -> Keyword:
    core = raw.strip()
    exact = core.startswith("=")
    core = core.lstrip("=")
    prefix, suffix = core.endswith("*"), core.startswith("*")
    words = tuple(tokens(core.strip("*")))
    if not words or (len(words) > 1 and (suffix or exact)) or prefix + suffix + exact > 1:
        raise ValueError(f"keywords.toml: bad keyword {raw!r} in {label}")
    return Keyword(raw, label, strong, group, words, prefix, suffix, exact)


def parse_rules(doc: Mapping[str, Any]) -> KeywordRules:
    """Validate and index the keywords.toml document (raises ValueError on bad data)."""
    cfg = doc["rules"]
    classes = doc["classes"]
    if sorted(classes) != sorted(LABELS):
        raise ValueError(f"keywords.toml: [classes] must be exactly {LABELS}")
    groups = [f"{lab}.{g}" for lab in LABELS for g in classes[lab].get("groups", {})]
    orders = tuple(cfg["strong_order"]), tuple(cfg["weak_order"])
    if sorted(orders[0]) != sorted([*LABELS, *groups]):
        raise ValueError(f"keywords.toml: strong_order must list each class and group once: {LABELS} {groups}")
    if sorted(orders[1]) != sorted(LABELS):
        raise ValueError(f"keywords.toml: weak_order must list each of {LABELS} once")
    seen: dict[tuple[tuple[str, ...], bool, bool], Keyword] = {}
    for label in LABELS:
        spec = classes[label]
        lists = [(raw, True, label) for raw in spec.get("strong", [])]
        lists += [(raw, False, label) for raw in spec.get("weak", [])]
        for g, kws in spec.get("groups", {}).items():
            lists += [(raw, True, f"{label}.{g}") for raw in kws]
        for raw, strong, group in lists:
            kw = _parse_keyword(raw, label, strong, group)
            key = (kw.words, kw.prefix, kw.suffix)
            other = seen.get(key)
            if other and (other.group, other.strong, other.exact) != (kw.group, kw.strong, kw.exact):
                raise ValueError(f"keywords.toml: {raw!r} is in {other.group} and {group}")
            seen.setdefault(key, kw)
    words: dict[str, list[Keyword]] = {}
    phrases: dict[str, list[Keyword]] = {}
    prefixes, suffixes = [], []
    for kw in seen.values():
        if len(kw.words) > 1:
            phrases.setdefault(kw.words[0], []).append(kw)
        elif kw.prefix:
            prefixes.append(kw)
        elif kw.suffix:
            suffixes.append(kw)
        else:
            words.setdefault(kw.words[0], []).append(kw)
    emoji = []
    for ch, label in doc.get("emoji", {}).items():
        if label not in LABELS:
            raise ValueError(f"keywords.toml: emoji {ch} -> unknown class {label}")
        emoji.append(Keyword(ch, label, False, label, ()))
    for label in doc.get("event_types", {}).values():
        if label not in LABELS:
            raise ValueError(f"keywords.toml: eventType -> unknown class {label}")
    conf = {k: float(v) for k, v in doc["confidence"].items()}
    return KeywordRules(
        strong_order=orders[0],
        weak_order=orders[1],
        endings=tuple(cfg["endings"]),
        links=tuple(cfg["compound_links"]),
        verb_endings=tuple(cfg.get("compound_verb_endings", ())),
        compound_min_word=int(cfg["compound_min_word"]),
        compound_min_keyword=int(cfg["compound_min_keyword"]),
        compound_min_rest=int(cfg["compound_min_rest"]),
        attendee_meeting_min=int(cfg["attendee_meeting_min"]),
        description_max_chars=int(cfg["description_max_chars"]),
        confidence=conf,
        event_types=dict(doc.get("event_types", {})),
        emoji=tuple(emoji),
        words={w: tuple(ks) for w, ks in words.items()},
        prefixes=tuple(prefixes),
        suffixes=tuple(suffixes),
        phrases={w: tuple(sorted(ks, key=lambda k: -len(k.words))) for w, ks in phrases.items()},
    )


@cache
def keyword_rules() -> KeywordRules:
    text = resources.files("mapping").joinpath("data/keywords.toml").read_text(encoding="utf-8")
    return parse_rules(tomllib.loads(text))


# --- matching -------------------------------------------------------------------------------


def _whole(rules: KeywordRules, w: str, part: bool = False) -> list[Keyword]:
    """Single-word keywords matching ``w`` as a whole, with an ending, or as a prefix; for a
    compound ``part`` only keywords of compound_min_keyword letters or more, never "=word"."""
    if part and len(w) < rules.compound_min_keyword:
        return []
    hits = [k for k in rules.words.get(w, ()) if not (part and k.exact)]
    for e in () if hits else rules.endings:
        base = w[: -len(e)]
        if w.endswith(e) and len(base) >= 5:
            hits.extend(k for k in rules.words.get(base, ()) if not k.exact)
    hits.extend(k for k in rules.prefixes if w.startswith(k.words[0]))
    return hits


def _word_hits(rules: KeywordRules, w: str) -> list[Keyword]:
    """Keywords one word matches: whole, ending, prefix, suffix, and as a two-part compound."""
    hits = _whole(rules, w)
    hits.extend(k for k in rules.suffixes if w.endswith(k.words[0]))
    if w in rules.words or len(w) < rules.compound_min_word:
        return hits
    # the longest part that is a keyword wins at each end, as the longest phrase does:
    # "bibelkreis" ends in "kreis", not in "reis" (a trip in Dutch)
    rest = rules.compound_min_rest
    for i in range(rest, len(w) - rest + 1):
        right = _whole(rules, w[i:], part=True)
        if right:
            hits.extend(right)
            break
    for i in range(len(w) - rest, rest - 1, -1):
        left = []
        for cut in ("", *rules.links):
            if w[:i].endswith(cut):
                stem = w[: i - len(cut)]
                if len(stem) < rules.compound_min_keyword:
                    continue
                for form in (stem, *(stem + e for e in rules.verb_endings)):
                    left.extend(k for k in rules.words.get(form, ()) if not k.exact)
        if left:
            hits.extend(left)
            break
    return hits


def _phrase_word(pw: str, w: str, prefix: bool, endings: tuple[str, ...]) -> bool:
    if w == pw:
        return True
    if prefix:
        return w.startswith(pw)
    return len(pw) >= 5 and any(w == pw + e for e in endings)


def _phrase_at(rules: KeywordRules, toks: list[str], i: int) -> list[Keyword]:
    """The longest phrases starting at word i (all of that length)."""
    candidates = list(rules.phrases.get(toks[i], ()))
    for e in rules.endings:
        if toks[i].endswith(e) and len(toks[i]) - len(e) >= 5:
            candidates.extend(rules.phrases.get(toks[i][: -len(e)], ()))
    best: list[Keyword] = []
    for k in candidates:
        n = len(k.words)
        if i + n > len(toks) or (best and n < len(best[0].words)):
            continue
        if all(
            _phrase_word(k.words[j], toks[i + j], k.prefix and j == n - 1, rules.endings) for j in range(1, n)
        ):
            best = [k] if not best or n > len(best[0].words) else [*best, k]
    return best


def keyword_hits(text: str | None, rules: KeywordRules | None = None, phrases_only: bool = False) -> list[Keyword]:
    """Every keyword ``text`` matches, left to right; a phrase uses up its words."""
    rules = rules or keyword_rules()
    toks = tokens(text)
    hits: list[Keyword] = []
    i = 0
    while i < len(toks):
        phrase = _phrase_at(rules, toks, i)
        if phrase:
            hits.extend(phrase)
            i += len(phrase[0].words)
            continue
        if not phrases_only:
            hits.extend(_word_hits(rules, toks[i]))
        i += 1
    if text and not phrases_only:
        hits.extend(k for k in rules.emoji if k.text in text)
    return hits


def _decide(hits: list[Keyword], rules: KeywordRules, method: str) -> Classification | None:
    for strong, order in ((True, rules.strong_order), (False, rules.weak_order)):
        tier_hits = [k for k in hits if k.strong == strong]
        if not tier_hits:
            continue
        rank = {g: i for i, g in enumerate(order)}
        best = min(tier_hits, key=lambda k: rank[k.group if strong else k.label])
        label = best.label
        names = tuple(dict.fromkeys(k.text for k in tier_hits if k.label == label))
        tier = "strong" if strong else "weak"
        if method == "description":
            conf = rules.confidence["description"]
        else:
            contested = len({k.label for k in tier_hits}) > 1
            conf = rules.confidence[f"{tier}_contested" if contested else tier]
        return Classification(_as_action(label), conf, method, label, names, tier)
    return None


# --- the classifier -------------------------------------------------------------------------


def classify_event(
    title: str | None,
    description: str | None = None,
    attendees: int | None = None,
    event_type: str | None = None,
) -> Classification:
    """Title (and, where the title says nothing, description and attendees) -> a class.

    See the module docstring for the order of the rules.
    """
    return _classify(
        title if isinstance(title, str) else None,
        description if isinstance(description, str) else None,
        attendees if isinstance(attendees, int) else None,
        event_type if isinstance(event_type, str) else None,
    )


@lru_cache(maxsize=16384)
def _classify(
    title: str | None, description: str | None, attendees: int | None, event_type: str | None
) -> Classification:
    rules = keyword_rules()
    if event_type and event_type in rules.event_types:
        label = rules.event_types[event_type]
        return Classification(
            _as_action(label), rules.confidence["event_type"], "event_type", label, (event_type,)
        )
    decided = _decide(keyword_hits(title, rules), rules, "title")
    if decided is not None:
        return decided
    if description:
        text = _TAG.sub(" ", description[: rules.description_max_chars])
        decided = _decide(keyword_hits(text, rules, phrases_only=True), rules, "description")
        if decided is not None:
            return decided
    if attendees is not None and attendees >= rules.attendee_meeting_min:
        return Classification(
            "ADMIN_WORK", rules.confidence["attendees"], "attendees", "ADMIN_WORK", (f"{attendees} attendees",)
        )
    return Classification(None, 0.0, "none", None)


# --- slot actions ---------------------------------------------------------------------------


@dataclass
class SlotEvidence:
    """What is known about one (day, slot), in minutes within the slot."""

    sleep_min: float = 0.0
    workout_min: float = 0.0
    workout_sports: list[str] = field(default_factory=list)
    mindful_min: float = 0.0
    # action -> [minutes, confidence-weighted minutes, titles count]
    event_min: dict[str, list[float]] = field(default_factory=dict)

    def add_event(self, action: str, minutes: float, confidence: float) -> None:
        acc = self.event_min.setdefault(action, [0.0, 0.0, 0.0])
        acc[0] += minutes
        acc[1] += minutes * confidence
        acc[2] += 1


def slot_action(
    ev: SlotEvidence, slot: int, thresholds: SlotActionRules | None = None
) -> tuple[str | None, float, dict[str, Any]]:
    """``(action or None, confidence, evidence)`` for one slot; see the module docstring."""
    th = thresholds or default_rules().slot_actions
    length = SLOT_MINUTES[slot]
    evidence: dict[str, Any] = {
        "sleep_min": round(ev.sleep_min, 1),
        "workout_min": round(ev.workout_min, 1),
        "mindful_min": round(ev.mindful_min, 1),
        "calendar": {a: {"minutes": round(v[0], 1), "events": int(v[2])} for a, v in ev.event_min.items()},
    }
    share = ev.sleep_min / length
    if share >= th.sleep_share:
        evidence["rule"] = "sleep"
        return "SLEEP", min(1.0, 0.6 + 0.4 * share), evidence
    if ev.workout_min >= th.workout_min:
        evidence["rule"] = "workout"
        evidence["sports"] = sorted(set(ev.workout_sports))
        return "EXERCISE", min(1.0, 0.7 + 0.3 * ev.workout_min / 60.0), evidence
    if ev.mindful_min >= th.mindful_min:
        evidence["rule"] = "mindful"
        return "MEDITATE", min(1.0, 0.6 + 0.4 * ev.mindful_min / 30.0), evidence
    if ev.event_min:
        action = max(ev.event_min, key=lambda a: (ev.event_min[a][0], ev.event_min[a][1], a))
        minutes, wmin, _ = ev.event_min[action]
        if minutes >= th.calendar_min:
            total = sum(v[0] for v in ev.event_min.values())
            mean_conf = wmin / minutes if minutes else 0.0
            coverage = min(1.0, minutes / (0.5 * length))
            conf = mean_conf * (minutes / total) * (0.5 + 0.5 * coverage)
            evidence["rule"] = "calendar"
            return action, round(min(1.0, conf), 4), evidence
    evidence["rule"] = "none"
    return None, 0.0, evidence


def action_index(action: str | None) -> int | None:
    return None if action is None else ACTIONS.index(action)


def overlap_min(a_start: Any, a_end: Any, b_start: Any, b_end: Any) -> float:
    """Minutes two intervals overlap (any comparable datetimes)."""
    s, e = max(a_start, b_start), min(a_end, b_end)
    return max(0.0, (e - s).total_seconds() / 60.0)


# --- holds that are not done ----------------------------------------------------------------


@cache
def _tentative_rules() -> tuple[tuple[tuple[str, ...], ...], bool]:
    text = resources.files("mapping").joinpath("data/keywords.toml").read_text(encoding="utf-8")
    spec = tomllib.loads(text).get("tentative", {})
    return tuple(tuple(tokens(w)) for w in spec.get("starts", [])), bool(spec.get("question_mark", False))


def is_tentative_title(title: str | None) -> bool:
    """A hold by its title: "maybe gym?", "Vielleicht Yoga", "¿cena con Ana?" (keywords.toml
    [tentative])."""
    if not title:
        return False
    starts, question = _tentative_rules()
    toks = tokens(title)
    if any(tuple(toks[: len(s)]) == s for s in starts if s):
        return True
    return question and str(title).rstrip().endswith("?")


def counts_as_done(title: str | None, status: str | None, transparency: str | None,
                   self_response: str | None) -> bool:
    """Whether a calendar event says the person did something: not cancelled, declined or
    tentative (by status, by their answer or by its title), and not "free" (transparent)."""
    if (status or "confirmed").lower() in ("cancelled", "tentative"):
        return False
    if (self_response or "").lower() in ("declined", "tentative"):
        return False
    if (transparency or "opaque").lower() == "transparent":
        return False
    return not is_tentative_title(title)
