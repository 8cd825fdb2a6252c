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
engine's job runs.

:meth:`Engines.doom` (chaos) makes an engine SIGKILL itself right after its next
``analyzed`` checkpoint: the paid answer is in the ledger, the write-back not yet done; the
task's lease lapses and another engine must finish it without a second Vision call.
"""
from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import time
from typing import Any, List

__all__ = ["start_engines", "Engines"]


def _arm_doom(doomed: Any, index: int) -> None:
    """SIGKILL this engine process right after an ``analyzed`` checkpoint once
    ``doomed[index]`` (the stores its jobs open check their checkpoints through it)."""
    from ..ledger import Stage
    from ..store import SqlStore

    checkpoint = SqlStore.checkpoint

    def then_die(self: Any, key: str, token: int, stage: Stage, data: Any, *,
                 now: float) -> bool:
        done = checkpoint(self, key, token, stage, data, now=now)
        if doomed[index] and Stage(stage) is Stage.ANALYZED:
            os.kill(os.getpid(), signal.SIGKILL)
        return done
    SqlStore.checkpoint = then_die  # type: ignore[method-assign]


def _idle(idle_s: float, stop: Any, kicks: Any, seen: int) -> None:
    """Wait ``idle_s`` unless new work was registered meanwhile or the drill stops."""
    until = time.monotonic() + idle_s
    while not stop.is_set() and kicks.value == seen and time.monotonic() < until:
        stop.wait(min(0.02, max(0.0, until - time.monotonic())))


def _engine(db_url: str, index: int, idle_s: float, stop: Any, busy: Any,
            doomed: Any, kicks: Any, ready: Any) -> None:
    from ..fme.parameters import PROCESSOR
    from ..testing import run_caller
    from ..testing.templates import template_caller

    # The drill reports what happened; the engines' own log lines would only bury it.
    logging.getLogger("fme_ai_resilience").setLevel(logging.CRITICAL)
    _arm_doom(doomed, index)
    ws02 = template_caller(PROCESSOR)
    macros = {"FAIR_DB": db_url}
    with ready.get_lock():
        ready.value += 1
    while not stop.is_set():
        seen = kicks.value
        busy[index] = 1
        try:
            job = run_caller(ws02, [{}], macros)
        finally:
            busy[index] = 0
        if not job.output and not job.rejected:
            _idle(idle_s, stop, kicks, seen)


class Engines:
    """N engine processes on one ledger; :meth:`kill_one` and :meth:`stop` them."""

    def __init__(self, db_url: str, count: int, *, idle_s: float) -> None:
        self._ctx = multiprocessing.get_context("spawn")   # no inherited sockets or locks
        self.db_url = db_url
        self.idle_s = idle_s
        self.stop_event = self._ctx.Event()
        self.busy = self._ctx.Array("i", count)
        self.doomed = self._ctx.Array("i", count)
        self.kicks = self._ctx.Value("i", 0)
        self.ready = self._ctx.Value("i", 0)
        self.procs: List[Any] = []
        self.killed = 0
        for i in range(count):
            self.procs.append(self._spawn(i))

    def _spawn(self, index: int) -> Any:
        proc = self._ctx.Process(target=_engine, name=f"fair-drill-engine-{index}",
                                 args=(self.db_url, index, self.idle_s, self.stop_event,
                                       self.busy, self.doomed, self.kicks, self.ready),
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

    def kick(self) -> None:
        """New work was registered: idle engines start a job now."""
        with self.kicks.get_lock():
            self.kicks.value += 1

    def doom(self, index: int = 0) -> None:
        """Engine ``index`` dies right after its next ``analyzed`` checkpoint."""
        self.doomed[index] = 1

    def heal(self) -> None:
        """Restart any engine that died, as FME Flow restarts a crashed engine (a killed one
        is counted)."""
        for i, proc in enumerate(self.procs):
            if not proc.is_alive() and not self.stop_event.is_set():
                self.killed += proc.exitcode == -signal.SIGKILL
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
