"""An engine's hold on one claimed task: renewed in the background, checked before each write.

:class:`Lease` renews the task's lease (fenced by its token) every third of ``lease_s`` while
its worker works on it, and is the **fence** of every write that leaves for the feature layer
or the related table (docs/pipeline.md, "Fenced to the layer"): :meth:`Lease.check`, called
just before the request is sent, renews the lease unless it was confirmed within the last
moment and raises :class:`~fme_ai_resilience.core.errors.LeaseLost` when it cannot be. A holder
frozen past its lease (SIGSTOP, a long GC pause, a suspended VM) therefore never writes its
stale answer over the result of the holder that took the task over, or over a reviewer's
verdict: on waking it asks the ledger first, and the ledger says the task is no longer its.
What remains is the moment between that check and the request leaving the process, which no
client-side fence can close (the layer cannot check a fencing token).
"""
from __future__ import annotations

import logging
import math
import threading
from typing import Any, Optional

from ...core.clock import Clock
from ...core.errors import LeaseLost, StoreError
from ...core.ledger import Task
from ...core.text.redact import redact_text
from ...store.protocols import LeaseRows

__all__ = ["Lease", "FRESH_S"]

log = logging.getLogger("fme_ai_resilience.processor")

#: How recent a confirmation of the lease lets a write go without asking the ledger again.
FRESH_S = 1.0


class Lease:
    """The hold of this engine on ``task`` for ``lease_s`` seconds at a time (see above).

    Use as a context manager around the work: the background renewal runs inside it.
    """

    def __init__(self, task: Task, lease_s: float, *, store: LeaseRows, clock: Clock) -> None:
        self.task = task
        self.lease_s = lease_s
        self.store = store
        self.clock = clock
        self.fresh_s = min(FRESH_S, lease_s / 10.0)
        self._confirmed = -math.inf    # monotonic time of the last confirmation
        self._lost = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def __repr__(self) -> str:
        return f"Lease({self.task.key!r}, token={self.task.lease_token}, lost={self._lost})"

    @property
    def lost(self) -> bool:
        """Whether the ledger said the lease is no longer this holder's."""
        return self._lost

    def confirmed(self) -> None:
        """The lease was just confirmed another way (claimed or renewed by the caller)."""
        with self._lock:
            self._confirmed = self.clock.monotonic()

    def renew(self) -> bool:
        """Renew the lease now (fenced by its token): False once it is another holder's."""
        if self._lost:
            return False
        started = self.clock.monotonic()
        ok = self.store.renew(self.task.key, self.task.lease_token, self.lease_s,
                              now=self.clock.now())
        with self._lock:
            if ok:
                self._confirmed = max(self._confirmed, started)
            else:
                self._lost = True
        return ok

    def check(self) -> None:
        """The fence: return only when the lease is this holder's now (renewing it unless it
        was confirmed within ``fresh_s``); raises LeaseLost otherwise. Call it just before a
        write leaves for the layer."""
        if self._lost:
            raise LeaseLost(f"the lease of task {self.task.key} was lost")
        if self.clock.monotonic() - self._confirmed <= self.fresh_s:
            return
        if not self.renew():
            raise LeaseLost(f"the lease of task {self.task.key} lapsed and was taken over: "
                            "nothing is written")

    # -- the background renewal -------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.wait(self.lease_s / 3.0):
            try:
                if not self.renew():
                    return  # the lease was lost: nothing to keep
            except StoreError as exc:   # the next renewal (or the reaper) will tell
                log.warning("lease %s: renewal failed: %s", self.task.key, redact_text(str(exc)))

    def __enter__(self) -> "Lease":
        self._thread = threading.Thread(target=self._run, name=f"lease {self.task.key}",
                                        daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
