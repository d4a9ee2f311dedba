"""Apple Health (HealthKit) export connector: `read_export(path, progress=None)`.

See README.md in this folder for what it pulls, how to export, quirks and the
source-priority rule for daily totals.
"""

from connectors.healthkit.reader import read_export

__all__ = ["read_export"]
