"""Health Auto Export (the iOS app that exports Apple Health as JSON or CSV on a schedule).

``rhythm import hae PATH`` reads its files (``read_export``); ``rhythm serve hae`` receives
its REST API automation's pushes and hands each to the same reader. See README.md in this
folder: what it pulls, how to set up the app, quirks, field mapping, figures.
"""

from typing import Any

from connectors.registry import FileImport

SOURCES = (
    FileImport(
        name="hae",
        label="Health Auto Export",
        reader="connectors.hae.reader:read_export",
        help="Health Auto Export JSON or CSV files (a file, a zip, or a folder of daily files).",
        path_help="A Health Auto Export .json or .csv file, a zip of them, or a folder of them.",
        record_source="hae",
        options={"zone": "timezone"},  # CSV wall times have no offset: the person's zone
    ),
)


def __getattr__(name: str) -> Any:  # the reader loads numpy and pyarrow: only when used
    if name == "read_export":
        from connectors.hae.reader import read_export

        return read_export
    raise AttributeError(name)


__all__ = ["SOURCES", "read_export"]
