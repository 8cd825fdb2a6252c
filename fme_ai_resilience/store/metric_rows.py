"""The ledger's metrics as its triggers keep them, for every SQL backend.

Mixed into :class:`~fme_ai_resilience.store.sqlbase.SqlStore`. The counters and histograms of
``metric_counter`` and ``metric_histogram`` are written by triggers (``sql/schema.*.sql``,
migration 9) in the transaction of the event they count, so they never decrease when the call
log is pruned or a dead letter requeued; :meth:`MetricRowOps.ledger_metrics` reads them with
the breakers and the ladder, and writes nothing.
"""
from __future__ import annotations

import json
from typing import Any, Dict, Tuple

from ..core.checks import finite
from ..core.observe.totals import BUCKETS_S, Histogram, Labels, LedgerMetrics
from .breaker_ladder import breaker_state_of, ladder_state_of

__all__ = ["MetricRowOps"]


def _labels(text: str) -> Labels:
    return tuple(sorted((str(k), str(v)) for k, v in json.loads(text).items()))


class MetricRowOps:
    """Reads of the metric tables. Mixed into a store that supplies ``_statement``."""

    _statement: Any

    def ledger_metrics(self, *, now: float) -> LedgerMetrics:
        """Every counter and histogram the ledger keeps, its circuits and its ladder (L0 when
        never written), observed at ``now``. Read only: nothing is created."""
        now = finite("now", now)
        counters = {(r["name"], _labels(r["labels"])): int(r["n"])
                    for r in self._statement("metric_counters", write=False).rows}
        buckets: Dict[Tuple[str, Labels], Dict[float, Tuple[int, float]]] = {}
        for r in self._statement("metric_histograms", write=False).rows:
            key = (r["name"], _labels(r["labels"]))
            buckets.setdefault(key, {})[float(r["le"])] = (int(r["n"]), float(r["total"]))
        breakers = {r["service"]: breaker_state_of(r)
                    for r in self._statement("breaker_list", write=False).rows}
        ladder = self._statement("degrade_get", write=False).rows
        return LedgerMetrics(
            observed_at=now, counters=counters,
            histograms={k: Histogram.of(v, BUCKETS_S) for k, v in buckets.items()},
            breakers=breakers, ladder=ladder_state_of(ladder[0]) if ladder else None)

    def metric_buckets(self) -> Tuple[float, ...]:
        """The bucket bounds the ledger's histograms use, +Inf last."""
        return tuple(float(r["le"]) for r in self._statement("metric_buckets", write=False).rows)
