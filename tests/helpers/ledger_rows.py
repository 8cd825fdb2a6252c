"""Rows for the ledger's contract tests: a submission, registered, claimed."""
from __future__ import annotations

from fme_ai_resilience.core.intake.submission import Submission

T0 = 1_790_000_000.0


def sub(key: str, **extra) -> Submission:
    return Submission(idempotency_key=key, feature_global_id=f"F-{key}", trace_id=f"trace-{key}",
                      **extra)


def register(store, key, now=T0, ceiling=100, **kw):
    return store.register(sub(key), ceiling, now=now, **kw)


def claimed(store, key, now=T0, owner="engine-1", lease_s=60.0):
    """Register ``key`` and claim it; returns the task."""
    register(store, key, now=now)
    (task,) = store.claim(owner, 1, lease_s, now=now)
    assert task.key == key
    return task
