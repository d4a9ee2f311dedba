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
from datetime import UTC, date, datetime, tzinfo
from pathlib import Path
from typing import Any, get_type_hints
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from common.errors import ConfigError

SECRET_FIELDS = {"whoop_client_secret", "google_client_secret"}


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
    google_write: bool = False  # `rhythm auth google` also asks to write events (for `rhythm plan push google`)

    # Garmin Connect (optional live sync)
    garmin_api_base: str = "https://connectapi.garmin.com"
    garmin_days: int = 7

    # Calendar files
    ics_window_past_days: int = 730
    ics_window_future_days: int = 60

    # Health Auto Export pushes (`rhythm serve hae`, 127.0.0.1 only)
    hae_secret: str | None = None  # shared secret the app's REST automation sends (X-Rhythm-Secret header)
    hae_port: int = 8990
    hae_max_mb: float = 64.0  # larger request bodies get 413

    # Daemon
    sync_every_hours: float = 6.0
    morning_run_time: str = "07:00"

    # Write-back (`rhythm plan push google`, and the daemon after its morning plan)
    push_google_after_plan: bool = False  # the morning run pushes today's plan to Google Calendar
    push_calendar_id: str = "primary"  # the Google calendar Rhythm's blocks go into
    push_busy: bool = False  # pushed blocks show as busy (opaque), not free (transparent)

    # The day (rhythm recommend): waking hours come from the person's own nights unless set
    wake_time: str | None = None  # "HH:MM": the usual wake-up
    bed_time: str | None = None  # "HH:MM": the usual bedtime
    calendar_owner_emails: str | None = None  # comma-separated: whose "declined" in .ics invitations counts

    # Agent
    model_path: Path | None = None  # a local GGUF; default: the bundled student, else Bayesian
    agent_backend: str = "auto"  # auto | bayes | llm
    implicit_answers: bool = True  # read answers from what the data shows happened (docs/answers.md)

    token_backend: str = "file"  # file (0600 JSON in RHYTHM_HOME/tokens) | keyring | auto

    debug: bool = False

    # Settings that sources declare in their descriptor (connectors.registry), by name.
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    # Where each non-default value came from: "config", "env" or "flag".
    origins: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    def get(self, name: str) -> Any:
        """A setting by name: a built-in field, else one a source declared."""
        if name in _FIELD_NAMES:
            return getattr(self, name)
        if name in self.extra:
            return self.extra[name]
        declared = _declared()
        if name in declared:
            return declared[name]
        raise ConfigError(f"unknown setting {name!r}")

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
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _INTERNAL}
        values.update({k: self.extra.get(k, v) for k, v in _declared().items()})
        for name, v in values.items():
            if _is_secret(name) and v:
                v = "***"
            out[name] = str(v) if isinstance(v, Path) else v
        return out


_INTERNAL = {"extra", "origins"}
_FIELD_NAMES = frozenset(f.name for f in fields(Settings)) - _INTERNAL


def _is_secret(name: str) -> bool:
    return name in SECRET_FIELDS or name.endswith(("_secret", "_password", "_token"))


def _declared() -> dict[str, Any]:
    """Settings the registered sources declare (name -> default)."""
    from connectors.registry import declared_settings

    return declared_settings()


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
            word = str(raw).strip().lower()
            if word in {"1", "true", "yes", "on"}:
                return True
            if word in {"0", "false", "no", "off", ""}:
                return False
            raise ConfigError(f"setting {name}: expected true or false, got {raw!r}")
        if "int" in text and "float" not in text:
            return int(raw)
        if "float" in text:
            return float(raw)
        return str(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"setting {name}: cannot read {raw!r} as {text}") from None


# -- ranges: a value of the right type can still be impossible (issue 41) ------------------
#: (lowest, highest) for numeric settings, by name or by suffix ("_port", "_days", ...).
RANGES: dict[str, tuple[float, float]] = {
    "_port": (1, 65535),
    "_days": (0, 36_500),
    "garmin_days": (1, 3_650),
    "sync_every_hours": (0.25, 24 * 31),
    "hae_max_mb": (0.001, 4096),
}
CHOICES: dict[str, tuple[str, ...]] = {
    "agent_backend": ("auto", "bayes", "llm"),
    "token_backend": ("file", "keyring", "auto"),
}
CLOCK_TIMES = ("morning_run_time", "wake_time", "bed_time")


def _range_of(name: str) -> tuple[float, float] | None:
    if name in RANGES:
        return RANGES[name]
    return next((r for suffix, r in RANGES.items() if suffix.startswith("_") and name.endswith(suffix)), None)


def check_value(name: str, value: Any) -> None:
    """ConfigError (one line) if ``value``, already of the setting's type, is impossible:
    a number outside its range (a negative port, zero hours, NaN), an unknown time zone, a
    clock time that is not HH:MM, a choice not offered, a URL that is not http(s)."""
    import math

    if value is None:
        return
    if isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise ConfigError(f"setting {name}: {value!r} is not a finite number")
        bounds = _range_of(name)
        if bounds is not None and not bounds[0] <= value <= bounds[1]:
            lo, hi = bounds
            raise ConfigError(f"setting {name}: {value!r} is outside {lo:g} .. {hi:g}")
    elif isinstance(value, str):
        if name == "timezone":
            try:
                ZoneInfo(value)
            except (ZoneInfoNotFoundError, ValueError, OSError):
                raise ConfigError(f"setting timezone: unknown zone {value!r} (use an IANA name like "
                                  "Europe/Amsterdam)") from None
        elif name in CLOCK_TIMES:
            hh, sep, mm = value.partition(":")
            if not (sep and hh.isdigit() and mm.isdigit() and len(mm) == 2 and int(hh) < 24 and int(mm) < 60):
                raise ConfigError(f"setting {name}: expected a time as HH:MM, got {value!r}")
        elif name in CHOICES and value not in CHOICES[name]:
            raise ConfigError(f"setting {name}: {value!r} is not one of {', '.join(CHOICES[name])}")
        elif name.endswith(("_url", "_api_base")) and not value.startswith(("http://", "https://")):
            raise ConfigError(f"setting {name}: expected an http:// or https:// URL, got {value[:60]!r}")


def _flatten(doc: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for k, v in doc.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            flat.update(_flatten(v, key + "_"))
        else:
            flat[key] = v
    return flat


def _type_of(name: str, hints: dict[str, Any], declared: dict[str, Any]) -> Any:
    if name in hints:
        return hints[name]
    default = declared.get(name)
    return type(default) if default is not None else str


def load_settings(
    home: str | Path | None = None,
    env: dict[str, str] | None = None,
    **overrides: Any,
) -> Settings:
    env = dict(os.environ if env is None else env)
    home_path = Path(home or env.get("RHYTHM_HOME") or "~/.rhythm").expanduser()
    hints = get_type_hints(Settings)
    known = set(_FIELD_NAMES)
    declared = _declared()
    values: dict[str, Any] = {"home": home_path}
    extra: dict[str, Any] = {}
    origins: dict[str, str] = {}

    def put(name: str, raw: Any, origin: str) -> None:
        value = _coerce(name, raw, _type_of(name, hints, declared))
        try:
            check_value(name, value)
        except ConfigError as exc:
            where = {"config": str(cfg), "env": f"RHYTHM_{name.upper()}", "flag": "option"}[origin]
            raise ConfigError(f"{where}: {exc}") from None
        (values if name in known else extra)[name] = value
        origins[name] = origin

    cfg = home_path / "config.toml"
    for k, v in read_config(cfg).items():
        if (k not in known and k not in declared) or k == "home":
            raise ConfigError(f"{cfg}: unknown setting {k!r} (see `rhythm config show`)")
        put(k, v, "config")

    for name in (known | set(declared)) - {"home"}:
        var = f"RHYTHM_{name.upper()}"
        if var in env and env[var] != "":
            put(name, env[var], "env")
    if "RHYTHM_DB" in env and env["RHYTHM_DB"]:
        values["db_path"] = Path(env["RHYTHM_DB"]).expanduser()
        origins["db_path"] = "env"

    for k, v in overrides.items():
        if v is not None:
            if k not in known and k not in declared:
                raise ConfigError(f"unknown setting {k!r}")
            put(k, v, "flag")
    return Settings(**values, extra=extra, origins=origins)


def read_config(path: Path) -> dict[str, Any]:
    """config.toml as flat settings (``[whoop] api_base`` is ``whoop_api_base``); {} if absent."""
    if not path.exists():
        return {}
    try:
        doc = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    return _flatten(doc)


def set_config(settings: Settings, name: str, value: str | None) -> dict[str, Any]:
    """Write (or, with value None, remove) one setting in config.toml, keeping its comments
    and layout: inside the ``[section]`` whose name prefixes the setting when the file has
    one (``whoop_api_base`` -> ``[whoop] api_base``), else at the top level. The value is
    checked (type, time zone) before anything is written. Returns what was done."""
    import tomlkit

    hints = get_type_hints(Settings)
    declared = _declared()
    if name not in _FIELD_NAMES and name not in declared or name in ("home", "db_path", "debug"):
        raise ConfigError(f"unknown setting {name!r} (see `rhythm config show`)")
    path = settings.config_file
    text = path.read_text() if path.exists() else ""
    try:
        doc = tomlkit.parse(text)
    except Exception as exc:  # noqa: BLE001 - tomlkit raises its own ParseError family
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    typed = None if value is None else _coerce(name, value, _type_of(name, hints, declared))
    check_value(name, typed)  # the right type, but possible? (ranges, zones, HH:MM)
    if name == "timezone" and typed is not None:
        user_zone(replace(settings, timezone=typed))  # an unknown zone is refused here
    table, key = doc, name
    for section, item in list(doc.items()):
        if isinstance(item, dict) and name.startswith(section + "_"):
            table, key = item, name[len(section) + 1:]
            break
    for existing_table, existing_key in _locations(doc, name):  # no second copy anywhere
        if (existing_table, existing_key) != (table, key):
            del existing_table[existing_key]
    if typed is None:
        if key in table:
            del table[key]
    else:
        table[key] = str(typed) if isinstance(typed, Path) else typed
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(tomlkit.dumps(doc))
    os.replace(tmp, path)
    load_settings(home=settings.home)  # the file as written must load
    return {"setting": name, "value": typed, "file": str(path), "removed": value is None}


def _locations(doc: Any, name: str) -> list[tuple[Any, str]]:
    out = []
    if name in doc and not isinstance(doc[name], dict):
        out.append((doc, name))
    for section, item in doc.items():
        if isinstance(item, dict) and name.startswith(section + "_"):
            key = name[len(section) + 1:]
            if key in item:
                out.append((item, key))
    return out


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
# write = false                    # true: `rhythm auth google` also asks to write events (plan push)

[ics]
window_past_days = 730
window_future_days = 60

[daemon]
# sync_every_hours = 6.0
# morning_run_time = "07:00"

[push]
# google_after_plan = false        # the morning run also puts today's plan into Google Calendar
# calendar_id = "primary"          # (needs `rhythm auth google --write`)
# busy = false                     # blocks show as free unless true
"""


def init_home(settings: Settings) -> list[Path]:
    """Create RHYTHM_HOME with config.toml, tokens/ (0700) and logs/. Returns what it made."""
    made = []
    for d, mode in ((settings.home, 0o700), (settings.tokens_dir, 0o700), (settings.logs_dir, 0o700)):
        if not d.exists():
            d.mkdir(parents=True, mode=mode)
            made.append(d)
    if not settings.config_file.exists():
        fd = os.open(settings.config_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(DEFAULT_CONFIG)
        made.append(settings.config_file)
    return made


def user_zone(settings: Settings) -> tzinfo:
    """The person's time zone, resolved in one place for everything that says "today":
    ``settings.timezone`` (an IANA name), else this machine's zone (tzlocal: TZ, then
    /etc/localtime)."""
    if settings.timezone:
        try:
            return ZoneInfo(settings.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ConfigError(
                f"timezone: unknown zone {settings.timezone!r} (use an IANA name like Europe/Amsterdam)"
            ) from None
    import tzlocal

    try:  # read afresh: a laptop that travelled has a new zone (tzlocal caches the first answer)
        return tzlocal.reload_localzone()
    except Exception:  # noqa: BLE001 - a machine without a readable zone: UTC, not a crash
        return UTC


def local_now(settings: Settings, now: datetime | None = None) -> datetime:
    """Now (or ``now``) as an aware time in the person's zone."""
    return (now or datetime.now(UTC)).astimezone(user_zone(settings))


def local_today(settings: Settings, now: datetime | None = None) -> date:
    return local_now(settings, now).date()


def with_db(settings: Settings, db: str | Path | None) -> Settings:
    return settings if db is None else replace(settings, db_path=Path(db).expanduser())
