"""WHOOP: the app's CSV data export (``read_export``)."""

from connectors.whoop.csv_export import read_export

__all__ = ["read_export"]
