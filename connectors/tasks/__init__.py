"""Tasks as progress evidence: completed tasks from a tasks CSV or Google Takeout's
Tasks.json (``read_export``) and from the Google Tasks API v1 (``rhythm sync google_tasks``)."""

from typing import Any

from connectors.registry import ApiSync, FileImport

SOURCES = (
    FileImport(
        name="tasks",
        label="Tasks",
        reader="connectors.tasks.csv_export:read_export",
        help="Completed tasks: a tasks CSV (TickTick, Things, OmniFocus ... or title,completed_at) or Google Takeout's Tasks.json.",
        path_help="A tasks .csv or Tasks.json file, or a folder or zip of them.",
        record_source="tasks",
        options={"zone": "timezone"},
    ),
    ApiSync(
        name="google_tasks",
        label="Google Tasks",
        opener="connectors.tasks.google_sync:open_sync",
        authorised="connectors.tasks.google_sync:authorised",
        default_stream="tasklists",
        record_source="tasks",
        settings={
            "google_tasks": False,  # `rhythm auth google` asks for the tasks scope; `rhythm sync` includes it
            "google_tasks_api_base": "https://tasks.googleapis.com/",
        },
    ),
)


def __getattr__(name: str) -> Any:
    if name == "read_export":
        from connectors.tasks.csv_export import read_export

        return read_export
    raise AttributeError(name)


__all__ = ["SOURCES", "read_export"]
