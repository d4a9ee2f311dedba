"""MCP tools refuse impossible days in one line (issue 41): days 0001 and 9999 (which made
Python's date arithmetic overflow into "Error executing tool"), and planning a day with no
stored plan far from the person's data and today (a plan stored for 1900). The database is
unchanged."""

from __future__ import annotations

import pytest

from common.errors import ConfigError
from rhythm.mcp import tools
from rhythm.mcp.server import _line
from rhythm.settings import load_settings
from tests.hostile.conftest import Sealed, snapshot

CALLS = [
    ("get-meters-0001", lambda s: tools.get_meters(s, "0001-01-01"), "outside the accepted range"),
    ("get-meters-9999", lambda s: tools.get_meters(s, "9999-12-31", 3), "outside the accepted range"),
    ("get-plan-0001", lambda s: tools.get_plan(s, "0001-01-01"), "outside the accepted range"),
    ("get-plan-9999", lambda s: tools.get_plan(s, "9999-12-31"), "outside the accepted range"),
    ("get-plan-1900", lambda s: tools.get_plan(s, "1900-01-01"), "too far from your data and today to plan"),
    ("get-plan-2100", lambda s: tools.get_plan(s, "2100-12-31"), "too far from your data and today to plan"),
    ("get-insights-since-0001", lambda s: tools.get_insights(s, None, "0001-01-01"), "since: 0001-01-01 is outside"),
    ("get-insights-since-9999", lambda s: tools.get_insights(s, None, "9999-01-01"), "since: 9999-01-01 is outside"),
]


@pytest.mark.parametrize(("case", "call", "says"), CALLS, ids=[c[0] for c in CALLS])
def test_mcp_tools_refuse_impossible_days_in_one_line(case, call, says, sealed: Sealed):
    before = snapshot(sealed.db)
    with pytest.raises(ConfigError) as caught:
        call(load_settings())
    line = _line(caught.value)
    assert says in line and "\n" not in str(caught.value)
    assert snapshot(sealed.db) == before
