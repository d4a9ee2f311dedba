"""connectors.http: retries, Retry-After, backoff bounds, 401 refresh, empty bodies."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from common.errors import ApiError, AuthError, RateLimited
from connectors.http import ApiClient, RetryPolicy, parse_retry_after
from tests.loopback import Loopback, Reply, loopback_fixture  # noqa: F401


def fast(waits: list[float], retries: int = 3) -> RetryPolicy:
    return RetryPolicy(max_retries=retries, sleep=waits.append, jitter=False, backoff_base_s=0.5)


class Tokens:
    def __init__(self) -> None:
        self.current = "t1"
        self.refreshed = 0

    def access_token(self) -> str:
        return self.current

    def refresh(self) -> str:
        self.refreshed += 1
        self.current = f"t{self.refreshed + 1}"
        return self.current


def test_429_with_retry_after_seconds_then_success(loopback: Loopback):
    loopback.route("GET", "/x", [Reply(429, headers={"Retry-After": "7"}), Reply.json({"ok": 1})])
    waits: list[float] = []
    with ApiClient(loopback.url, name="whoop", policy=fast(waits)) as c:
        assert c.get_json("/x") == {"ok": 1}
    assert waits == [7.0]
    assert len(loopback.calls("GET", "/x")) == 2


def test_retry_after_is_capped(loopback: Loopback):
    loopback.route("GET", "/x", [Reply(429, headers={"Retry-After": "86400"}), Reply.json([])])
    waits: list[float] = []
    policy = RetryPolicy(max_retries=2, sleep=waits.append, max_retry_after_s=60)
    with ApiClient(loopback.url, name="whoop", policy=policy) as c:
        assert c.get_json("/x") == []
    assert waits == [60]


def test_rate_limit_reset_header_used_without_retry_after(loopback: Loopback):
    loopback.route("GET", "/x", [Reply(429, headers={"X-RateLimit-Reset": "12"}), Reply.json({})])
    waits: list[float] = []
    with ApiClient(loopback.url, name="whoop", policy=fast(waits)) as c:
        c.get_json("/x")
    assert waits == [12.0]


def test_retry_after_http_date():
    now = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after("Fri, 01 May 2026 12:00:30 GMT", now=now) == 30.0
    assert parse_retry_after("Fri, 01 May 2026 11:00:00 GMT", now=now) == 0.0
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None


def test_429_storm_raises_rate_limited(loopback: Loopback):
    loopback.route("GET", "/x", Reply(429))
    waits: list[float] = []
    with ApiClient(loopback.url, name="whoop", policy=fast(waits, retries=2)) as c, pytest.raises(RateLimited) as e:
        c.get_json("/x")
    assert len(loopback.calls()) == 3
    assert "\n" not in str(e.value) and "429" in str(e.value)


def test_500_storm_exhausts_bounded_retries_with_exponential_backoff(loopback: Loopback):
    loopback.route("GET", "/v2/cycle", Reply(500))
    waits: list[float] = []
    with ApiClient(loopback.url, name="whoop", policy=fast(waits, retries=4)) as c, pytest.raises(ApiError) as e:
        c.get_json("/v2/cycle", {"start": "x", "nextToken": "secret-ish"})
    assert len(loopback.calls()) == 5  # first try + 4 retries, then stop
    assert waits == [0.5, 1.0, 2.0, 4.0]
    msg = str(e.value)
    assert msg == "whoop: GET /v2/cycle kept failing (HTTP 500) after 4 retries"


def test_jitter_stays_under_the_exponential_cap():
    p = RetryPolicy(backoff_base_s=1.0, backoff_max_s=5.0)
    for attempt in range(1, 8):
        assert 0 <= p.backoff(attempt) <= min(5.0, 2 ** (attempt - 1))


def test_5xx_then_success(loopback: Loopback):
    loopback.route("GET", "/x", [Reply(503), Reply(502), Reply.json({"a": 1})])
    waits: list[float] = []
    with ApiClient(loopback.url, name="google", policy=fast(waits)) as c:
        assert c.get_json("/x") == {"a": 1}
    assert len(waits) == 2


def test_dropped_connections_are_retried_then_fail(loopback: Loopback):
    loopback.route("GET", "/x", Reply.drop())
    waits: list[float] = []
    with ApiClient(loopback.url, name="whoop", policy=fast(waits, retries=2)) as c, pytest.raises(ApiError) as e:
        c.get_json("/x")
    assert "could not connect" in str(e.value)
    assert len(waits) == 2


def test_empty_body_is_no_data(loopback: Loopback):
    loopback.route("GET", "/hrv", Reply.empty(204))
    loopback.route("GET", "/blank", Reply(200, b""))
    with ApiClient(loopback.url, name="garmin", policy=fast([])) as c:
        assert c.get_json("/hrv") is None
        assert c.get_json("/blank") is None


def test_401_refreshes_once_and_repeats(loopback: Loopback):
    tokens = Tokens()
    loopback.route(
        "GET", "/x",
        lambda req: Reply.json({"ok": True}) if req.bearer == "t2" else Reply(401),
    )
    with ApiClient(loopback.url, name="whoop", tokens=tokens, policy=fast([])) as c:
        assert c.get_json("/x") == {"ok": True}
    assert tokens.refreshed == 1
    assert [r.bearer for r in loopback.calls()] == ["t1", "t2"]


def test_second_401_is_an_auth_error_without_the_token(loopback: Loopback):
    tokens = Tokens()
    loopback.route("GET", "/x", Reply(401))
    with ApiClient(loopback.url, name="whoop", tokens=tokens, policy=fast([])) as c, pytest.raises(AuthError) as e:
        c.get_json("/x")
    assert tokens.refreshed == 1
    assert "rhythm auth whoop" in str(e.value)
    assert "t1" not in str(e.value) and "t2" not in str(e.value)


def test_404_is_not_retried(loopback: Loopback):
    loopback.route("GET", "/x", Reply(404))
    waits: list[float] = []
    with ApiClient(loopback.url, name="whoop", policy=fast(waits)) as c, pytest.raises(ApiError):
        c.get_json("/x")
    assert waits == [] and len(loopback.calls()) == 1


def test_non_json_body_is_an_api_error(loopback: Loopback):
    loopback.route("GET", "/x", Reply(200, b"<html>maintenance</html>"))
    with ApiClient(loopback.url, name="whoop", policy=fast([])) as c, pytest.raises(ApiError) as e:
        c.get_json("/x")
    assert "not JSON" in str(e.value)


def test_a_body_cut_mid_response_is_retried_then_named_as_such(loopback: Loopback):
    whole = Reply.json({"records": list(range(500))})
    loopback.route("GET", "/x", [Reply.cut(whole, 40), whole])
    waits: list[float] = []
    with ApiClient(loopback.url, name="whoop", policy=fast(waits, retries=2)) as c:
        assert c.get_json("/x") == {"records": list(range(500))}
    assert len(waits) == 1
    loopback.route("GET", "/y", Reply.cut(whole, 40))
    with ApiClient(loopback.url, name="whoop", policy=fast([], retries=2)) as c, pytest.raises(ApiError) as e:
        c.get_json("/y")
    assert str(e.value) == "whoop: GET /y connection dropped mid-response after 2 retries"
