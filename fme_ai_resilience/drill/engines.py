"""The drill's FME engines: OS processes running WS-02 jobs on a schedule, as FME Flow does.

Each engine runs one WS-02 job after another: a job is a fresh processor (what a PythonCaller
instance is), one batch, and its end; after a job that found nothing due the engine waits for
the schedule's next tick (every minute in production, scaled), after a busy one it starts the
next job at once (FME Flow queues the schedule's jobs while every engine is busy). ``busy``
is a shared array the drill reads: 1 while the engine's job works on tasks.

:meth:`Engines.doom` (chaos) makes an engine SIGKILL itself right after its next
``analyzed`` checkpoint: the paid answer is in the ledger, the write-back not yet done; the
task's lease lapses and another engine must finish it without a second Vision call.
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import time
from typing import Any, List

__all__ = ["start_engines", "Engines"]


def _arm_doom(doomed: Any, index: int, *, store: Any) -> None:
    """SIGKILL this engine right after an ``analyzed`` checkpoint once ``doomed[index]``."""
    from ..ledger import Stage

    checkpoint = store.checkpoint

    def then_die(key: str, token: int, stage: Stage, data: Any, *, now: float) -> bool:
        done = checkpoint(key, token, stage, data, now=now)
        if doomed[index] and Stage(stage) is Stage.ANALYZED:
            os.kill(os.getpid(), signal.SIGKILL)
        return done
    store.checkpoint = then_die


def _engine(db_url: str, index: int, tick_s: float, stop: Any, busy: Any,
            doomed: Any) -> None:
    from ..cli.common import settings_for
    from ..services.pipeline import build_processor
    from ..store import open_store

    store = open_store(db_url)
    _arm_doom(doomed, index, store=store)
    next_tick = time.monotonic()
    while not stop.is_set():
        processor = build_processor(settings_for(store=store), store=store,
                                    owner=f"engine-{index}@{os.getpid()}")
        busy[index] = 1
        try:
            report = processor.run_batch()
        finally:
            busy[index] = 0
        if not report.results:
            next_tick += tick_s
            while next_tick < time.monotonic():
                next_tick += tick_s
            stop.wait(next_tick - time.monotonic())
    store.close()


class Engines:
    """N engine processes on one ledger; :meth:`kill_one` and :meth:`stop` them."""

    def __init__(self, db_url: str, count: int, *, tick_s: float) -> None:
        self._ctx = multiprocessing.get_context("spawn")   # no inherited sockets or locks
        self.db_url = db_url
        self.tick_s = tick_s
        self.stop_event = self._ctx.Event()
        self.busy = self._ctx.Array("i", count)
        self.doomed = self._ctx.Array("i", count)
        self.procs: List[Any] = []
        self.killed = 0
        for i in range(count):
            self.procs.append(self._spawn(i))

    def _spawn(self, index: int) -> Any:
        proc = self._ctx.Process(target=_engine, name=f"fair-drill-engine-{index}",
                                 args=(self.db_url, index, self.tick_s, self.stop_event,
                                       self.busy, self.doomed), daemon=True)
        proc.start()
        return proc

    def busy_count(self) -> int:
        return sum(self.busy[:])

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


def start_engines(db_url: str, count: int, *, tick_s: float) -> Engines:
    """Start ``count`` engines on the ledger at ``db_url``."""
    return Engines(db_url, count, tick_s=tick_s)
