"""Settings: defaults < config.toml < environment < flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.errors import ConfigError
from rhythm.settings import init_home, load_settings


def test_defaults(tmp_path):
    s = load_settings(home=tmp_path, env={})
    assert s.database == tmp_path / "rhythm.duckdb"
    assert s.whoop_api_base == "https://api.prod.whoop.com/developer"


def test_config_sections_then_env_then_overrides(tmp_path):
    (tmp_path / "config.toml").write_text(
        '[whoop]\napi_base = "http://127.0.0.1:9/w"\nlag_days = 5\n[ics]\nwindow_future_days = 10\n'
    )
    s = load_settings(home=tmp_path, env={})
    assert (s.whoop_api_base, s.whoop_lag_days, s.ics_window_future_days) == ("http://127.0.0.1:9/w", 5, 10)
    s = load_settings(home=tmp_path, env={"RHYTHM_WHOOP_LAG_DAYS": "2", "RHYTHM_GOOGLE_API_BASE": "http://x"})
    assert s.whoop_lag_days == 2 and s.google_api_base == "http://x"
    s = load_settings(home=tmp_path, env={}, db_path="/tmp/o.duckdb")
    assert s.database == Path("/tmp/o.duckdb")


def test_default_config_file_loads(tmp_path):
    s = load_settings(home=tmp_path, env={})
    init_home(s)
    assert load_settings(home=tmp_path, env={}).whoop_lag_days == 3


@pytest.mark.parametrize("text, match", [
    ("whoop_lag_days = [", "invalid TOML"),
    ("no_such_thing = 1", "unknown setting"),
    ("whoop_lag_days = 'many'", "cannot read"),
    ("implicit_answers = 'sometimes'", "expected true or false"),
])
def test_bad_config_is_a_clear_error(tmp_path, text, match):
    (tmp_path / "config.toml").write_text(text)
    with pytest.raises(ConfigError, match=match):
        load_settings(home=tmp_path, env={})


def test_secrets_are_masked_in_public_view(tmp_path):
    s = load_settings(home=tmp_path, env={"RHYTHM_WHOOP_CLIENT_SECRET": "s3cret"})
    assert s.whoop_client_secret == "s3cret"
    assert "s3cret" not in str(s.public())


def test_bad_config_via_cli_is_one_line(run_cli, rhythm_home):
    (rhythm_home / "config.toml").write_text("whoop_lag_days = [")
    code, _, err = run_cli("db", "info")
    assert code == 2 and "invalid TOML" in err and "Traceback" not in err


@pytest.mark.parametrize(("word", "value"), [("yes", True), ("ON", True), ("1", True), ("false", False),
                                            ("off", False), ("0", False)])
def test_a_boolean_setting_reads_the_usual_words(tmp_path, word, value):
    s = load_settings(home=tmp_path, env={"RHYTHM_IMPLICIT_ANSWERS": word})
    assert s.implicit_answers is value
