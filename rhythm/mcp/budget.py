"""The size of an MCP answer (issue 41): every tool answer fits in ``MAX_ANSWER_BYTES``.

A long value is cut to ``MAX_VALUE_CHARS`` characters (query_sql cuts it in the database,
before a row is fetched, so ``SELECT repeat('x', 200000000)`` never becomes a 200 MB Python
string); rows past the budget are left out; and the answer says so (``truncated: true`` and
a note, or ``cut`` on the answers that have no such field). docs/mcp.md states the bound.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

MAX_ANSWER_BYTES = 1_000_000  # about 1 MB of JSON per tool answer
MAX_VALUE_CHARS = 20_000  # one string (or a nested value's text) in a query_sql row
CUT_MARK = "…[cut]"


def size(value: Any) -> int:
    """Bytes of ``value`` as JSON (as the SDK sends it, near enough)."""
    return len(json.dumps(value, ensure_ascii=False, default=str).encode())


def cut_text(text: str, limit: int) -> tuple[str, bool]:
    if len(text) <= limit:
        return text, False
    return text[:limit] + CUT_MARK, True


def _cut_strings(value: Any, limit: int) -> tuple[Any, int]:
    """``value`` with every string longer than ``limit`` cut; how many were cut."""
    if isinstance(value, str):
        text, was = cut_text(value, limit)
        return text, int(was)
    if isinstance(value, dict):
        n, out = 0, {}
        for k, v in value.items():
            out[k], c = _cut_strings(v, limit)
            n += c
        return out, n
    if isinstance(value, list):
        n, items = 0, []
        for v in value:
            v, c = _cut_strings(v, limit)
            items.append(v)
            n += c
        return items, n
    return value, 0


def _shorten_lists(value: Any) -> tuple[Any, int]:
    """The longest list in ``value`` halved (its first half kept); how many items went."""
    best: list[Any] | None = None

    def walk(v: Any) -> None:
        nonlocal best
        if isinstance(v, list):
            if best is None or len(v) > len(best):
                best = v
            for x in v:
                walk(x)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)

    walk(value)
    if not best or len(best) < 2:
        return value, 0
    gone = len(best) - len(best) // 2
    del best[len(best) // 2:]
    return value, gone


def fit(answer: BaseModel, budget: int = MAX_ANSWER_BYTES) -> BaseModel:
    """``answer`` itself when its JSON fits ``budget``; else a copy with long strings cut (and,
    if that is not enough, long lists shortened), saying what was cut."""
    doc = answer.model_dump(mode="json")
    if size(doc) <= budget:
        return answer
    cut_values = dropped = 0
    limit = MAX_VALUE_CHARS
    while size(doc) > budget and limit >= 64:
        doc, n = _cut_strings(doc, limit)
        cut_values += n
        limit //= 4
    while size(doc) > budget:
        doc, gone = _shorten_lists(doc)
        if not gone:
            break
        dropped += gone
    said = (f"answer over the {budget:,}-byte budget: {cut_values} long values cut (marked {CUT_MARK!r})"
            + (f", {dropped} list items left out" if dropped else ""))
    fields = type(answer).model_fields
    if "truncated" in fields:
        doc["truncated"] = True
    if "note" in fields:
        doc["note"] = f"{doc['note']}; {said}" if doc.get("note") else said
    elif "cut" in fields:
        doc["cut"] = said
    return type(answer).model_validate(doc)
