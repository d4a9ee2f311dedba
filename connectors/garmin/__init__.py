"""Garmin: FIT files (activity, monitoring, HRV, sleep...), the Garmin Connect account
export, and the optional live sync."""

from typing import Any

from connectors.registry import ApiSync, FileImport

SOURCES = (
    FileImport(
        name="garmin",
        label="Garmin",
        reader="connectors.garmin.reader:read_export",
        help="Garmin FIT files, a folder of them, or a Garmin Connect data export.",
        path_help="A FIT file, a folder of them, or a Garmin Connect data-export zip/folder.",
        record_source="garmin",
    ),
    ApiSync(
        name="garmin",
        label="Garmin Connect",
        opener="connectors.garmin.sync:open_sync",
        authorised="connectors.garmin.sync:authorised",
        default_stream="daily",
        record_source="garmin",
    ),
)


def __getattr__(name: str) -> Any:
    if name == "read_export":
        from connectors.garmin.reader import read_export

        return read_export
    raise AttributeError(name)


__all__ = ["SOURCES", "read_export"]
