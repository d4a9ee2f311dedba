"""`rhythm config set` refuses values of the right type that are impossible (issue 41): they
were written and later crashed `serve` or `import`. One line, config.toml and the database as
before; the same value written by hand into config.toml, or given in the environment, is
refused in one line naming where it came from."""

from __future__ import annotations

import pytest

from tests.hostile.conftest import Sealed, snapshot

BAD = [
    ("hae_port", "-1", "outside 1 .. 65535"),
    ("hae_port", "0", "outside 1 .. 65535"),
    ("hae_port", "70000", "outside 1 .. 65535"),
    ("whoop_redirect_port", "-8765", "outside 1 .. 65535"),
    ("sync_every_hours", "0", "outside 0.25 .. 744"),
    ("sync_every_hours", "-6", "outside 0.25 .. 744"),
    ("sync_every_hours", "nan", "not a finite number"),
    ("sync_every_hours", "inf", "not a finite number"),
    ("hae_max_mb", "0", "outside"),
    ("hae_max_mb", "-64", "outside"),
    ("google_window_past_days", "-1", "outside 0 .. 36500"),
    ("garmin_days", "0", "outside 1 .. 3650"),
    ("timezone", "Mars/Olympus_Mons", "unknown zone 'Mars/Olympus_Mons'"),
    ("timezone", "../../etc/passwd", "unknown zone"),
    ("morning_run_time", "25:00", "expected a time as HH:MM"),
    ("wake_time", "seven", "expected a time as HH:MM"),
    ("agent_backend", "gpt", "is not one of auto, bayes, llm"),
    ("token_backend", "plaintext", "is not one of file, keyring, auto"),
    ("whoop_api_base", "file:///etc/passwd", "expected an http:// or https:// URL"),
]


@pytest.mark.parametrize(("name", "value", "says"), BAD, ids=[f"{n}={v}" for n, v, _ in BAD])
def test_config_set_refuses_impossible_values(name, value, says, sealed: Sealed):
    cfg = sealed.home / "config.toml"
    kept = cfg.read_bytes() if cfg.exists() else None
    before = snapshot(sealed.db)
    rc, _out, err = sealed.run_cli("config", "set", "--", name, value)  # "--": a value may start with "-"
    lines = err.strip().splitlines()
    assert rc != 0 and len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], err
    assert (cfg.read_bytes() if cfg.exists() else None) == kept
    assert snapshot(sealed.db) == before


@pytest.mark.parametrize(("how"), ["config-file", "environment"])
def test_an_impossible_value_already_set_is_one_line_naming_where(how, sealed: Sealed, monkeypatch):
    if how == "config-file":
        (sealed.home / "config.toml").write_text("sync_every_hours = 0\n")
        where = "config.toml"
    else:
        monkeypatch.setenv("RHYTHM_HAE_PORT", "-1")
        where = "RHYTHM_HAE_PORT"
    before = snapshot(sealed.db)
    rc, _out, err = sealed.run_cli("status")
    lines = err.strip().splitlines()
    assert rc != 0 and len(lines) == 1 and where in lines[0] and "outside" in lines[0], err
    assert snapshot(sealed.db) == before


def test_possible_values_are_still_written(sealed: Sealed):
    for name, value in (("hae_port", "8991"), ("sync_every_hours", "0.5"), ("timezone", "Asia/Kathmandu"),
                        ("morning_run_time", "06:45"), ("agent_backend", "bayes")):
        rc, _out, err = sealed.run_cli("config", "set", name, value)
        assert rc == 0, err
    text = (sealed.home / "config.toml").read_text()
    assert "8991" in text and "Asia/Kathmandu" in text and "06:45" in text
