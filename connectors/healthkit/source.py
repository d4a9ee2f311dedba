"""Find the export XML (plain file or inside export.zip) and stream it in chunks.

The main XML inside the zip is located by shape, not name: phones in other locales write
`导出.xml`, `Export.xml`, ... So: the largest `*.xml` under `apple_health_export/` (or
anywhere, for re-zipped exports) that is not the CDA document (`export_cda.xml` or its
localised twin, recognised by its `<ClinicalDocument` root) and whose root is `HealthData`.
"""

from __future__ import annotations

import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from common.errors import SourceFormatError
from connectors.files import GiB, check_member, files_under, input_path, too_large

CHUNK = 2 << 20  # 2 MiB per read: big enough for speed, small enough for flat memory
# The export XML inside a zip is refused past this size (declared, and counted while it is
# streamed): twice the largest exports reported (3.9-4 GB of XML, ~10 M Records); a zip
# bomb is stopped after at most this much parsing. An XML file given directly is not capped
# (it is on disk already, and streamed): unzip a bigger export and import its export.xml.
MAX_ZIPPED_XML = 8 * GiB


@dataclass(frozen=True)
class XmlSource:
    """One export XML: where it is, how big it is (uncompressed), and a name for errors."""

    path: Path  # the file given by the user
    member: str | None  # name inside the zip, or None for a plain XML file
    size: int  # uncompressed bytes of the XML
    file_size: int  # bytes on disk of `path` (what the progress bar counts)

    @property
    def label(self) -> str:
        return f"{self.path}" if self.member is None else f"{self.path} [{self.member}]"


def locate(path: str | Path) -> XmlSource:
    """The export XML in `path` (an export.zip or an export.xml)."""
    p = input_path(path)
    if p.is_dir():
        xmls = [f for f in files_under(p) if f.suffix.lower() == ".xml"]
        candidates = sorted(xmls, key=lambda f: f.stat().st_size, reverse=True)
        for f in candidates:
            with f.open("rb") as fh:
                head = fh.read(65536)
            if _looks_like_export(head):
                return XmlSource(f, None, f.stat().st_size, f.stat().st_size)
        raise SourceFormatError(str(p), "no Apple Health export XML (root <HealthData>) in this folder")
    file_size = p.stat().st_size
    if not zipfile.is_zipfile(p):
        with p.open("rb") as fh:
            head = fh.read(4)
        if head.startswith(b"PK"):
            raise SourceFormatError(str(p), "damaged or truncated zip (no central directory)")
        return XmlSource(p, None, file_size, file_size)
    try:
        with zipfile.ZipFile(p) as zf:
            infos = [
                i
                for i in zf.infolist()
                if not i.is_dir()
                and i.filename.lower().endswith(".xml")
                and "__MACOSX" not in i.filename
                and not i.filename.rsplit("/", 1)[-1].startswith("._")
            ]
            infos.sort(key=lambda i: (not _in_export_dir(i.filename), -i.file_size))
            for info in infos:
                if info.filename.rsplit("/", 1)[-1].lower() == "export_cda.xml":
                    continue
                try:
                    with zf.open(info) as fh:
                        head = fh.read(65536)
                except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:
                    raise SourceFormatError(
                        f"{p} [{info.filename}]", f"damaged or truncated zip: {exc}"
                    ) from None
                if _looks_like_export(head):
                    check_member(info, MAX_ZIPPED_XML, f"{p} [{info.filename}]", "the export XML")
                    return XmlSource(p, info.filename, info.file_size, file_size)
    except zipfile.BadZipFile as exc:
        raise SourceFormatError(str(p), f"damaged or truncated zip: {exc}") from None
    raise SourceFormatError(
        str(p), "no Apple Health export XML (a *.xml with root <HealthData>) found in the zip"
    )


def _in_export_dir(name: str) -> bool:
    return name.startswith("apple_health_export/") or "/apple_health_export/" in name


def _looks_like_export(head: bytes) -> bool:
    """True if the document's root element is HealthData (skipping prolog, DTD, comments)."""
    if b"<ClinicalDocument" in head[:4096]:
        return False
    if b"<HealthData" in head:
        return True
    # The inline DTD can exceed the peek window; accept its declaration of HealthData.
    return b"<!DOCTYPE HealthData" in head


def chunks(src: XmlSource) -> Iterator[tuple[bytes, int]]:
    """(chunk, uncompressed bytes read so far). Errors name the file and byte offset."""
    done = 0
    if src.member is None:
        with src.path.open("rb") as fh:
            while chunk := fh.read(CHUNK):
                done += len(chunk)
                yield chunk, done
        return
    try:
        with zipfile.ZipFile(src.path) as zf, zf.open(src.member) as fh:
            while True:
                try:
                    chunk = fh.read(CHUNK)
                except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:
                    raise SourceFormatError(
                        src.label,
                        f"damaged or truncated zip: {exc}",
                        f"after {done} uncompressed bytes",
                    ) from None
                if not chunk:
                    break
                done += len(chunk)
                if done > MAX_ZIPPED_XML:
                    raise too_large(src.label, MAX_ZIPPED_XML, "the export XML", f"after {done} uncompressed bytes")
                yield chunk, done
    except zipfile.BadZipFile as exc:
        raise SourceFormatError(str(src.path), f"damaged or truncated zip: {exc}") from None
