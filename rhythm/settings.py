"""One typed settings object: defaults < RHYTHM_HOME/config.toml < environment < CLI flags.

Loaded once at the entry point and passed down (STYLE rule 13); nothing happens at import.

config.toml may be flat (``whoop_api_base = "..."``) or sectioned (``[whoop] api_base =
"..."``); both name the field ``whoop_api_base``. Every field can be set by the environment
variable ``RHYTHM_<FIELD>`` (e.g. ``RHYTHM_WHOOP_API_BASE``). Secrets (client secrets) are
read from the environment or config but never shown by ``Settings.public()``.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, get_type_hints

from common.errors import ConfigError

SECRET_FIELDS = {"whoop_client_secret", "google_client_secret"}
SYNC_SOURCES = ("whoop", "google", "garmin")  # the API sources `rhythm sync` knows


@dataclass(frozen=True)
class Settings:
    home: Path = field(default_factory=lambda: Path("~/.rhythm").expanduser())
    db_path: Path | None = None  # default: home / "rhythm.duckdb"
    timezone: str | None = None  # IANA name; default: the machine's local zone

    # WHOOP API v2
    whoop_api_base: str = "https://api.prod.whoop.com/developer"
    whoop_auth_url: str = "https://api.prod.whoop.com/oauth/oauth2/auth"
    whoop_token_url: str = "https://api.prod.whoop.com/oauth/oauth2/token"
    whoop_client_id: str | None = None
    whoop_client_secret: str | None = None
    whoop_lag_days: int = 3
    whoop_redirect_port: int = 8765  # must match the redirect URL registered with the WHOOP app

    # Google Calendar API v3
    google_api_base: str = "https://www.googleapis.com/calendar/v3"
    google_auth_url: str = "https://accounts.google.com/o/oauth2/auth"
    google_token_url: str = "https://oauth2.googleapis.com/token"
    google_client_id: str | None = None
    google_client_secret: str | None = None
    google_client_secrets_file: Path | None = None
    google_window_past_days: int = 730

    # Garmin Connect (optional live sync)
    garmin_api_base: str = "https://connectapi.garmin.com"
    garmin_days: int = 7

    # Calendar files
    ics_window_past_days: int = 730
    ics_window_future_days: int = 60

    # Daemon
    sync_every_hours: float = 6.0
    morning_run_time: str = "07:00"

    # Agent
    model_path: Path | None = None  # a local GGUF; default: the bundled student, else Bayesian
    agent_backend: str = "auto"  # auto | bayes | llm

    token_backend: str = "file"  # file (0600 JSON in RHYTHM_HOME/tokens) | keyring | auto

    debug: bool = False

    @property
    def database(self) -> Path:
        return self.db_path or self.home / "rhythm.duckdb"

    @property
    def config_file(self) -> Path:
        return self.home / "config.toml"

    @property
    def tokens_dir(self) -> Path:
        return self.home / "tokens"

    @property
    def logs_dir(self) -> Path:
        return self.home / "logs"

    def public(self) -> dict[str, Any]:
        """Settings safe to show: secrets masked."""
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name in SECRET_FIELDS and v:
                v = "***"
            out[f.name] = str(v) if isinstance(v, Path) else v
        return out


def _coerce(name: str, raw: Any, typ: Any) -> Any:
    text = str(typ)
    try:
        if raw is None:
            return None
        if "Path" in text:
            return Path(str(raw)).expanduser()
        if "bool" in text:
            if isinstance(raw, bool):
                return raw
            return str(raw).strip().lower() in {"1", "true", "yes", "on"}
        if "int" in text and "float" not in text:
            return int(raw)
        if "float" in text:
            return float(raw)
        return str(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"setting {name}: cannot read {raw!r} as {text}") from None


def _flatten(doc: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for k, v in doc.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            flat.update(_flatten(v, key + "_"))
        else:
            flat[key] = v
    return flat


def load_settings(
    home: str | Path | None = None,
    env: dict[str, str] | None = None,
    **overrides: Any,
) -> Settings:
    env = dict(os.environ if env is None else env)
    home_path = Path(home or env.get("RHYTHM_HOME") or "~/.rhythm").expanduser()
    hints = get_type_hints(Settings)
    known = {f.name for f in fields(Settings)}
    values: dict[str, Any] = {"home": home_path}

    cfg = home_path / "config.toml"
    if cfg.exists():
        try:
            doc = tomllib.loads(cfg.read_text())
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{cfg}: invalid TOML: {exc}") from None
        for k, v in _flatten(doc).items():
            if k not in known or k == "home":
                raise ConfigError(f"{cfg}: unknown setting {k!r}")
            values[k] = _coerce(k, v, hints[k])

    for name in known - {"home"}:
        var = f"RHYTHM_{name.upper()}"
        if var in env and env[var] != "":
            values[name] = _coerce(name, env[var], hints[name])
    if "RHYTHM_DB" in env and env["RHYTHM_DB"]:
        values["db_path"] = Path(env["RHYTHM_DB"]).expanduser()

    for k, v in overrides.items():
        if v is not None:
            if k not in known:
                raise ConfigError(f"unknown setting {k!r}")
            values[k] = _coerce(k, v, hints[k])
    return Settings(**values)


DEFAULT_CONFIG = """\
# Rhythm settings. Every key can also be set as an environment variable RHYTHM_<KEY>.
# Secrets (client secrets) are better kept in the environment or the OS keyring.

# timezone = "Europe/Amsterdam"     # default: this machine's zone

[whoop]
# client_id = ""
# api_base = "https://api.prod.whoop.com/developer"
lag_days = 3

[google]
# client_secrets_file = "~/Downloads/client_secret.json"
window_past_days = 730

[ics]
window_past_days = 730
window_future_days = 60

[daemon]
# sync_every_hours = 6.0
# morning_run_time = "07:00"
"""


def init_home(settings: Settings) -> list[Path]:
    """Create RHYTHM_HOME with config.toml, tokens/ (0700) and logs/. Returns what it made."""
    made = []
    for d, mode in ((settings.home, 0o700), (settings.tokens_dir, 0o700), (settings.logs_dir, 0o700)):
        if not d.exists():
            d.mkdir(parents=True, mode=mode)
            made.append(d)
    if not settings.config_file.exists():
        settings.config_file.write_text(DEFAULT_CONFIG)
        made.append(settings.config_file)
    return made


def with_db(settings: Settings, db: str | Path | None) -> Settings:
    return settings if db is None else replace(settings, db_path=Path(db).expanduser())
