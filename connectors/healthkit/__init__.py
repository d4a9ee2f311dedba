"""Apple Health (HealthKit) export connector: `read_export(path, progress=None)`.

See README.md in this folder for what it pulls, how to export, quirks and the
source-priority rule for daily totals.
"""

from typing import Any

from connectors.registry import FileImport

SOURCES = (
    FileImport(
        name="healthkit",
        label="Apple Health",
        reader="connectors.healthkit.reader:read_export",
        help="Apple Health export.zip or export.xml (streamed; any size).",
        path_help="Apple Health export.zip or export.xml.",
        record_source="healthkit",
    ),
)


def __getattr__(name: str) -> Any:  # the reader loads numpy and pyarrow: only when used
    if name == "read_export":
        from connectors.healthkit.reader import read_export

        return read_export
    raise AttributeError(name)


__all__ = ["SOURCES", "read_export"]
