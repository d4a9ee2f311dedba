"""Human lines for the evidence behind a meter (for `rhythm meters --explain`). Pure."""

from __future__ import annotations

from typing import Any


def signal_lines(evidence: dict[str, Any], meter: str) -> list[str]:
    """Human lines for one meter's evidence: signal = value (usual x) -> score."""
    ev = evidence.get(meter) or {}
    lines = []
    for name, s in sorted((ev.get("signals") or {}).items()):
        base = "usual" if s.get("personal") else "population"
        lines.append(
            f"{name} = {s['value']:g} ({base} {s['baseline']:g} ± {s['scale']:g}) -> {s['score']:.2f}"
        )
    if ev.get("missing"):
        lines.append("missing: " + ", ".join(ev["missing"]))
    return lines
