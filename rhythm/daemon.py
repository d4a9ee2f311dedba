"""The daemon: scheduled API syncs, the map step after each, and the morning plan.

Built from settings (``sync_every_hours``, ``morning_run_time``, ``timezone``):

- one ``sync:<source>`` job per configured API source (IntervalTrigger every N hours): sync
  that source, then rebuild meters and slot actions (``map_step``);
- one ``morning`` job (CronTrigger at ``morning_run_time`` in the person's zone): sync every
  source, map, then the recommendation for today (``recommend_step``), so the plan sees
  last night's sleep; with ``push_google_after_plan``, the plan then goes into Google
  Calendar (``push_step``: ``push_calendar_id``, free unless ``push_busy``).

Every job: ``coalesce=True`` (missed runs collapse into one), ``max_instances=1`` and a
misfire grace time (a laptop that slept through 07:00 still gets its plan at 09:00). Jobs
run one at a time on a single worker thread: DuckDB has one writer.

The daemon holds the writer lock (rhythm.lock) for its whole life, so it is the only
writer while it runs; a manual ``rhythm import`` gets "database busy". It logs to
RHYTHM_HOME/logs/daemon.log (rotated; secrets redacted), and SIGTERM/SIGINT shut it down
cleanly: running jobs finish, the lock is released, the exit code is 0.

The daemon only schedules: every job runs the units of work of ``rhythm.jobs`` (``sync``,
``map_data``, ``recommend``, ``push_google``), the same functions the CLI commands call. ``run_cycle`` does
one full cycle now (``rhythm daemon --once``, handy for cron); a failing source is logged
and recorded and the others go on.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from datetime import UTC, date, datetime, timedelta
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import Any

from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_EXECUTED, EVENT_JOB_MISSED

from common.errors import ConfigError, RhythmError, StorageError
from rhythm import jobs, lock, runner
from rhythm.settings import Settings, local_today, user_zone
from storage import open_db, runs

log = logging.getLogger("rhythm.daemon")

MORNING_JOB = "morning"
SYNC_MISFIRE_GRACE_S = 3600  # a sync that could not start within an hour waits for the next one
MORNING_MISFIRE_GRACE_S = 6 * 3600  # the plan is still useful until early afternoon
LOG_FILE = "daemon.log"
LOG_MAX_BYTES = 1_000_000
LOG_BACKUPS = 5
STATE_FILE = "daemon.json"


# -- results -------------------------------------------------------------------------------
@dataclass
class JobResult:
    job: str  # "sync:whoop", "map", "recommend", "push:google"
    stage: str  # sync | map | recommend | push
    ok: bool
    error: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    plan: Any = field(default=None, repr=False)  # the recommend stage's Plan object

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "plan"}


# -- time ----------------------------------------------------------------------------------
def morning_time(settings: Settings) -> tuple[int, int]:
    m = re.fullmatch(r"\s*(\d{1,2}):(\d{2})\s*", settings.morning_run_time or "")
    if not m or int(m.group(1)) > 23 or int(m.group(2)) > 59:
        raise ConfigError(f"morning_run_time: expected HH:MM, got {settings.morning_run_time!r}")
    return int(m.group(1)), int(m.group(2))


def sync_interval(settings: Settings) -> timedelta:
    if not settings.sync_every_hours or settings.sync_every_hours <= 0:
        raise ConfigError(f"sync_every_hours: must be > 0, got {settings.sync_every_hours!r}")
    return timedelta(hours=settings.sync_every_hours)


# -- the stages: rhythm.jobs, guarded -----------------------------------------------------
def _plain(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return _plain(asdict(value))
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Path):
        return str(value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def map_step(settings: Settings, since: date | None = None) -> dict[str, Any]:
    return jobs.map_data(settings, since)


def recommend_step(settings: Settings, day: date | None = None) -> Any:
    return jobs.recommend(settings, day or local_today(settings))


def sync_step(settings: Settings, source: str) -> dict[str, Any]:
    return jobs.sync(settings, [source])


def push_step(settings: Settings, day: date | None = None) -> dict[str, Any]:
    return jobs.push_google(settings, day or local_today(settings))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _guard(settings: Settings, job: str, stage: str, fn: Callable[[], Any], source: str | None = None) -> JobResult:
    """Run one stage; whatever happens the daemon goes on. Failures are logged and recorded."""
    t0 = time.monotonic()
    log.info("%s: starting", job)
    try:
        detail = fn()
    except RhythmError as exc:
        line = _first_line(exc)
        log.error("%s: failed: %s", job, line)
        if stage != "sync":  # rhythm.sync records its own failures (runs, sync_state)
            runner.record_failure(settings, stage, source or "", job, RhythmError(line))
        return JobResult(job, stage, ok=False, error=line, seconds=time.monotonic() - t0)
    except Exception as exc:  # a bug in one stage must not stop the daemon
        line = f"{type(exc).__name__}: {_first_line(exc)}"
        log.exception("%s: crashed: %s", job, line)
        runner.record_failure(settings, stage, source or "", job, RhythmError(line))
        return JobResult(job, stage, ok=False, error=line, seconds=time.monotonic() - t0)
    seconds = time.monotonic() - t0
    if stage == "sync":
        r = detail["sources"].get(source, {"ok": False, "error": "not synced"})
        if not r["ok"]:
            log.error("%s: failed: %s", job, r["error"])
            return JobResult(job, stage, ok=False, error=r["error"], seconds=seconds)
        log.info("%s: ok, %s records", job, r.get("records"))
        return JobResult(job, stage, ok=True, detail=_plain(r), seconds=seconds)
    if stage == "recommend":
        summary = detail.summary()
        log.info("%s: ok, %s", job, ", ".join(f"{s['slot']}={s['action']}" for s in summary["slots"]) or "no slots")
        return JobResult(job, stage, ok=True, detail=summary, seconds=seconds, plan=detail)
    if stage == "push":
        log.info("%s: ok, %d added, %d updated, %d removed", job, len(detail["inserted"]), len(detail["updated"]),
                 len(detail["deleted"]))
    else:
        log.info("%s: ok", job)
    return JobResult(job, stage, ok=True, detail=_plain(detail) if isinstance(detail, dict) else {}, seconds=seconds)


def _configured(settings: Settings) -> list[str]:
    from rhythm.sync import configured_sources

    return configured_sources(settings)


def sync_job(settings: Settings, source: str) -> list[JobResult]:
    """The ``sync:<source>`` job: sync that source, then map."""
    out = [_guard(settings, f"sync:{source}", "sync", lambda: sync_step(settings, source), source)]
    out.append(_guard(settings, "map", "map", lambda: map_step(settings)))
    return out


def run_cycle(
    settings: Settings, *, sources: Iterable[str] | None = None, day: date | None = None
) -> list[JobResult]:
    """One full cycle now: sync each source (isolated), map, recommend for `day` (today), and
    with ``push_google_after_plan`` push that plan to Google Calendar."""
    names = list(sources) if sources is not None else _configured(settings)
    results = [
        _guard(settings, f"sync:{name}", "sync", lambda name=name: sync_step(settings, name), name)
        for name in names
    ]
    results.append(_guard(settings, "map", "map", lambda: map_step(settings)))
    results.append(_guard(settings, "recommend", "recommend", lambda: recommend_step(settings, day)))
    if settings.push_google_after_plan:
        if results[-1].ok:
            results.append(_guard(settings, "push:google", "push", lambda: push_step(settings, day), "google"))
        else:
            log.warning("push:google: skipped (no plan to push)")
    return results


def morning_job(settings: Settings) -> list[JobResult]:
    return run_cycle(settings)


# -- the schedule --------------------------------------------------------------------------
@dataclass(frozen=True)
class JobSpec:
    id: str
    trigger: Any  # an APScheduler trigger
    misfire_grace_time: int
    func: Callable[..., Any]
    args: tuple[Any, ...]
    describe: str

    def next_run(self, now: datetime) -> datetime | None:
        return self.trigger.get_next_fire_time(None, now)


def last_successful_syncs(settings: Settings) -> dict[str, datetime]:
    """source -> when its last successful sync finished (from `runs`); {} without a database."""
    if not settings.database.exists():
        return {}
    try:
        with open_db(settings.database, read_only=True) as db:
            return runs.last_successful_syncs(db)
    except StorageError:
        return {}


def job_specs(
    settings: Settings,
    sources: Iterable[str] | None = None,
    now: datetime | None = None,
    last_ok: dict[str, datetime] | None = None,
) -> list[JobSpec]:
    """The daemon's jobs. A source's first sync is due one interval after its last
    successful one (now, if that is past or it never synced)."""
    from apscheduler.triggers.cron import CronTrigger
    from apscheduler.triggers.interval import IntervalTrigger

    tz = user_zone(settings)
    now = (now or datetime.now(UTC)).astimezone(tz)
    every = sync_interval(settings)
    hour, minute = morning_time(settings)
    names = list(sources) if sources is not None else _configured(settings)
    last_ok = last_successful_syncs(settings) if last_ok is None else last_ok
    specs = []
    for name in names:
        prev = last_ok.get(name)
        first = max(now, prev.astimezone(tz) + every) if prev else now
        specs.append(JobSpec(
            id=f"sync:{name}",
            trigger=IntervalTrigger(seconds=every.total_seconds(), start_date=first, timezone=tz),
            misfire_grace_time=SYNC_MISFIRE_GRACE_S,
            func=sync_job,
            args=(settings, name),
            describe=f"sync {name} then map, every {settings.sync_every_hours:g} h",
        ))
    specs.append(JobSpec(
        id=MORNING_JOB,
        trigger=CronTrigger(hour=hour, minute=minute, timezone=tz),
        misfire_grace_time=MORNING_MISFIRE_GRACE_S,
        func=morning_job,
        args=(settings,),
        describe=f"sync, map and today's plan, daily at {hour:02d}:{minute:02d} {tz}",
    ))
    return specs


def build_scheduler(
    settings: Settings, sources: Iterable[str] | None = None, now: datetime | None = None
) -> Any:
    """A BackgroundScheduler (not started) with the daemon's jobs."""
    from apscheduler.executors.pool import ThreadPoolExecutor
    from apscheduler.schedulers.background import BackgroundScheduler

    sched = BackgroundScheduler(
        timezone=user_zone(settings),
        executors={"default": ThreadPoolExecutor(max_workers=1)},  # one writer: jobs in turn
        job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": SYNC_MISFIRE_GRACE_S},
    )
    for spec in job_specs(settings, sources, now):
        sched.add_job(
            spec.func, spec.trigger, args=spec.args, id=spec.id, name=spec.describe,
            coalesce=True, max_instances=1, misfire_grace_time=spec.misfire_grace_time,
        )
    return sched


# -- logging -------------------------------------------------------------------------------
_SECRETS = [
    (re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]+"), r"\1***"),
    (re.compile(r"(?i)((?:access|refresh|id)_token|client_secret|password|code_verifier|\bcode)"
                r"(\"?\s*[:=]\s*\"?)[^\s&\"',}]+"), r"\1\2***"),
]


def redact(text: str) -> str:
    for rx, repl in _SECRETS:
        text = rx.sub(repl, text)
    return text


class RedactingFormatter(logging.Formatter):
    """Formats as usual, then masks anything that looks like a token or secret."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def setup_logging(settings: Settings, stream: Any | None = None) -> list[logging.Handler]:
    """Log to RHYTHM_HOME/logs/daemon.log (rotated) and, if given, a stream. Returns the
    handlers so ``teardown_logging`` can remove them."""
    settings.logs_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    fmt = RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    handlers: list[logging.Handler] = [
        RotatingFileHandler(settings.logs_dir / LOG_FILE, maxBytes=LOG_MAX_BYTES, backupCount=LOG_BACKUPS, encoding="utf-8")
    ]
    if stream is not None:
        handlers.append(logging.StreamHandler(stream))
    root = logging.getLogger()
    for h in handlers:
        h.setFormatter(fmt)
        h.setLevel(logging.INFO)
        root.addHandler(h)
    if root.level > logging.INFO or root.level == logging.NOTSET:
        root.setLevel(logging.INFO)
    for noisy in ("httpx", "httpcore", "googleapiclient", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return handlers


def teardown_logging(handlers: list[logging.Handler]) -> None:
    root = logging.getLogger()
    for h in handlers:
        root.removeHandler(h)
        h.close()


# -- state file (what `rhythm status` reads) -----------------------------------------------
def state_path(settings: Settings) -> Path:
    return settings.home / STATE_FILE


def write_state(settings: Settings, state: dict[str, Any]) -> None:
    path = state_path(settings)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(_plain(state), indent=2))
    os.replace(tmp, path)


def read_state(settings: Settings) -> dict[str, Any] | None:
    """The daemon's last written state, with `running` checked against its pid."""
    try:
        state = json.loads(state_path(settings).read_text())
    except (OSError, ValueError):
        return None
    pid = state.get("pid")
    alive = False
    if state.get("status") == "running" and isinstance(pid, int):
        try:
            os.kill(pid, 0)
            alive = True
        except ProcessLookupError:
            alive = False
        except PermissionError:
            alive = True
    state["running"] = alive
    return state


def _scheduler_state(sched: Any, started: datetime, last: dict[str, Any]) -> dict[str, Any]:
    return {
        "status": "running",
        "pid": os.getpid(),
        "started_at": started,
        "jobs": [{"id": j.id, "next_run": j.next_run_time, "describe": j.name} for j in sched.get_jobs()],
        "last": last,
    }


# -- running -------------------------------------------------------------------------------
def run_once(settings: Settings, *, day: date | None = None, log_stream: Any | None = None) -> list[JobResult]:
    """`rhythm daemon --once`: take the lock, run one full cycle, release, return results."""
    took = lock.acquire(settings.home, "rhythm daemon --once")
    handlers = setup_logging(settings, log_stream)
    try:
        log.info("one cycle (pid %s)", os.getpid())
        results = run_cycle(settings, day=day)
        log.info("cycle done: %s", ", ".join(f"{r.job}={'ok' if r.ok else 'failed'}" for r in results))
        return results
    finally:
        teardown_logging(handlers)
        if took:
            lock.release(settings.home)


def run_daemon(
    settings: Settings,
    *,
    stop: threading.Event | None = None,
    on_ready: Callable[[list[dict[str, Any]]], None] | None = None,
    log_stream: Any | None = None,
    handle_signals: bool = True,
) -> int:
    """Run the scheduler until SIGTERM/SIGINT (or `stop` is set); returns the exit code 0.

    Raises DatabaseBusy if another process holds the writer lock.
    """
    took = lock.acquire(settings.home, "rhythm daemon")
    handlers: list[logging.Handler] = []
    previous: dict[int, Any] = {}
    sched = None
    stop = stop or threading.Event()
    started = datetime.now(UTC)
    last: dict[str, Any] = {}
    try:
        handlers = setup_logging(settings, log_stream)
        if handle_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, lambda signum, _frame: _on_signal(signum, stop))
        sched = build_scheduler(settings)
        state_lock = threading.Lock()

        def on_event(event: Any) -> None:
            with state_lock:
                ok = getattr(event, "exception", None) is None and event.code != EVENT_JOB_MISSED
                results = getattr(event, "retval", None) or []
                failed = [r.job for r in results if isinstance(r, JobResult) and not r.ok]
                last[event.job_id] = {
                    "at": datetime.now(UTC),
                    "ok": ok and not failed,
                    "missed": event.code == EVENT_JOB_MISSED,
                    "failed": failed,
                }
                write_state(settings, _scheduler_state(sched, started, last))

        sched.add_listener(on_event, EVENT_JOB_EXECUTED | EVENT_JOB_ERROR | EVENT_JOB_MISSED)
        sched.start()
        state = _scheduler_state(sched, started, last)
        write_state(settings, state)
        log.info("daemon started (pid %s): %s", os.getpid(),
                 "; ".join(f"{j['id']} next {j['next_run']}" for j in state["jobs"]))
        if on_ready is not None:
            on_ready(_plain(state["jobs"]))
        while not stop.wait(0.5):
            pass
        log.info("stopping: waiting for the running job to finish")
        sched.shutdown(wait=True)
        log.info("daemon stopped")
        return 0
    finally:
        if sched is not None and sched.running:
            sched.shutdown(wait=True)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        try:
            write_state(settings, {"status": "stopped", "pid": os.getpid(), "started_at": started,
                                   "stopped_at": datetime.now(UTC), "jobs": [], "last": last})
        except OSError:
            pass
        teardown_logging(handlers)
        if took:
            lock.release(settings.home)


def _on_signal(signum: int, stop: threading.Event) -> None:
    log.info("received %s", signal.Signals(signum).name)
    stop.set()
