"""The loopback servers (lab.loopback) for tests: the `loopback` fixture starts one and stops
it after the test (import `loopback_fixture`, then ask for `loopback`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lab.loopback import Loopback, Reply, Request

__all__ = ["Loopback", "Reply", "Request", "loopback_fixture"]


@pytest.fixture(name="loopback")
def loopback_fixture() -> Iterator[Loopback]:
    """Use as `from tests.loopback import loopback_fixture  # noqa: F401`, then ask for `loopback`."""
    with Loopback() as srv:
        yield srv
