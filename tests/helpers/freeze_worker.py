"""A WS-02 processor that freezes itself (SIGSTOP) just before the write-back of its task.

``python freeze_worker.py DB_URL``: the processor the ``process`` command builds from the
ledger's settings, its ledger view wrapped so that the process stops itself once the
``analyzed`` checkpoint is recorded, as a process a scheduler, a debugger or a suspended VM
froze would: its lease runs out while it sleeps. Woken (SIGCONT), it goes on with the
write-back it was about to make. Exits 0.
"""
from __future__ import annotations

import logging
import os
import signal
import sys
import time

from fme_ai_resilience.cli.common import settings_for
from fme_ai_resilience.services.pipeline import build_processor
from fme_ai_resilience.store import open_store


def main(db_url: str) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(relativeCreated)d %(threadName)s %(name)s %(message)s")
    store = open_store(db_url)
    original = store.checkpoint

    def checkpoint(key, token, stage, data, *, now):
        done = original(key, token, stage, data, now=now)
        if getattr(stage, "value", stage) == "analyzed":
            os.kill(os.getpid(), signal.SIGSTOP)
            # a process-directed stop reaches this thread when it next enters the kernel:
            # sleep, so it is stopped here, before the write-back, not somewhere in it
            time.sleep(0.5)
        return done

    store.checkpoint = checkpoint
    processor = build_processor(settings_for(store=store), store=store, owner="frozen")
    processor.run_batch()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
