"""What the person did: calendar events and wearable sessions -> one of the ten actions. Pure.

Event classification (titles are untrusted text: they are only ever classifier input):

- ``rule_classify``: the keyword baseline of mapping/data/keywords.toml (multilingual: en,
  de, fr, es, nl, pt, it), plus the Google ``eventType`` and an attendee fallback.
- ``learned_classify``: a multinomial logistic regression in numpy over character n-grams
  (2-4 letters of each word), whole words, an attendee bucket and the keyword rule's label
  as one more feature (so it learns when a keyword is right and what to do where none
  matched). Trained deterministically, at first use, on the ``train`` rows of
  mapping/data/labelled_events.csv and cached for the process (about 1 s).
- ``classify_event``: what `rhythm map` uses: ``eventType`` focusTime/outOfOffice first, then
  the learned model, then (where it abstains) the attendee fallback of the rules.

The label set is the ten actions plus ``OTHER`` (appointments, travel, holidays, blockers);
an OTHER or unknown event gets no action (``None``), never a made-up one.

``slot_action`` decides one action per slot with the precedence of rules.toml
[slot_actions]: sleep > workout > mindful session > the dominant classified calendar events >
nothing.
"""

from __future__ import annotations

import csv
import tomllib
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, lru_cache
from importlib import resources
from typing import Any

import numpy as np

from common.records import ACTIONS
from mapping.rules import SlotActionRules, default_rules

OTHER = "OTHER"
LABELS: tuple[str, ...] = (*ACTIONS, OTHER)
MIN_CONFIDENCE = 0.2  # below this the learned model abstains (no action)
NGRAMS = (2, 3, 4)
# Chosen by 5-fold cross-validation on the train split only (never on the held-out rows).
LR_C = 10.0
LR_RULE_SCALE = 0.5
LR_EPOCHS = 80
LR_RATE = 10.0
SLOT_MINUTES = (360.0, 360.0, 300.0, 420.0)  # morning 06-12, afternoon 12-18, evening 18-23, night 23-06


@dataclass(frozen=True)
class Classification:
    action: str | None  # one of ACTIONS, or None (OTHER / unknown)
    confidence: float
    method: str  # "rules", "learned", "event_type", "attendees", "none"
    label: str | None = None  # the raw label, OTHER included
    matched: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "confidence": round(self.confidence, 3),
            "method": self.method,
            "label": self.label,
            "matched": list(self.matched),
        }


def _as_action(label: str | None) -> str | None:
    return label if label in ACTIONS else None


# --- text ---------------------------------------------------------------------------------


def normalize(text: str | None) -> str:
    """Lower case, accents stripped, anything but letters and digits -> one space."""
    if not text:
        return ""
    t = unicodedata.normalize("NFKD", str(text))
    t = "".join(c for c in t if not unicodedata.combining(c)).lower()
    t = t.replace("ß", "ss").replace("'", "")
    out = "".join(c if c.isalnum() or c == "+" else " " for c in t)
    return " ".join(out.split())


# --- keyword rules --------------------------------------------------------------------------


@dataclass(frozen=True)
class KeywordRules:
    keywords: dict[str, tuple[str, ...]]  # label -> normalised keywords
    # first word of a keyword (<= 3 letters) or its first 4 letters -> (label, keyword words)
    index: dict[str, tuple[tuple[str, tuple[str, ...]], ...]]
    weights: dict[str, float]
    event_types: dict[str, str]
    confidence_base: float
    confidence_per_extra: float
    confidence_max: float
    attendee_meeting_min: int
    attendee_meeting_confidence: float
    description_weight: float


@cache
def keyword_rules() -> KeywordRules:
    doc = tomllib.loads(resources.files("mapping").joinpath("data/keywords.toml").read_text())
    cfg = doc["rules"]
    kws, weights = {}, {}
    for label, spec in doc["actions"].items():
        if label not in LABELS:
            raise ValueError(f"keywords.toml: unknown action {label}")
        kws[label] = tuple(dict.fromkeys(normalize(k) for k in spec["keywords"] if normalize(k)))
        weights[label] = float(spec.get("weight", 1.0))
    index: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
    for label, ks in kws.items():
        for k in ks:
            words = tuple(k.split())
            index.setdefault(_index_key(words[0]), []).append((label, words))
    return KeywordRules(
        keywords=kws,
        index={k: tuple(v) for k, v in index.items()},
        weights=weights,
        event_types=dict(doc.get("event_types", {})),
        confidence_base=float(cfg["confidence_base"]),
        confidence_per_extra=float(cfg["confidence_per_extra"]),
        confidence_max=float(cfg["confidence_max"]),
        attendee_meeting_min=int(cfg["attendee_meeting_min"]),
        attendee_meeting_confidence=float(cfg["attendee_meeting_confidence"]),
        description_weight=float(cfg["description_weight"]),
    )


def _index_key(word: str) -> str:
    return word if len(word) <= 3 else word[:4]


def _word_matches(word: str, kw: str, last: bool) -> bool:
    if not last or len(kw) <= 3:
        return word == kw
    return word.startswith(kw)


def _keyword_scores(
    text: str, rules: KeywordRules, factor: float = 1.0
) -> dict[str, tuple[float, list[str]]]:
    """Keyword hits per label. A keyword starts a word ("meet" matches "meeting", not
    "teammeeting"); one of 3 letters or fewer must be the whole word; a phrase matches
    consecutive words (its last word by prefix)."""
    words = normalize(text).split()
    hits: dict[str, list[str]] = {}
    for i, w in enumerate(words):
        for key in {w, w[:4]} if len(w) > 3 else {w}:
            for label, kw in rules.index.get(key, ()):
                n = len(kw)
                if i + n > len(words):
                    continue
                if all(_word_matches(words[i + j], kw[j], j == n - 1) for j in range(n)):
                    name = " ".join(kw)
                    if name not in hits.setdefault(label, []):
                        hits[label].append(name)
    return {lab: (rules.weights[lab] * len(h) * factor, h) for lab, h in hits.items()}


@lru_cache(maxsize=8192)
def rule_classify(
    title: str | None,
    description: str | None = None,
    attendees: int | None = None,
    event_type: str | None = None,
) -> Classification:
    """The keyword baseline."""
    rules = keyword_rules()
    if event_type and event_type in rules.event_types:
        label = rules.event_types[event_type]
        return Classification(_as_action(label), 0.9, "event_type", label, (event_type,))
    scores = _keyword_scores(title or "", rules)
    for label, (s, hit) in _keyword_scores(description or "", rules, rules.description_weight).items():
        prev = scores.get(label, (0.0, []))
        scores[label] = (prev[0] + s, prev[1] + hit)
    if scores:
        order = {lab: i for i, lab in enumerate(rules.keywords)}
        label = max(scores, key=lambda lab: (scores[lab][0], -order[lab]))
        n = len(scores[label][1])
        conf = min(rules.confidence_max, rules.confidence_base + rules.confidence_per_extra * (n - 1))
        if len(scores) > 1:
            conf *= scores[label][0] / sum(s for s, _ in scores.values())
        return Classification(_as_action(label), conf, "rules", label, tuple(scores[label][1]))
    if attendees is not None and attendees >= rules.attendee_meeting_min:
        return Classification("ADMIN_WORK", rules.attendee_meeting_confidence, "attendees", "ADMIN_WORK")
    return Classification(None, 0.0, "none", None)


# --- learned classifier -------------------------------------------------------------------


def featurize(title: str | None, attendees: int | None = None) -> list[str]:
    """Whole words, character 2-4-grams of each padded word, and an attendee bucket."""
    feats: list[str] = []
    for w in normalize(title).split():
        feats.append(f"w:{w}")
        padded = f" {w} "
        for n in NGRAMS:
            feats.extend(f"c:{padded[i : i + n]}" for i in range(len(padded) - n + 1))
    if attendees is not None:
        feats.append("a:solo" if attendees <= 1 else ("a:few" if attendees <= 4 else "a:many"))
    return feats


def rule_features(title: str | None, attendees: int | None) -> np.ndarray:
    """One-hot of the keyword rule's label (zeros when no keyword matched)."""
    v = np.zeros(len(LABELS))
    c = rule_classify(title, None, attendees)
    if c.method == "rules" and c.label in LABELS:
        v[LABELS.index(c.label)] = 1.0
    return v


@dataclass
class TextClassifier:
    """Multinomial logistic regression on L2-normalised n-gram counts plus the keyword hit.

    Deterministic full-batch gradient descent from zero weights (no randomness at all).
    The keyword rule's label is an input feature (scaled by ``rule_scale``): the model learns
    when to trust a keyword and falls back on the n-grams where no keyword matched.
    """

    labels: tuple[str, ...] = LABELS
    c: float = LR_C
    rule_scale: float = LR_RULE_SCALE
    epochs: int = LR_EPOCHS
    lr: float = LR_RATE
    use_rules: bool = True
    vocab: dict[str, int] = field(default_factory=dict)
    w: np.ndarray | None = None
    b: np.ndarray | None = None

    def _vec(self, title: str | None, attendees: int | None) -> np.ndarray:
        v = np.zeros(len(self.vocab))
        for f in featurize(title, attendees):
            j = self.vocab.get(f)
            if j is not None:
                v[j] += 1.0
        n = np.linalg.norm(v)
        if n > 0:
            v /= n
        if self.use_rules:
            v = np.concatenate([v, self.rule_scale * rule_features(title, attendees)])
        return v

    def fit(self, rows: Sequence[LabelledEvent]) -> TextClassifier:
        for r in rows:
            for f in featurize(r.title, r.attendees):
                self.vocab.setdefault(f, len(self.vocab))
        x = np.array([self._vec(r.title, r.attendees) for r in rows])
        y = np.eye(len(self.labels))[[self.labels.index(r.label) for r in rows]]
        n = len(rows)
        # Gradient descent from w = 0 keeps w = x.T @ a (the L2 penalty and the gradient both
        # live in the row space of x), so iterate on a with the n x n Gram matrix: the same
        # numbers as the primal updates, at a fraction of the cost.
        gram = x @ x.T
        a = np.zeros((n, len(self.labels)))
        b = np.zeros(len(self.labels))
        for _ in range(self.epochs):
            # einsum, not @: a multi-threaded BLAS call per step is slow on a busy machine.
            z = np.einsum("ij,jk->ik", gram, a) + b
            z -= z.max(axis=1, keepdims=True)
            p = np.exp(z)
            p /= p.sum(axis=1, keepdims=True)
            g = (p - y) / n
            a -= self.lr * (g + a / (self.c * n))
            b -= self.lr * g.sum(axis=0)
        w = x.T @ a
        self.w, self.b = w, b
        return self

    def predict_proba(self, title: str | None, attendees: int | None = None) -> dict[str, float]:
        """Class probabilities; all zeros when the title has no known feature and no keyword."""
        v = self._vec(title, attendees)
        if not v.any():
            return {lab: 0.0 for lab in self.labels}
        z = v @ self.w + self.b
        p = np.exp(z - z.max())
        p /= p.sum()
        return {lab: float(x) for lab, x in zip(self.labels, p, strict=True)}


@dataclass(frozen=True)
class LabelledEvent:
    title: str
    attendees: int | None
    lang: str
    label: str
    split: str


@cache
def labelled_events() -> tuple[LabelledEvent, ...]:
    text = resources.files("mapping").joinpath("data/labelled_events.csv").read_text()
    rows = []
    for r in csv.DictReader(text.splitlines()):
        if r["label"] not in LABELS or r["split"] not in ("train", "test"):
            raise ValueError(f"labelled_events.csv: bad row {r}")
        att = int(r["attendees"]) if r["attendees"] else None
        rows.append(LabelledEvent(r["title"], att, r["lang"], r["label"], r["split"]))
    return tuple(rows)


def train(rows: Iterable[LabelledEvent], **kwargs: Any) -> TextClassifier:
    return TextClassifier(**kwargs).fit(list(rows))


@cache
def learned_model() -> TextClassifier:
    """The model trained on the ``train`` split (at first use; deterministic)."""
    return train(r for r in labelled_events() if r.split == "train")


@cache
def ngram_only_model() -> TextClassifier:
    """The same model without the keyword feature (for the comparison in the README)."""
    return train((r for r in labelled_events() if r.split == "train"), use_rules=False)


def learned_classify(
    title: str | None, attendees: int | None = None, model: TextClassifier | None = None
) -> Classification:
    model = model or learned_model()
    proba = model.predict_proba(title, attendees)
    if not any(proba.values()):
        return Classification(None, 0.0, "none", None)
    label = max(proba, key=lambda lab: proba[lab])
    conf = proba[label]
    if conf < MIN_CONFIDENCE:
        return Classification(None, 0.0, "none", None)
    return Classification(_as_action(label), conf, "learned", label)


def classify_event(
    title: str | None,
    description: str | None = None,
    attendees: int | None = None,
    event_type: str | None = None,
    model: TextClassifier | None = None,
) -> Classification:
    """The classifier `rhythm map` uses (see the module docstring)."""
    if model is None:
        return _classify_cached(title, description, attendees, event_type)
    return _classify(title, description, attendees, event_type, model)


@lru_cache(maxsize=16384)
def _classify_cached(
    title: str | None, description: str | None, attendees: int | None, event_type: str | None
) -> Classification:
    return _classify(title, description, attendees, event_type, learned_model())


def _classify(
    title: str | None,
    description: str | None,
    attendees: int | None,
    event_type: str | None,
    model: TextClassifier,
) -> Classification:
    rule = rule_classify(title, description, attendees, event_type)
    if rule.method == "event_type":
        return rule
    text = title if normalize(title) else description
    if not normalize(text):
        return rule  # no words: the attendee fallback, or nothing
    learned = learned_classify(text, attendees, model)
    if learned.label is not None:
        matched = rule.matched if rule.label == learned.label else ()
        return Classification(learned.action, learned.confidence, "learned", learned.label, matched)
    return rule  # the attendee fallback, or nothing


def evaluate(split: str = "test", model: TextClassifier | None = None) -> dict[str, Any]:
    """Accuracy of the rules, the learned model and its n-gram-only variant on a split.

    OTHER counts as a label: predicting no action for an OTHER event is right.
    """
    rows = [r for r in labelled_events() if r.split == split]
    model = model or learned_model()

    def lab(c: Classification) -> str:
        return c.label if c.label in LABELS else OTHER

    res = {"rules": 0, "learned": 0, "ngrams_only": 0}
    ngram_model = ngram_only_model()
    per_lang: dict[str, dict[str, int]] = {}
    for r in rows:
        preds = {
            "rules": lab(rule_classify(r.title, None, r.attendees)),
            "learned": lab(learned_classify(r.title, r.attendees, model)),
            "ngrams_only": lab(learned_classify(r.title, r.attendees, ngram_model)),
        }
        pl = per_lang.setdefault(r.lang, {"n": 0, "rules": 0, "learned": 0, "ngrams_only": 0})
        pl["n"] += 1
        for k, p in preds.items():
            ok = int(p == r.label)
            res[k] += ok
            pl[k] += ok
    n = len(rows)
    return {
        "split": split,
        "n": n,
        **{f"{k}_accuracy": round(v / n, 4) if n else 0.0 for k, v in res.items()},
        "per_language": per_lang,
    }


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


def proba_table(title: str, attendees: int | None = None) -> Mapping[str, float]:
    """The learned model's probabilities for one title (for explanations and tests)."""
    return learned_model().predict_proba(title, attendees)
