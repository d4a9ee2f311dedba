"""Load and check the signal -> meter table (mapping/rules.toml). Pure; no database.

The table is data (STYLE rule 7): which signals drive which meter, in which direction, with
what weight per slot, and the population reference used before a personal baseline exists.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from common.errors import ConfigError
from common.records import METERS as _METERS

METERS: tuple[str, ...] = _METERS
N_SLOTS = 4


@dataclass(frozen=True)
class Signal:
    name: str
    scope: str  # "day" or "slot"
    unit: str
    ref_median: tuple[float, float, float, float]  # per slot (the same 4 values for day scope)
    ref_scale: float
    source: str


@dataclass(frozen=True)
class Rule:
    meter: str
    signal: str
    direction: int  # +1 more is better, -1 more is worse
    weight: float
    slot_weights: tuple[float, float, float, float]


@dataclass(frozen=True)
class Model:
    baseline_days: int = 28
    min_baseline_days: int = 5
    mad_to_sd: float = 1.4826
    scale_floor: float = 0.25
    steepness: float = 1.0
    population_quality: float = 0.5
    calendar_coverage_days: int = 7
    mindful_coverage_days: int = 28
    tasks_coverage_days: int = 14
    break_gap_min: float = 10.0
    work_block_min: float = 45.0


@dataclass(frozen=True)
class SlotActionRules:
    """Thresholds of the slot-action precedence (rules.toml [slot_actions])."""

    sleep_share: float = 0.5
    workout_min: float = 20.0
    mindful_min: float = 10.0
    calendar_min: float = 30.0
    point_event_min: float = 60.0


@dataclass(frozen=True)
class Rules:
    model: Model
    signals: dict[str, Signal]
    rules: tuple[Rule, ...]
    slot_actions: SlotActionRules = SlotActionRules()

    def __post_init__(self) -> None:
        by_meter = {m: tuple(r for r in self.rules if r.meter == m) for m in METERS}
        object.__setattr__(self, "_by_meter", by_meter)

    def for_meter(self, meter: str) -> tuple[Rule, ...]:
        return self._by_meter[meter]

    def signals_of(self, meter: str) -> tuple[str, ...]:
        return tuple(r.signal for r in self.for_meter(meter))


def _four(v: Any, what: str) -> tuple[float, float, float, float]:
    if isinstance(v, int | float):
        return (float(v),) * N_SLOTS  # type: ignore[return-value]
    if isinstance(v, list) and len(v) == N_SLOTS and all(isinstance(x, int | float) for x in v):
        return tuple(float(x) for x in v)  # type: ignore[return-value]
    raise ConfigError(f"rules: {what} must be a number or a list of 4 numbers, got {v!r}")


def parse_rules(doc: dict[str, Any]) -> Rules:
    """Build and validate a Rules object from a parsed TOML document."""
    model_fields = Model.__dataclass_fields__
    raw_model = doc.get("model", {})
    unknown = set(raw_model) - set(model_fields)
    if unknown:
        raise ConfigError(f"rules: unknown [model] keys {sorted(unknown)}")
    model = Model(**raw_model)
    raw_sa = doc.get("slot_actions", {})
    unknown = set(raw_sa) - set(SlotActionRules.__dataclass_fields__)
    if unknown:
        raise ConfigError(f"rules: unknown [slot_actions] keys {sorted(unknown)}")
    slot_actions = SlotActionRules(**{k: float(v) for k, v in raw_sa.items()})
    signals: dict[str, Signal] = {}
    for name, s in doc.get("signals", {}).items():
        scope = s.get("scope")
        if scope not in ("day", "slot"):
            raise ConfigError(f"rules: signal {name}: scope must be 'day' or 'slot'")
        scale = float(s.get("ref_scale", 0))
        if scale <= 0:
            raise ConfigError(f"rules: signal {name}: ref_scale must be > 0")
        signals[name] = Signal(
            name=name,
            scope=scope,
            unit=str(s.get("unit", "")),
            ref_median=_four(s.get("ref_median"), f"signal {name} ref_median"),
            ref_scale=scale,
            source=str(s.get("source", "")),
        )
    rules = []
    for i, r in enumerate(doc.get("rule", [])):
        meter, sig = r.get("meter"), r.get("signal")
        if meter not in METERS:
            raise ConfigError(f"rules: rule {i}: unknown meter {meter!r}")
        if sig not in signals:
            raise ConfigError(f"rules: rule {i}: unknown signal {sig!r}")
        direction = int(r.get("direction", 0))
        if direction not in (-1, 1):
            raise ConfigError(f"rules: rule {i}: direction must be +1 or -1")
        weight = float(r.get("weight", 0))
        if weight <= 0:
            raise ConfigError(f"rules: rule {i}: weight must be > 0")
        sw = _four(r.get("slot_weights", 1.0), f"rule {i} slot_weights")
        if any(w < 0 for w in sw):
            raise ConfigError(f"rules: rule {i}: slot_weights must be >= 0")
        rules.append(Rule(meter, sig, direction, weight, sw))
    for m in METERS:
        if not any(r.meter == m for r in rules):
            raise ConfigError(f"rules: meter {m} has no rule")
    return Rules(model=model, signals=signals, rules=tuple(rules), slot_actions=slot_actions)


def load_rules_file(path: str | Path) -> Rules:
    try:
        doc = tomllib.loads(Path(path).read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    return parse_rules(doc)


@cache
def default_rules() -> Rules:
    """The bundled table, mapping/rules.toml."""
    text = resources.files("mapping").joinpath("rules.toml").read_text()
    return parse_rules(tomllib.loads(text))
