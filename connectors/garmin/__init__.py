"""Garmin: FIT files (activity, monitoring, HRV, sleep...) and the Garmin Connect account export."""

from connectors.garmin.reader import read_export

__all__ = ["read_export"]
