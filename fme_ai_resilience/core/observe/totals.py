"""The ledger's monotonic counters and histograms and its levels, and a gateway's own counts.

Pure values: :class:`Histogram` (observations per bucket of :data:`BUCKETS_S`, cumulative when
read), :class:`LedgerMetrics` (what the ledger's triggers counted since it was created, and its
breakers and ladder now; read by ``fme_ai_resilience.store.metric_rows``) and
:class:`GatewayCounts` (one gateway's requests). ``status``, ``check --json`` and ``/metrics``
show the same figures from them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..checks import count, finite
from ..errors import ConfigurationError
from ..resilience.breaker import BreakerState
from ..resilience.degrade import LadderState

__all__ = ["BUCKETS_S", "Labels", "Histogram", "LedgerMetrics", "GatewayCounts", "number"]

#: The upper bounds of every histogram's buckets, seconds (then +Inf).
BUCKETS_S: Tuple[float, ...] = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
                                 300.0, 600.0, 1800.0, 3600.0)

#: Label names and values, sorted by name.
Labels = Tuple[Tuple[str, str], ...]


@dataclass(frozen=True)
class Histogram:
    """Observations per bucket: ``counts[i]`` fell in bucket ``i`` (above ``bounds[i - 1]``, at
    most ``bounds[i]``; the last one past every bound), ``total`` is their sum in seconds."""

    counts: Tuple[int, ...] = (0,) * (len(BUCKETS_S) + 1)
    total: float = 0.0
    bounds: Tuple[float, ...] = BUCKETS_S

    def __post_init__(self) -> None:
        object.__setattr__(self, "counts", tuple(count("counts[]", n) for n in self.counts))
        if len(self.counts) != len(self.bounds) + 1:
            raise ConfigurationError("counts", len(self.counts),
                                     f"must hold {len(self.bounds) + 1} buckets")
        finite("total", self.total)

    @classmethod
    def of(cls, buckets: Mapping[float, Tuple[int, float]],
           bounds: Tuple[float, ...] = BUCKETS_S) -> "Histogram":
        """From ``{upper bound: (observations, their sum)}`` (``inf`` for the last bucket)."""
        counts = [0] * (len(bounds) + 1)
        total = 0.0
        for le, (n, subtotal) in buckets.items():
            counts[_bucket(bounds, le)] += n
            total += subtotal
        return cls(tuple(counts), total, bounds)

    def observe(self, value: float) -> "Histogram":
        """This histogram with ``value`` (seconds; a negative one counts as 0) observed."""
        value = max(0.0, finite("value", value))
        counts = list(self.counts)
        counts[_bucket(self.bounds, value)] += 1
        return Histogram(tuple(counts), self.total + value, self.bounds)

    @property
    def count(self) -> int:
        """How many observations it holds (the ``+Inf`` bucket's cumulative count)."""
        return sum(self.counts)

    def cumulative(self) -> List[Tuple[float, int]]:
        """``(upper bound, observations at or below it)``, the last bound ``inf``."""
        out, running = [], 0
        for le, n in zip(self.bounds + (math.inf,), self.counts):
            running += n
            out.append((le, running))
        return out

    def as_dict(self) -> Dict[str, Any]:
        """``count``, ``sum`` (seconds) and the cumulative ``buckets`` by upper bound."""
        return {"count": self.count, "sum": round(self.total, 6),
                "buckets": {number(le): n for le, n in self.cumulative()}}


#: The counters and histograms without labels: shown (as 0) before their first event.
_UNLABELLED_COUNTERS = ("format_anomalies", "reused_analyses")
_UNLABELLED_HISTOGRAMS = ("intake_latency_seconds", "end_to_end_seconds")


def _bucket(bounds: Sequence[float], value: float) -> int:
    return next((i for i, le in enumerate(bounds) if value <= le), len(bounds))


@dataclass(frozen=True)
class LedgerMetrics:
    """What the ledger counted since it was created (counters and histograms by name and
    labels, as its triggers keep them) and its levels at ``observed_at``: every breaker and
    the degradation ladder (None when never written: L0)."""

    observed_at: float
    counters: Mapping[Tuple[str, Labels], int] = field(default_factory=dict)
    histograms: Mapping[Tuple[str, Labels], Histogram] = field(default_factory=dict)
    breakers: Mapping[str, BreakerState] = field(default_factory=dict)
    ladder: Optional[LadderState] = None

    def __post_init__(self) -> None:
        for attr in ("counters", "histograms", "breakers"):
            object.__setattr__(self, attr, MappingProxyType(dict(getattr(self, attr))))

    def counter(self, name: str) -> Dict[Labels, int]:
        """One counter's values by labels (0 for a counter without labels never counted)."""
        found = {labels: n for (metric, labels), n in sorted(self.counters.items())
                 if metric == name}
        return found or ({(): 0} if name in _UNLABELLED_COUNTERS else {})

    def histogram(self, name: str) -> Dict[Labels, Histogram]:
        """One histogram by labels (empty for one without labels never observed)."""
        found = {labels: h for (metric, labels), h in sorted(self.histograms.items())
                 if metric == name}
        return found or ({(): Histogram()} if name in _UNLABELLED_HISTOGRAMS else {})

    def as_dict(self) -> Dict[str, Any]:
        """A JSON-ready form (``status --json``, ``check --json``): the figures ``/metrics``
        exports, under the metric names without the ``fair_`` prefix."""
        ladder = self.ladder or LadderState()
        return {
            "counters": {name: [{"labels": dict(labels), "value": n}
                                for labels, n in self.counter(name).items()]
                         for name in sorted({m for m, _ in self.counters}
                                            | set(_UNLABELLED_COUNTERS))},
            "histograms": {name: [{"labels": dict(labels), **h.as_dict()}
                                  for labels, h in self.histogram(name).items()]
                           for name in sorted({m for m, _ in self.histograms}
                                              | set(_UNLABELLED_HISTOGRAMS))},
            "breakers": {service: {"state": b.state.value, "mode": b.mode.value,
                                   "for_s": round(max(0.0, self.observed_at - b.changed_at), 3)}
                         for service, b in sorted(self.breakers.items())},
            "ladder": {"level": int(ladder.effective), "held": ladder.override is not None},
        }


@dataclass(frozen=True)
class GatewayCounts:
    """One gateway's own requests since it started: by handler and status code, their
    durations by handler, and the webhooks by answer (the ``status`` of the JSON answer)."""

    requests: Mapping[Tuple[str, str], int] = field(default_factory=dict)
    durations: Mapping[str, Histogram] = field(default_factory=dict)
    webhooks: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for attr in ("requests", "durations", "webhooks"):
            object.__setattr__(self, attr, MappingProxyType(dict(getattr(self, attr))))


def number(value: float) -> str:
    """A sample value or bound as the exposition format writes it (``+Inf`` for infinity)."""
    if value == math.inf:
        return "+Inf"
    return repr(float(value))
