"""The drill's FME engines: OS processes running WS-02 jobs on a schedule, as FME Flow does.

Each engine runs one WS-02 job after another, as an FME Flow Automation that starts WS-02 again
when it completes does. A job is the WS-02 template's own PythonCaller script (the class the
``.fmw`` embeds, read from the installed package) run by the offline test kit's
:func:`~fme_ai_resilience.testing.run_caller` as FME runs it: a new instance, one Creator
feature (one processor batch), ``close()``; its only published parameter is ``FAIR_DB``, the
rest comes from the ledger's ``resilience_config`` rows the drill wrote. After a job that
found nothing due the engine idles ``idle_s`` (a job's start-up time on FME Flow, scaled)
before the next, or less when intake registered new work (:meth:`Engines.kick`: WS-01's
Automation submitting a WS-02 job). ``busy`` is a shared array the drill reads: 1 while the
engine's job runs; ``busy_s`` the real seconds each engine's jobs that worked (claimed a
task) held it (:meth:`Engines.busy_seconds`; a job that found nothing due is the drill's
polling, far more often than WS-02's schedule would run one, and is not counted).

:meth:`Engines.doom` (chaos) makes an engine SIGKILL itself at a stage boundary of its next
task, one of :data:`KILL_POINTS`: after the claim, after the ``downloaded`` or ``analyzed``
checkpoint, between the write-back and its ``written`` checkpoint, or between that checkpoint
and the completion. The job's processor is handed a view of the ledger that watches those
boundaries (:class:`FaultingStore`, composed in the drill; nothing in the library is patched):
the task's lease lapses and another engine must finish it with no second paid call, no
conflicting write and no row added twice.
"""
from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import time
from typing import Any, Callable, List

__all__ = ["start_engines", "Engines", "FaultingStore", "KILL_POINTS"]


#: Where a doomed engine dies, each the boundary after the named step.
KILL_POINTS = ("claimed", "downloaded", "analyzed", "written", "checkpointed")
#: The most deaths the engines remember (a scenario kills a handful).
_DEATHS = 64


class FaultingStore:
    """A ledger as the processor sees it, calling ``fault(point)`` at each of
    :data:`KILL_POINTS` it passes; every other call goes to ``store`` unchanged."""

    def __init__(self, fault: Callable[[str], None], *, store: Any) -> None:
        self._store = store
        self._fault = fault

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def claim(self, *args: Any, **kwargs: Any) -> Any:
        tasks = self._store.claim(*args, **kwargs)
        if tasks:
            self._fault("claimed")
        return tasks

    def checkpoint(self, key: str, token: int, stage: Any, data: Any, *, now: float) -> bool:
        from ..core.ledger import Stage

        if Stage(stage) is Stage.WRITTEN:
            self._fault("written")           # the layer holds the write, the ledger not yet
        done = self._store.checkpoint(key, token, stage, data, now=now)
        self._fault({Stage.DOWNLOADED: "downloaded", Stage.ANALYZED: "analyzed",
                     Stage.WRITTEN: "checkpointed"}[Stage(stage)])
        return bool(done)


def _doomed_caller(doomed: Any, index: int, deaths: Any) -> Any:
    """WS-02's template class whose processor dies at ``doomed[index]``'s kill point, the
    moment (monotonic s) added to ``deaths`` first."""
    from ..core.fme.parameters import PROCESSOR
    from ..testing.templates import template_caller

    ws02 = template_caller(PROCESSOR)

    def fault(point: str) -> None:
        chosen = doomed[index]
        if chosen and KILL_POINTS[chosen - 1] == point:
            with deaths.get_lock():   # shared memory: written before the kill, unlike a pipe
                slots = deaths[:]
                if 0.0 in slots:
                    deaths[slots.index(0.0)] = time.monotonic()
            os.kill(os.getpid(), signal.SIGKILL)

    class Doomable(ws02):  # type: ignore[misc, valid-type]
        def _configure(self, settings: Any, *, store: Any) -> None:
            super()._configure(settings, store=FaultingStore(fault, store=store))

    return Doomable


def _idle(idle_s: float, stop: Any, kicks: Any, seen: int) -> None:
    """Wait ``idle_s`` unless new work was registered meanwhile or the drill stops."""
    until = time.monotonic() + idle_s
    while not stop.is_set() and kicks.value == seen and time.monotonic() < until:
        stop.wait(min(0.02, max(0.0, until - time.monotonic())))


def _worked(job: Any) -> bool:
    """Whether a WS-02 job processed a task (it output or rejected a feature)."""
    return job is not None and bool(job.output or job.rejected)


def _engine(db_url: str, index: int, idle_s: float, stop: Any, busy: Any,
            doomed: Any, kicks: Any, ready: Any, busy_s: Any, since: Any,
            deaths: Any) -> None:
    from ..testing import run_caller

    # The drill reports what happened; the engines' own log lines would only bury it.
    logging.getLogger("fme_ai_resilience").setLevel(logging.CRITICAL)
    ws02 = _doomed_caller(doomed, index, deaths)
    macros = {"FAIR_DB": db_url}
    with ready.get_lock():
        ready.value += 1
    while not stop.is_set():
        seen = kicks.value
        since[index] = time.monotonic()
        busy[index] = 1
        job = None
        try:
            job = run_caller(ws02, [{}], macros)
        finally:
            busy[index] = 0
            if job is None or _worked(job):
                busy_s[index] += time.monotonic() - since[index]
        if not _worked(job):
            _idle(idle_s, stop, kicks, seen)


class Engines:
    """N engine processes on one ledger; :meth:`kill_one` and :meth:`stop` them."""

    def __init__(self, db_url: str, count: int, *, idle_s: float) -> None:
        self._ctx = multiprocessing.get_context("spawn")   # no inherited sockets or locks
        self.db_url = db_url
        self.count = count
        self.idle_s = idle_s
        self.stop_event = self._ctx.Event()
        self.busy = self._ctx.Array("i", count)
        self.doomed = self._ctx.Array("i", count)
        self.died_at = self._ctx.Array("d", _DEATHS)
        self.kicks = self._ctx.Value("i", 0)
        self.ready = self._ctx.Value("i", 0)
        self.busy_s = self._ctx.Array("d", count)
        self.since = self._ctx.Array("d", count)
        self.procs: List[Any] = []
        self.killed = 0
        for i in range(count):
            self.procs.append(self._spawn(i))

    def _spawn(self, index: int) -> Any:
        proc = self._ctx.Process(target=_engine, name=f"fair-drill-engine-{index}",
                                 args=(self.db_url, index, self.idle_s, self.stop_event,
                                       self.busy, self.doomed, self.kicks, self.ready,
                                       self.busy_s, self.since, self.died_at),
                                 daemon=True)
        proc.start()
        return proc

    def wait_ready(self, timeout_s: float = 120.0) -> bool:
        """Wait until every engine has imported, connected and built its first processor."""
        deadline = time.monotonic() + timeout_s
        while self.ready.value < len(self.procs) and time.monotonic() < deadline:
            if any(p.exitcode not in (None, 0) for p in self.procs):
                return False
            time.sleep(0.05)
        return self.ready.value >= len(self.procs)

    def busy_count(self) -> int:
        return sum(self.busy[:])

    def busy_seconds(self) -> float:
        """The real seconds the engines' jobs held them, those running now included."""
        now = time.monotonic()
        return sum(self.busy_s[:]) + sum(now - self.since[i] for i in range(self.count)
                                         if self.busy[i])

    def kick(self) -> None:
        """New work was registered: idle engines start a job now."""
        with self.kicks.get_lock():
            self.kicks.value += 1

    def doom(self, index: int, point: str) -> None:
        """Engine ``index`` dies at ``point`` (one of :data:`KILL_POINTS`) of its next task."""
        self.doomed[index] = KILL_POINTS.index(point) + 1

    def deaths(self) -> List[float]:
        """When each engine killed so far died (monotonic s), in order."""
        with self.died_at.get_lock():
            return sorted(t for t in self.died_at[:] if t)

    def heal(self) -> None:
        """Restart any engine that died, as FME Flow restarts a crashed engine and its job
        recovery resubmits the killed WS-02 job (a killed one is counted)."""
        for i, proc in enumerate(self.procs):
            if not proc.is_alive() and not self.stop_event.is_set():
                self.killed += proc.exitcode == -signal.SIGKILL
                if self.busy[i]:     # the killed job held its engine until now
                    self.busy_s[i] += time.monotonic() - self.since[i]
                self.busy[i] = self.doomed[i] = 0
                self.procs[i] = self._spawn(i)

    def stop(self, timeout_s: float = 30.0) -> None:
        """Let every engine finish its job and exit."""
        self.stop_event.set()
        deadline = time.monotonic() + timeout_s
        for proc in self.procs:
            proc.join(max(0.1, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join(5)


def start_engines(db_url: str, count: int, *, idle_s: float) -> Engines:
    """Start ``count`` engines on the ledger at ``db_url``."""
    return Engines(db_url, count, idle_s=idle_s)
