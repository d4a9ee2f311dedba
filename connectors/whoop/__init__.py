"""WHOOP: the app's CSV data export (``read_export``) and the API v2 sync."""

from typing import Any

from connectors.registry import ApiSync, FileImport

SOURCES = (
    FileImport(
        name="whoop",
        label="WHOOP",
        reader="connectors.whoop.csv_export:read_export",
        help="WHOOP app CSV export (cycles, sleeps, workouts, journal).",
        path_help="WHOOP app CSV export: the zip or the unzipped folder.",
        record_source="whoop",
    ),
    ApiSync(
        name="whoop",
        label="WHOOP",
        opener="connectors.whoop.sync:open_sync",
        authorised="connectors.whoop.sync:authorised",
        default_stream="cycle",
        record_source="whoop",
    ),
)


def __getattr__(name: str) -> Any:
    if name == "read_export":
        from connectors.whoop.csv_export import read_export

        return read_export
    raise AttributeError(name)


__all__ = ["SOURCES", "read_export"]
