"""A subject's timeline while its run goes on: one sample every step, from a probe.

The library's probe reads the ledger (backlog, breaker, degradation level) and the engines;
a baseline's reads its :class:`~fme_ai_resilience.drill.baselines.Progress` (it has no breaker
and no ladder). :func:`bin_calls` adds the Vision AI stand-in's calls, by outcome, to the
steps they fell in; :func:`bin_photos` the photos in each of the judge's states at the end of
each step, replayed by the judge from the layer's writes (named as the table names them), so
the chart's last step holds the table's figures.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .figures import STATE_LABELS
from .judge import LOST, Observed, replay
from .report import Timeline

__all__ = ["Sampler", "Sample", "bin_calls", "bin_photos", "SAMPLE_STEP_S", "PHOTO_SERIES"]

#: The judge's states the page draws, in order, by the table's names for them (a photo
#: nothing says anything of yet is in none).
PHOTO_SERIES = {state: label for state, label in STATE_LABELS.items() if state != LOST}

SAMPLE_STEP_S = 0.25
#: ``(backlog, in_flight, breaker state or None, degradation level or None)``.
Sample = Tuple[int, int, Optional[str], Optional[int]]


class Sampler:
    """Records ``probe()`` into :attr:`timeline` every ``step_s`` from ``started``
    (``time.monotonic()``) until the ``with`` block ends; ``on_sample(timeline)``, when given,
    is called after each sample (a live display)."""

    def __init__(self, probe: Callable[[], Sample], started: float, *,
                 step_s: float = SAMPLE_STEP_S,
                 on_sample: Optional[Callable[[Timeline], None]] = None) -> None:
        self.timeline = Timeline(step_s=step_s)
        self._probe, self.started, self._on_sample = probe, started, on_sample
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fair-drill-sampler",
                                        daemon=True)

    def __enter__(self) -> "Sampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        tl = self.timeline
        while not self._stop.wait(tl.step_s):
            backlog, in_flight, breaker, level = self._probe()
            tl.t.append(round(time.monotonic() - self.started, 3))
            tl.backlog.append(backlog)
            tl.in_flight.append(in_flight)
            tl.breaker.append(breaker)
            tl.level.append(level)
            if self._on_sample is not None:
                self._on_sample(tl)


def bin_calls(timeline: Timeline, log: Sequence[Any], time_scale: float) -> Timeline:
    """``timeline`` with the stand-in's calls (``(at_s, sha, outcome)``, schedule seconds)
    counted into its real-time steps by outcome."""
    steps = len(timeline.t)
    calls: Dict[str, List[int]] = {}
    for at_s, _, outcome in log:
        i = int(at_s * time_scale / timeline.step_s)
        if 0 <= i < steps:
            calls.setdefault(outcome, [0] * steps)[i] += 1
    timeline.ai_calls = calls
    return timeline


def bin_photos(timeline: Timeline, seen: Observed) -> Timeline:
    """``timeline`` with, per step, the photos (facts) in each state of
    :data:`PHOTO_SERIES` at the step's end, as the judge replays ``seen``."""
    ends = [seen.started + t + timeline.step_s for t in timeline.t]
    series = replay(seen, at=ends).series
    timeline.photos = {label: list(series.get(state, [0] * len(ends)))
                       for state, label in PHOTO_SERIES.items()
                       if any(series.get(state, ()))}
    return timeline
