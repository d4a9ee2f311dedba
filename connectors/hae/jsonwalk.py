"""Walk a JSON document element by element, never building the whole tree.

A Health Auto Export file is ``{"data": {"metrics": [{..., "data": [point, ...]}, ...],
"workouts": [...]}}``; a file of a whole year holds millions of points. ``JsonDoc`` keeps
the text and a position: ``keys()`` walks an object and ``items()`` an array, yielding with
the position at each value, which the caller then consumes (``value()`` decodes it with the
standard library's decoder and returns its exact text too, ``skip()`` steps over it, or it
descends with another ``keys()``/``items()``). Memory stays at the text plus one element.

Errors name the JSON path and the line and column: ``data.metrics[2].data[17] (line 40,
column 9)``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from common.errors import SourceFormatError

_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


class JsonDoc:
    def __init__(self, text: str, name: str):
        self.text = text
        self.name = name
        self.pos = 0

    # -- positions and errors -----------------------------------------------------------
    def where(self, pos: int | None = None) -> str:
        pos = self.pos if pos is None else pos
        line = self.text.count("\n", 0, pos) + 1
        col = pos - (self.text.rfind("\n", 0, pos) + 1) + 1
        return f"line {line}, column {col}"

    def error(self, path: str, detail: str, pos: int | None = None) -> SourceFormatError:
        where = self.where(pos)
        return SourceFormatError(self.name, detail, f"{path}, {where}" if path else where)

    def _ws(self) -> None:
        self.pos = _WS.match(self.text, self.pos).end()  # type: ignore[union-attr]

    def _peek(self, path: str) -> str:
        self._ws()
        if self.pos >= len(self.text):
            raise self.error(path, "invalid JSON: the file ends early (truncated?)")
        return self.text[self.pos]

    def _expect(self, ch: str, path: str, what: str) -> None:
        if self._peek(path) != ch:
            raise self.error(path, f"expected {what}, found {self.text[self.pos]!r}")
        self.pos += 1

    # -- walking ------------------------------------------------------------------------
    def kind(self, path: str) -> str:
        """'object', 'array' or 'value' for the value at the position."""
        ch = self._peek(path)
        return "object" if ch == "{" else "array" if ch == "[" else "value"

    def keys(self, path: str) -> Iterator[str]:
        """The keys of the object at the position; after each, the caller consumes its value."""
        self._expect("{", path, "an object")
        if self._peek(path) == "}":
            self.pos += 1
            return
        while True:
            if self._peek(path) != '"':
                raise self.error(path, f"invalid JSON: expected a key, found {self.text[self.pos]!r}")
            key, self.pos = self._decode(path)
            self._expect(":", path, "':' after a key")
            self._ws()
            start = self.pos
            yield key
            if self.pos == start:
                self.skip(f"{path}.{key}")
            ch = self._peek(path)
            self.pos += 1
            if ch == "}":
                return
            if ch != ",":
                raise self.error(path, f"invalid JSON: expected ',' or '}}', found {ch!r}", self.pos - 1)

    def items(self, path: str) -> Iterator[int]:
        """The indexes of the array at the position; after each, the caller consumes the element."""
        self._expect("[", path, "an array")
        if self._peek(path) == "]":
            self.pos += 1
            return
        i = 0
        while True:
            self._ws()
            start = self.pos
            yield i
            if self.pos == start:
                self.skip(f"{path}[{i}]")
            ch = self._peek(path)
            self.pos += 1
            if ch == "]":
                return
            if ch != ",":
                raise self.error(f"{path}[{i}]", f"invalid JSON: expected ',' or ']', found {ch!r}", self.pos - 1)
            i += 1

    def elements(self, path: str) -> Iterator[tuple[int, Any, str, int]]:
        """The array at the position, element by element: (index, decoded value, its exact text,
        its offset). The tight loop behind a metric's points."""
        self._expect("[", path, "an array")
        text, match, decode = self.text, _WS.match, _DECODER.raw_decode
        pos = match(text, self.pos).end()  # type: ignore[union-attr]
        if text.startswith("]", pos):
            self.pos = pos + 1
            return
        i = 0
        while True:
            try:
                obj, end = decode(text, pos)
            except json.JSONDecodeError as exc:
                self.pos = pos
                self._decode(f"{path}[{i}]")  # raises the positioned error
                raise AssertionError(exc) from None  # pragma: no cover
            yield i, obj, text[pos:end], pos
            pos = match(text, end).end()  # type: ignore[union-attr]
            ch = text[pos:pos + 1]
            if ch == ",":
                pos = match(text, pos + 1).end()  # type: ignore[union-attr]
                i += 1
            elif ch == "]":
                self.pos = pos + 1
                return
            elif not ch:
                raise self.error(f"{path}[{i}]", "invalid JSON: the file ends early (truncated?)", pos)
            else:
                raise self.error(f"{path}[{i}]", f"invalid JSON: expected ',' or ']', found {ch!r}", pos)

    def value(self, path: str) -> tuple[Any, str]:
        """The value at the position, decoded, and its exact text."""
        self._ws()
        start = self.pos
        obj, self.pos = self._decode(path)
        return obj, self.text[start:self.pos]

    def skip(self, path: str) -> None:
        self._ws()
        _, self.pos = self._decode(path)

    def end(self) -> None:
        self._ws()
        if self.pos != len(self.text):
            raise self.error("", "invalid JSON: extra data after the document")

    def _decode(self, path: str) -> tuple[Any, int]:
        try:
            return _DECODER.raw_decode(self.text, self.pos)
        except json.JSONDecodeError as exc:
            if exc.msg.startswith("Unterminated string") or exc.pos >= len(self.text.rstrip()):
                raise self.error(path, "invalid JSON: the file ends early (truncated?)", exc.pos) from None
            raise self.error(path, f"invalid JSON: {exc.msg}", exc.pos) from None
        except RecursionError:
            raise self.error(path, "invalid JSON: nested too deeply") from None
