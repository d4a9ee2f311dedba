"""Fast path for export.xml: expat checks the XML, compiled regexes extract the Records.

Expat with a Python start-element handler costs a few microseconds per element, and an
export has millions of Records plus their HRV beat children. Here expat runs with **no**
element handlers on every chunk (C speed; it still reports malformed XML with line and
column), and the data is taken from the same bytes with compiled `bytes` regexes:

- `_OTHER` finds the next tag that is not Record-family (Workout, ActivitySummary, Me,
  Correlation, comments, CDATA, `</HealthData>` ...). The text before it is a *run* of
  top-level Records.
- In a run, one `findall` of `_RECORD` returns, per Record, its attribute string, the seven
  attributes the samples need (any attribute order) and its children (MetadataEntry, HRV
  beat lists) as one string. Quantity Records go on as Arrow columns (`columns.py`),
  category Records and HRV beat lists become objects one by one (few).
- A run is taken on the fast path only if every check passes (each `<Record` matched,
  every child understood, no character reference or tab/newline in a value, required
  attributes present). Otherwise, and for every non-Record element, the exact handler
  logic of `parser.ExportParser` runs on that stretch of text (`parse_fragment`), with
  positions mapped back to the file for error messages.
- Chunk boundaries: the text from the last `<Record` of a chunk (or from an element that
  is not complete yet) is carried into the next chunk.

Documents this path does not take (another encoding than UTF-8, entities declared in the
DTD, a root other than HealthData) are read entirely by `ExportParser`.
"""

from __future__ import annotations

import pyexpat
import re
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from common.records import RecordBatch, Sample
from connectors.healthkit import parser as parser_mod
from connectors.healthkit.columns import ConversionError, quantity_columns
from connectors.healthkit.parser import ExportParser, ParseError, _key

_V = rb'("[^"<]*)"'  # a double-quoted value, captured with its opening quote (presence)
_NAME = rb"[A-Za-z_:][-\w.:]*"
_RECORD = re.compile(
    rb"<Record((?:\s+(?:type=" + _V + rb"|sourceName=" + _V + rb"|device=" + _V + rb"|unit=" + _V
    + rb"|startDate=" + _V + rb"|endDate=" + _V + rb"|value=" + _V + rb"|" + _NAME + rb'="[^"<]*"))*+)'
    rb"\s*(?:/>|>((?:\s*<(?:MetadataEntry|InstantaneousBeatsPerMinute)\s[^>]*/>"
    rb"|\s*</?HeartRateVariabilityMetadataList\s*>)*+)\s*</Record\s*>)"
)
# Any tag that is not part of a Record (or a partial tag at the end of the buffer).
_OTHER = re.compile(
    rb"<(?!Record[\s/>]|/Record[\s>]|MetadataEntry[\s/>]|/?HeartRateVariabilityMetadataList[\s>]"
    rb"|InstantaneousBeatsPerMinute[\s/>])"
)
# Tokens for finding where a non-Record element ends (depth counting), quote-aware.
_SCAN = re.compile(
    rb"<!--.*?-->|<!\[CDATA\[.*?\]\]>|<\?.*?\?>|<(/?)[^\s/>!?]+((?:[^>\"']|\"[^\"]*\"|'[^']*')*+)>", re.S
)
_ROOT_TAG = re.compile(rb"<[^\s/>]+(?:[^>\"']|\"[^\"]*\"|'[^']*')*+>")
_MD = re.compile(rb'<MetadataEntry key="([^"<]*)" value="([^"<]*)"\s*/>')
_BEAT = re.compile(rb'<InstantaneousBeatsPerMinute bpm="([^"<]*)" time="([^"<]*)"\s*/>')
_ATTR = re.compile(rb"(" + _NAME + rb')="([^"<]*)"')
_ENCODING = re.compile(rb"""^(?:\xef\xbb\xbf)?<\?xml[^>]*encoding\s*=\s*["']([^"']*)["']""")
_ENTITIES = ((b"&lt;", b"<"), (b"&gt;", b">"), (b"&quot;", b'"'), (b"&apos;", b"'"), (b"&amp;", b"&"))
_STR_ENTITIES = tuple((e.decode(), c.decode()) for e, c in _ENTITIES)
_ODD = re.compile(rb"&#|[\t\n\r]")  # needs expat's exact rules: left to the slow path


class _Slow(Exception):
    """This run is not in the shape the fast path reads: use the exact handlers."""


def _text(raw: bytes) -> str:
    """An attribute value as expat would report it (only the five named entities here)."""
    if b"&" in raw:
        if _ODD.search(raw):
            raise _Slow
        for ent, ch in _ENTITIES:
            raw = raw.replace(ent, ch)
    elif b"\t" in raw or b"\n" in raw or b"\r" in raw:
        raise _Slow
    return raw.decode("utf-8")


def _attrs(raw: bytes) -> dict[str, str]:
    return {n.decode("utf-8"): _text(v) for n, v in _ATTR.findall(raw)}


def _column(values: tuple[bytes, ...], required: bool) -> pa.Array:
    """Arrow strings from captured `"value` bytes (b'' = attribute absent -> null)."""
    if required and b"" in values:
        raise _Slow  # a required attribute is missing: the exact path raises with position
    arr = pa.array(values, pa.binary()).cast(pa.string())  # UTF-8 (expat checked it)
    out = pc.utf8_slice_codeunits(arr, 1)
    if not required:
        out = pc.if_else(pc.equal(pc.binary_length(arr), 0), pa.scalar(None, pa.string()), out)
    if pc.any(pc.match_substring(out, "&")).as_py():
        if pc.any(pc.match_substring(out, "&#")).as_py():
            raise _Slow
        for ent, ch in _STR_ENTITIES:
            out = pc.replace_substring(out, ent, ch)
    if pc.any(pc.match_substring_regex(out, "[\t\n\r]")).as_py():
        raise _Slow
    return out


class FastParser:
    """Same interface as `ExportParser` (feed / drain / close, locale, export_date,
    records_seen), same records out."""

    def __init__(self, fetched_at: datetime | None = None):
        self.exact = ExportParser(fetched_at)  # handlers for the few; also the legacy mode
        self._check = pyexpat.ParserCreate()
        self._check.StartElementHandler = self._root
        self._root_at: int | None = None
        self._root_name = ""
        self._legacy = False
        self._body = False  # inside <HealthData>: runs and elements are being read
        self._done = False  # </HealthData> reached
        self._buf = b""
        self._base = 0  # file offset of _buf[0]
        self._line = 1  # line of _buf[0]
        self._col = 0  # column (0-based) of _buf[0]
        self._fast_seen = 0
        self._chunks: list[tuple[pa.Array, ...]] = []  # quantity columns not yet batched
        self._rows = 0
        self._md: tuple[list[int], list[str], list[str]] = ([], [], [])

    # -- interface ---------------------------------------------------------------------
    @property
    def locale(self) -> str | None:
        return self.exact.locale

    @property
    def export_date(self) -> str | None:
        return self.exact.export_date

    @property
    def records_seen(self) -> int:
        return self._fast_seen + self.exact.records_seen

    def feed(self, chunk: bytes) -> None:
        if self._legacy:
            self.exact.feed(chunk)
            return
        try:
            self._check.Parse(chunk, False)
        except pyexpat.ExpatError as exc:
            raise ParseError(exc.lineno, exc.offset + 1, pyexpat.ErrorString(exc.code)) from None
        if not self._done:
            self._buf += chunk
            self._advance(final=False)

    def close(self) -> None:
        if self._legacy:
            self.exact.close()
            return
        try:
            self._check.Parse(b"", True)
        except pyexpat.ExpatError as exc:
            raise ParseError(exc.lineno, exc.offset + 1, pyexpat.ErrorString(exc.code)) from None
        self._advance(final=True)

    def drain(self, final: bool = False) -> Iterator[Any]:
        x = self.exact
        if x.out:
            out, x.out = x.out, []
            yield from out
        if self._rows >= parser_mod.BATCH_ROWS or (final and self._rows):
            yield self._take_batch()
        if x.pending_rows and (final or x.pending_rows >= parser_mod.BATCH_ROWS or not self._legacy):
            batch = x._take_batch(final or not self._legacy)
            if batch is not None:
                yield batch
        if x.out:
            out, x.out = x.out, []
            yield from out
        if final:
            yield from x._sleep_sessions()

    # -- the document ------------------------------------------------------------------
    def _root(self, name: str, attrs: dict[str, str]) -> None:
        self._check.StartElementHandler = None
        self._root_at = self._check.CurrentByteIndex
        self._root_name = name
        if name == "HealthData":
            self.exact.locale = attrs.get("locale")

    def _advance(self, final: bool) -> None:
        if not self._body and not self._done:
            if self._root_at is None:
                return  # prolog not complete yet
            self._start_body()
            if self._legacy:
                return
        if self._body:
            self._runs(final)

    def _start_body(self) -> None:
        at = self._root_at - self._base  # type: ignore[operator]
        prolog = self._buf[:at]
        enc = _ENCODING.match(prolog)
        if (
            self._root_name != "HealthData"
            or b"<!ENTITY" in prolog
            or (enc is not None and enc.group(1).lower().replace(b"_", b"-") not in (b"utf-8", b"utf8"))
            or prolog.startswith((b"\xff\xfe", b"\xfe\xff"))
        ):
            self._legacy = True  # read by the exact parser from the start
            self.exact.feed(self._buf)
            self._buf = b""
            return
        m = _ROOT_TAG.match(self._buf, at)
        assert m is not None  # expat has seen the whole start tag
        self._consume(m.end())
        self._body = not m.group().endswith(b"/>")
        self._done = not self._body

    def _consume(self, upto: int) -> None:
        """Drop _buf[:upto], keeping the line/column of the new _buf[0]."""
        nl = self._buf.count(b"\n", 0, upto)
        if nl:
            self._line += nl
            self._col = upto - self._buf.rfind(b"\n", 0, upto) - 1
        else:
            self._col += upto
        self._buf = self._buf[upto:]
        self._base += upto

    def _position(self, i: int) -> tuple[int, int]:
        nl = self._buf.count(b"\n", 0, i)
        if not nl:
            return self._line, self._col + i
        return self._line + nl, i - self._buf.rfind(b"\n", 0, i) - 1

    def _runs(self, final: bool) -> None:
        buf = self._buf
        pos = 0
        while not self._done:
            m = _OTHER.search(buf, pos)
            if m is None:
                cut = len(buf) if final else buf.rfind(b"<Record", pos)
                if cut > pos:
                    pos = self._run_or_exact(pos, cut)
                break
            o = m.start()
            if o > pos:
                try:
                    self._run(pos, o)
                except _Slow:
                    end = self._element_end(pos, o)
                    if end is None:
                        break  # needs more text
                    if end < 0:  # </HealthData> follows the run
                        self._exact(pos, o)
                        self._done = True
                        break
                    self._exact(pos, end)
                    pos = end
                    continue
                pos = o
            end = self._element_end(o, o)
            if end is None:
                break
            if end < 0:  # </HealthData>
                self._done = True
                pos = o
                break
            self._exact(o, end)
            pos = end
        if self._done:
            self._body = False
            pos = len(buf)
        self._consume(pos)

    def _run_or_exact(self, a: int, b: int) -> int:
        """Read [a, b) (Records only); returns where reading stopped."""
        try:
            self._run(a, b)
        except _Slow:
            end = self._last_boundary(a, b)
            if end > a:
                self._exact(a, end)
            return end
        return b

    def _tokens(self, start: int) -> Iterator[re.Match[bytes]]:
        """Complete markup tokens from `start`; stops at the first incomplete one."""
        prev = start
        buf = self._buf
        for m in _SCAN.finditer(buf, start):
            if buf.find(b"<", prev, m.start()) != -1:
                return  # an incomplete token (e.g. a comment cut by the chunk end)
            prev = m.end()
            yield m

    def _last_boundary(self, start: int, limit: int) -> int:
        """The last top-level element end in [start, limit]."""
        depth, last = 0, start
        for m in self._tokens(start):
            if m.end() > limit:
                break
            if m.group(2) is not None:
                if m.group(1):
                    depth -= 1
                elif not m.group(2).endswith(b"/"):
                    depth += 1
            if depth == 0:
                last = m.end()
        return last

    def _element_end(self, start: int, target: int) -> int | None:
        """End of the top-level element containing or starting at `target`, scanning from
        `start` (a top-level position); -1 at `</HealthData>`; None if not in the buffer."""
        depth = 0
        for m in self._tokens(start):
            if m.group(2) is None:  # comment, CDATA, processing instruction
                if depth == 0 and m.start() >= target:
                    return m.end()
                continue
            if m.group(1):
                depth -= 1
                if depth < 0:
                    return -1
            elif not m.group(2).endswith(b"/"):
                depth += 1
            if depth == 0 and m.start() >= target:
                return m.end()
        return None

    def _exact(self, a: int, b: int) -> None:
        line, col = self._position(a)
        self.exact.parse_fragment(self._buf[a:b], line, col)

    # -- a run of Records --------------------------------------------------------------
    def _run(self, a: int, b: int) -> None:
        buf = self._buf
        recs = _RECORD.findall(buf, a, b)
        if len(recs) != buf.count(b"<Record", a, b):
            raise _Slow
        if not recs:
            return
        attrs, ty, sn, dv, un, sd, ed, va, ch = zip(*recs)
        cols = (
            _column(ty, True),
            _column(sn, True),
            _column(dv, False),
            _column(un, False),
            _column(sd, True),
            _column(ed, True),
            _column(va, False),
        )
        types = cols[0]
        n = len(types)
        quantity = pc.equal(pc.utf8_slice_codeunits(types, 2, 3), "Q")
        if pc.any(pc.less(pc.utf8_length(types), 3)).as_py():
            raise _Slow
        q_mask = quantity.to_numpy(zero_copy_only=False)
        q_rows = np.cumsum(q_mask) - 1  # row of each Record among the run's quantity ones
        x = self.exact
        n_out, n_stage = len(x.out), len(x.stage_records)
        md_rows: list[int] = []
        md_keys: list[str] = []
        md_vals: list[str] = []
        try:
            with_children = np.flatnonzero(pc.binary_length(pa.array(ch, pa.binary())).to_numpy(zero_copy_only=False))
            children = {int(i): ch[i] for i in with_children}
            for i in np.flatnonzero(~q_mask):
                i = int(i)
                rec = {"attributes": _attrs(attrs[i]), "metadata": {}}
                c = children.get(i)
                if c is not None:
                    pairs = _MD.findall(c)
                    if len(pairs) != c.count(b"<MetadataEntry"):
                        raise _Slow
                    for k, v in pairs:
                        rec["metadata"][_text(k)] = _text(v)
                x._category_record(rec)
            for i, c in children.items():
                if not q_mask[i]:
                    continue
                row = self._rows + int(q_rows[i])
                pairs = _MD.findall(c)
                if len(pairs) != c.count(b"<MetadataEntry"):
                    raise _Slow
                for k, v in pairs:
                    md_rows.append(row)
                    md_keys.append(_text(k))
                    md_vals.append(_text(v))
                if b"<Inst" in c:
                    beats = _BEAT.findall(c)
                    if len(beats) != c.count(b"<InstantaneousBeatsPerMinute"):
                        raise _Slow
                    a_ = _attrs(attrs[i])
                    entry = {"attributes": a_, "beats": [[_text(t), _text(bpm)] for bpm, t in beats]}
                    x._raw("record", _key(a_), entry)
        except _Slow:
            del x.out[n_out:], x.stage_records[n_stage:]
            raise
        except ParseError:
            del x.out[n_out:], x.stage_records[n_stage:]
            raise _Slow from None  # the exact path raises it with the position
        if q_mask.all():
            self._chunks.append(cols)
        elif q_mask.any():
            self._chunks.append(tuple(pc.filter(c, quantity) for c in cols))
        self._rows += int(q_mask.sum())
        self._fast_seen += n
        if md_rows:
            self._md[0].extend(md_rows)
            self._md[1].extend(md_keys)
            self._md[2].extend(md_vals)

    def _take_batch(self) -> RecordBatch:
        cols = [pa.concat_arrays([c[k] for c in self._chunks]) for k in range(7)]
        md_rows, md_keys, md_vals = self._md
        self._chunks, self._rows, self._md = [], 0, ([], [], [])
        try:
            columns = quantity_columns(*cols, md_rows=md_rows, md_keys=md_keys, md_vals=md_vals)
        except ConversionError as exc:
            raise ParseError(0, 0, f"quantity Record {exc.row + 1} of a batch: {exc}") from None
        return RecordBatch(Sample, columns)
