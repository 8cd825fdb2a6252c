"""The photos a layer lists for a webhook that carried no photo list, registered within the
intake's own bounds.

A feature's photo list comes from the layer, so it can be as long as the layer says (20,000
photos on one feature): at most ``intake.max_attachments`` of them become tasks, and none past
the park ceiling (``intake.park_ceiling`` unfinished tasks). The rest are not dropped silently:
the count is kept in the expanding task's result and logged, and reconciliation, which compares
the layer's photos with the ledger's keys, finds them as gaps and backfills them.
"""
from __future__ import annotations

import logging
from typing import List, Optional, Sequence, Tuple

from ...core.resilience.degrade import priority_of
from ...core.ledger import OverloadMode, RegisterOutcome
from ...core.config.settings import Settings
from ...store.base import Store
from ...core.intake.submission import Submission

__all__ = ["expand_within"]

log = logging.getLogger("fme_ai_resilience.processor")


def expand_within(listed: Sequence[Submission], settings: Settings, *, store: Store,
                  now: float, limit: Optional[int] = None) -> Tuple[List[str], int]:
    """Register ``listed`` within the bounds, each at its asset type's claim priority; returns
    the keys registered (new or known) and how many were left for reconciliation. ``limit``
    is how many may be registered (``intake.max_attachments``, one feature's, by default)."""
    intake = settings.intake
    kept = list(listed[:intake.max_attachments if limit is None else limit])
    registered: List[str] = []
    for sub in kept:
        reg = store.register(sub, intake.park_ceiling, OverloadMode.PARK, intake.park_ceiling,
                             now=now, priority=priority_of(settings.degrade, sub.asset_type))
        if reg.outcome is RegisterOutcome.OVER_BACKLOG:
            break   # the park ceiling: every later one would be refused too
        registered.append(reg.key)
    left = len(listed) - len(registered)
    if left:
        log.warning("the layer lists %d photos: %d registered, %d left for "
                    "reconciliation (intake.max_attachments=%d, intake.park_ceiling=%d)",
                    len(listed), len(registered), left, intake.max_attachments,
                    intake.park_ceiling)
    return registered, left
