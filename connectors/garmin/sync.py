"""`rhythm sync garmin`: the optional Garmin Connect live sync (garminconnect's tokens).

``open_sync(ctx)`` fetches the days from the cursor minus a two-day lag (the first sync:
the last ``garmin_days`` days)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from connectors.registry import SyncContext

LAG_DAYS = 2


def token_dir(tokens_dir: Path) -> Path:
    return tokens_dir / "garmin"


def authorised(ctx: SyncContext) -> bool:
    d = token_dir(ctx.tokens_dir)
    return d.is_dir() and any(d.iterdir())


def open_sync(ctx: SyncContext) -> tuple[Iterator[Any], Callable[[], None]]:
    from connectors.garmin import live

    client = live.open_client(token_dir(ctx.tokens_dir), api_base=ctx.setting("garmin_api_base"), policy=ctx.policy)
    today = (ctx.now or datetime.now(UTC)).date()
    days = live.days_to_fetch(ctx.cursors.get(live.STREAM), today, ctx.setting("garmin_days"), LAG_DAYS)
    return live.fetch(days, client, now=ctx.now), lambda: None
