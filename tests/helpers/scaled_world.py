"""The pipeline on its default settings, time-compressed, against a Vision AI that is slow.

:func:`scaled_defaults` is every default wait, window and time limit of the library (its
timeouts included, with no floor) times one ``scale``, and every per-second rate divided by
it: a run at scale 0.05 is the production run twenty times faster, each subject's every
timeout alike. The world is the tests' :class:`~helpers.pipeline_world.World` at that
``scale``. :class:`FleetWatch` samples, while a run lasts, the calls in flight the Vision
stand-in counts and the fleet's limit the ledger holds.
"""
from __future__ import annotations

import threading
import time
from typing import Dict, List, Tuple

from fme_ai_resilience.core.config.settings import Settings
from fme_ai_resilience.drill.timescale import TimeScale, scaled_settings
from fme_ai_resilience.store import open_store

from helpers.pipeline_world import World


#: The Vision call's phase limits in real seconds, for a test about something else: at a
#: compressed scale the defaults are tenths of a second, within a busy machine's stall, and a
#: call its client gave up on is paid again.
WIDE_PHASES = {"timeouts.connect_s": "2", "timeouts.ttfb_s": "3", "timeouts.body_s": "2"}


def scaled_defaults(world: World, scale: float, **extra: str) -> Dict[str, str]:
    """The default settings at ``scale`` (real seconds per production second) through the
    drill's one time scale, with no floor under the timeouts (the tests' stand-ins answer at
    the same scale), plus what reaches the loopback stand-ins and ``extra``."""
    values = scaled_settings(TimeScale(scale, floor_s=0.0))
    values.update(world.reach())
    values.update(extra)
    return values


class FleetWatch:
    """Samples, every ``every_s``, the calls in flight the Vision stand-in counts, and the
    slots held and the limit the ledger says, until stopped."""

    def __init__(self, world: World, db_url: str, service: str = "vision",
                 every_s: float = 0.01) -> None:
        self.world, self.db_url, self.service, self.every_s = world, db_url, service, every_s
        self.samples: List[Tuple[int, int, float]] = []   # (at the service, slots, limit)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        settings = Settings()
        with open_store(self.db_url) as store:
            while not self._stop.wait(self.every_s):
                state, slots = store.limit_read(self.service, settings.concurrency,
                                                now=time.time())
                at_service = self.world.vision.concurrency()["in_flight"]
                self.samples.append((at_service, slots, state.limit))

    def __enter__(self) -> "FleetWatch":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    @property
    def peak_limit(self) -> int:
        """The most whole slots the fleet's limit allowed at any sample."""
        ceiling = Settings().concurrency.ceiling
        return max((min(ceiling, int(limit)) for _, _, limit in self.samples), default=1)

    def uncounted(self, lag: int = 3) -> List[Tuple[int, int, int]]:
        """The samples where the service had more calls in flight than the ledger held slots
        for within ``lag`` samples around (the two are read one after the other): a call the
        fleet did not count. ``(sample, at the service, slots)`` each."""
        out = []
        for i, (at_service, _, _) in enumerate(self.samples):
            near = self.samples[max(0, i - lag):i + lag + 1]
            held = max(slots for _, slots, _ in near)
            if at_service > held:
                out.append((i, at_service, held))
        return out
