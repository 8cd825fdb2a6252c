"""A WS-02 processor that SIGKILLs itself at one stage boundary of its first task.

``python pipeline_worker.py DB_URL BOUNDARY``: the processor the ``process`` command builds
from the ledger's settings, with one store or layer operation wrapped so that the process dies
at the boundary, as an FME engine killed by the operating system would. Boundaries:

- ``claimed``: the task was leased;
- ``downloaded`` / ``analyzed``: the checkpoint was recorded;
- ``written-back``: applyEdits answered, its ``written`` checkpoint not yet recorded;
- ``before-complete``: ``written`` recorded, the completion not yet sent.

Exits 3 if it got through without dying (the test then fails).
"""
from __future__ import annotations

import os
import signal
import sys

from fme_ai_resilience.cli.common import settings_for
from fme_ai_resilience.services.arcgis import layer as arcgis
from fme_ai_resilience.services.pipeline import build_processor
from fme_ai_resilience.store import open_store


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def after(owner, name, when=lambda *a, **k: True):
    original = getattr(owner, name)

    def wrapped(*args, **kwargs):
        result = original(*args, **kwargs)
        if when(result, *args, **kwargs):
            die()
        return result
    setattr(owner, name, wrapped)


def main(db_url: str, boundary: str) -> int:
    store = open_store(db_url)
    processor = build_processor(settings_for(store=store), store=store, owner="doomed")
    if boundary == "claimed":
        after(store, "claim", lambda tasks, *a, **k: bool(tasks))
    elif boundary in ("downloaded", "analyzed"):
        after(store, "checkpoint", lambda ok, key, token, stage, *a, **k: stage.value == boundary)
    elif boundary == "written-back":
        after(arcgis.FeatureLayer, "apply_edits")
    elif boundary == "before-complete":
        original = store.complete

        def complete(*args, **kwargs):
            die()
            return original(*args, **kwargs)
        store.complete = complete
    else:
        raise SystemExit(f"unknown boundary {boundary!r}")
    processor.run_batch()
    return 3


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
