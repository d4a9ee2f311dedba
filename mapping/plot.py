"""Meter history as a PNG: one panel per slot, the five meters over the days (matplotlib Agg)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import Any

from common.records import SLOTS
from mapping.rules import METERS

COLORS = {
    "vitality": "#d62728",
    "cognition": "#1f77b4",
    "progress": "#2ca02c",
    "serenity": "#9467bd",
    "connection": "#ff7f0e",
}


def plot_meters(rows: Sequence[dict[str, Any]], path: str | Path, title: str | None = None) -> Path:
    """Write the meter history of ``rows`` (dicts with local_day, slot and the five meters).

    Missing meters are gaps in the lines, never drawn as values. Returns the path written.
    """
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(len(SLOTS), 1, figsize=(10, 8), sharex=True, sharey=True)
    for ax, slot in zip(axes, SLOTS, strict=True):
        sub = sorted((r for r in rows if r["slot"] == slot), key=lambda r: r["local_day"])
        days = [_day(r["local_day"]) for r in sub]
        for m in METERS:
            ys = [float("nan") if r.get(m) is None else float(r[m]) for r in sub]
            ax.plot(days, ys, label=m, color=COLORS[m], linewidth=1.2, marker="." if len(sub) < 40 else None)
        ax.axhline(0.5, color="grey", linewidth=0.6, linestyle="--")
        ax.set_ylim(0, 1)
        ax.set_ylabel(slot)
        ax.grid(alpha=0.3)
    axes[0].legend(ncol=5, fontsize="small", loc="upper center", bbox_to_anchor=(0.5, 1.35))
    fig.suptitle(title or "Meters (0.5 = usual for you)", y=0.99)
    fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _day(v: Any) -> date:
    return v if isinstance(v, date) else date.fromisoformat(str(v))
