"""Where the lab's work units run: a local process pool, or a Ray cluster.

The three commands that make many independent units of work (``rhythm train rollouts``:
chunks of teacher weeks; ``rhythm train streams``: one generated person each; ``rhythm sim
eval``: chunks of evaluation episodes) cut their work into units that depend only on their
seeds, and hand them to one executor::

    executor = executor_for(ray_address, workers)
    for index, result in executor.map_units(fn, units, progress):
        ...

``map_units`` yields ``(index into units, fn(unit))`` as units finish (in any order) and
calls ``progress(units done, units)``. :class:`LocalPool` runs them in this process
(``workers`` 1) or in spawned worker processes; :class:`RayExecutor` sends each unit to a Ray
cluster as a task, retried ``max_retries`` times when the worker running it dies, so a lost
machine costs only its units. The same seeds make the same results, so the output does not
depend on where the units ran.

:func:`unit_lines` is how the stages write a file of JSON lines from units so that an
interrupted run continues: each finished unit is written whole (a temporary file, then a
rename) into ``<file>.units/`` beside a plan of the units; a re-run of the same plan skips
the units already there; once every unit is in, the file is assembled in unit order (the
same bytes as an uninterrupted run's) and the folder removed.

Ray is an optional extra (``pip install 'rhythm[cluster]'``), imported only when a Ray
executor runs; the product never imports this module.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from contextlib import closing
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Protocol

from common.errors import RhythmError

#: ``progress(units done, units)``.
UnitProgress = Callable[[int, int], None]
INSTALL_HINT = "--ray needs Ray: pip install 'rhythm[cluster]'"
#: Ray's retries of a unit whose worker died (the task is idempotent: same seeds, same lines).
MAX_RETRIES = 3


class ClusterError(RhythmError):
    """Ray is missing, the cluster cannot be reached, or a unit failed on every retry."""


class Executor(Protocol):
    """Runs units of work; see the module docstring."""

    #: Processes that run units at once (the cluster's CPUs for Ray, once connected).
    slots: int

    def map_units(
        self, fn: Callable[[Any], Any], units: Sequence[Any], progress: UnitProgress | None = None
    ) -> Iterator[tuple[int, Any]]: ...


class LocalPool:
    """Units in this process (``workers`` 1) or in ``workers`` spawned processes (a fresh
    interpreter each: the parent may hold torch or llama.cpp state)."""

    def __init__(self, workers: int = 1):
        self.slots = max(1, int(workers))

    def map_units(
        self, fn: Callable[[Any], Any], units: Sequence[Any], progress: UnitProgress | None = None
    ) -> Iterator[tuple[int, Any]]:
        total = len(units)
        if self.slots == 1 or total <= 1:
            for i, unit in enumerate(units):
                result = fn(unit)
                if progress is not None:
                    progress(i + 1, total)
                yield i, result
            return
        pool = ProcessPoolExecutor(min(self.slots, total), mp_context=get_context("spawn"))
        try:
            futures = {pool.submit(fn, unit): i for i, unit in enumerate(units)}
            pending, done = set(futures), 0
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in sorted(finished, key=futures.__getitem__):
                    done += 1
                    if progress is not None:
                        progress(done, total)
                    yield futures[fut], fut.result()
        finally:
            for fut in futures:
                fut.cancel()
            pool.shutdown(cancel_futures=True)


def import_ray():
    """The ``ray`` module, or :class:`ClusterError` with the line that says how to get it."""
    try:
        import ray
    except ImportError:
        raise ClusterError(INSTALL_HINT) from None
    return ray


class RayExecutor:
    """Units as Ray tasks on the cluster at ``address``: ``auto`` (the cluster this machine
    joined with ``ray start``), ``ray://host:10001`` or ``host:6379``, or ``local`` (a private
    runtime on this machine for ``num_cpus`` CPUs, default all). A runtime already started in
    this process (``ray.init``) is used as it is; one this executor connects stays up for the
    process (warm workers for the next run; Ray disconnects at exit). Each task takes one CPU;
    a task whose worker dies is run again, up to ``max_retries`` times."""

    def __init__(self, address: str = "auto", max_retries: int = MAX_RETRIES,
                 num_cpus: int | None = None):
        self.address = address
        self.max_retries = int(max_retries)
        self.num_cpus = num_cpus
        self.slots = 1

    def connect(self) -> None:
        """Connect (or start the local runtime) unless this process already is; a
        :class:`ClusterError` line when the cluster cannot be reached."""
        ray = import_ray()
        if ray.is_initialized():
            self.slots = max(1, int(ray.cluster_resources().get("CPU", 1)))
            return
        kw: dict[str, Any] = {"include_dashboard": False, "logging_level": "WARNING",
                              "log_to_driver": True}
        if self.address == "local":
            kw["num_cpus"] = self.num_cpus
        else:
            _check_reachable(self.address)
            kw["address"] = self.address
        try:
            ray.init(**kw)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            if self.address == "auto" and "Could not find any running Ray instance" in first:
                first = "no Ray cluster on this machine (start one with `ray start --head`, or give its address)"
            raise ClusterError(f"Ray cluster {self.address!r}: {first}") from None
        self.slots = max(1, int(ray.cluster_resources().get("CPU", 1)))

    def map_units(
        self, fn: Callable[[Any], Any], units: Sequence[Any], progress: UnitProgress | None = None
    ) -> Iterator[tuple[int, Any]]:
        ray = import_ray()
        self.connect()
        refs: dict[Any, int] = {}
        pending: list[Any] = []
        try:
            task = ray.remote(num_cpus=1, max_retries=self.max_retries)(fn)
            refs = {task.remote(unit): i for i, unit in enumerate(units)}
            pending, done, total = list(refs), 0, len(units)
            while pending:
                finished, pending = ray.wait(pending, num_returns=1)
                for ref in finished:
                    try:
                        result = ray.get(ref)
                    except ray.exceptions.RayTaskError as exc:  # the unit's own error
                        raise exc.as_instanceof_cause() from None
                    except ray.exceptions.RayError as exc:  # its worker died on every retry
                        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                        raise ClusterError(
                            f"unit {refs[ref]} failed after {self.max_retries} retries: {first}"
                        ) from None
                    done += 1
                    if progress is not None:
                        progress(done, total)
                    yield refs[ref], result
        finally:
            # interrupted or failed: the rest is not wanted. A running unit is interrupted in
            # its worker (KeyboardInterrupt there), a queued one never starts. Not force=True,
            # which kills the worker processes: one CI run's pytest process ended without a
            # word in this path (not reproduced in ten local runs of the module).
            for ref in pending:
                try:
                    ray.cancel(ref)
                except Exception:  # noqa: BLE001 - a task that just finished cannot be cancelled
                    pass


def _check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """A ``host:port`` (or ``ray://host:port``) that does not answer: one line at once, not
    Ray's minutes of retries."""
    if address == "auto":
        return
    hostport = address.split("://", 1)[-1]
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        raise ClusterError(f"Ray cluster {address!r}: expected auto, local, HOST:PORT or ray://HOST:PORT")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise ClusterError(
            f"Ray cluster {address!r}: nothing answers at {host}:{port} ({exc.strerror or exc}); "
            "is the head started (`ray start --head`)?"
        ) from None


def executor_for(ray: str | None, workers: int = 1) -> Executor:
    """The Ray executor for ``ray`` (an address, ``auto`` or ``local``), else the local pool
    of ``workers`` processes. Connects to the cluster before any work starts (a missing Ray
    or an unreachable cluster: one line, nothing written)."""
    if ray:
        executor = RayExecutor(ray)
        executor.connect()
        return executor
    return LocalPool(workers)


def unit_lines(
    path: Path,
    fn: Callable[[Any], list[str]],
    units: Sequence[Any],
    executor: Executor,
    on_unit: Callable[[int], None] | None = None,
) -> Iterator[str]:
    """Run ``fn`` (a unit -> its JSON lines) over ``units`` on ``executor`` and write
    ``path``, resumably (module docstring); yields the file's lines in order as it is
    assembled (consume it whole: the file is in place after the last line).
    ``on_unit(lines)`` is called once per unit, with its line count, as it
    finishes (first for the units an earlier run wrote)."""
    path = Path(path)
    parts = path.with_name(path.name + ".units")
    plan = json.dumps([list(u) if isinstance(u, tuple) else u for u in units], default=str)
    plan_file = parts / "plan.json"
    if parts.exists() and (not plan_file.is_file() or plan_file.read_text() != plan):
        shutil.rmtree(parts)  # another run's units: start afresh
    parts.mkdir(parents=True, exist_ok=True)
    if not plan_file.is_file():
        _write_atomic(plan_file, plan)

    def part(i: int) -> Path:
        return parts / f"{i:06d}.jsonl"

    todo = []
    for i in range(len(units)):
        if part(i).is_file():
            if on_unit is not None:
                on_unit(_count_lines(part(i)))
        else:
            todo.append(i)
    # closing: an interrupted run stops its workers at once (the units written stay)
    with closing(executor.map_units(fn, [units[i] for i in todo])) as finished:
        for k, lines in finished:
            _write_atomic(part(todo[k]), "".join(line + "\n" for line in lines))
            if on_unit is not None:
                on_unit(len(lines))
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w") as out:
        for i in range(len(units)):
            with part(i).open() as f:
                for line in f:
                    out.write(line)
                    yield line.rstrip("\n")
    os.replace(tmp, path)
    shutil.rmtree(parts)


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _count_lines(path: Path) -> int:
    with path.open() as f:
        return sum(1 for _ in f)
