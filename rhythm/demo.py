"""The demo: a fresh RHYTHM_HOME, the migrated database, then each stage that exists.

Stages are added here as the product grows (import the bundled sample data, map, recommend,
report). The same library functions as the CLI commands, no second code path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from rhythm.settings import Settings, init_home
from storage import open_db


def run_demo(settings: Settings, home: Path, say: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    demo_settings = replace(settings, home=home, db_path=None)
    init_home(demo_settings)
    with open_db(demo_settings.database) as db:
        say(f"demo home {home}")
        info = db.info()
    return {"home": home, "db_info": info}
