"""``fme-ai-resilience process --db URL [--once | --loop]``: WS-02 outside FME.

The same processor the PythonCaller runs (:func:`~fme_ai_resilience.services.pipeline.
build_processor`), configured by ``FAIR_*`` variables, the ledger's ``resilience_config`` and
``--set``. ``--once`` (the default) runs one batch; ``--loop`` runs batches until SIGTERM or
Ctrl-C (the batch in flight finishes first: its tasks are completed, parked or handed back),
sleeping ``--idle`` seconds whenever no task is due or the ledger is away (the loop outlives a
database restart). One line per batch on stdout (JSON with ``--json``). Exit codes: 0 done,
1 the ledger failed during ``--once``, 2 usage or configuration.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import socket
import threading
from typing import Any, Iterator

from ..core.config.fields import MAX_COUNT
from ..core.errors import StoreError
from ..core.text.redact import redact_text
from ..services.pipeline import build_processor
from ..services.processing.processor import BatchReport, Stop
from .common import (EXIT_FAILED, EXIT_OK, add_db_option, command, exit_codes, ledger, number,
                     parse_values, whole)
from .logs import add_log_option, setup_logging
from .common import DAY_S

__all__ = ["add_parser", "stopping"]

log = logging.getLogger("fme_ai_resilience.process")


class stopping:
    """A context in which SIGTERM and SIGINT set :attr:`event` instead of killing the
    process (outside the main thread, where handlers cannot be installed, nothing changes)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self._saved: dict = {}

    def __enter__(self) -> "stopping":
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                self._saved[sig] = signal.signal(sig, lambda *_: self.event.set())
        return self

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self._saved.items():
            signal.signal(sig, handler)


def _batch(processor: Any, stop: threading.Event) -> BatchReport:
    """One batch, which claims nothing more once ``stop`` is set; a ledger that fails before
    any task is claimed reports as a lost ledger."""
    try:
        return processor.run_batch(stop)
    except StoreError as exc:
        detail = redact_text(str(exc))
        log.error("process %s: ledger unavailable: %s", processor.owner, detail)
        return BatchReport((), Stop.LEDGER_DOWN, detail)


def _batches(args: argparse.Namespace, processor: Any, stop: threading.Event
             ) -> Iterator[BatchReport]:
    """The batches to run: one, or (``--loop``) until stopped, waiting ``--idle`` seconds
    when nothing is due and when the ledger is away (its tasks' leases lapse meanwhile, for
    the reaper or the next claim)."""
    done = 0
    while not stop.is_set():
        report = _batch(processor, stop)
        done += 1
        yield report
        if not args.loop or (args.max_batches and done >= args.max_batches):
            return
        if report.stopped in (Stop.NO_DUE_TASK, Stop.LEDGER_DOWN):
            stop.wait(args.idle)


@command
def run(args: argparse.Namespace) -> int:
    setup_logging(args)
    owner = args.owner or f"process@{socket.gethostname()}:{os.getpid()}"
    last = None
    with ledger(args) as (store, settings), stopping() as stop:
        settings = settings.with_values(parse_values(args.values))
        processor = build_processor(settings, store=store, owner=owner)
        for last in _batches(args, processor, stop.event):
            print(json.dumps(last.as_dict()) if args.json else last.summary(), flush=True)
    return EXIT_FAILED if last is not None and last.stopped is Stop.LEDGER_DOWN \
        and not args.loop else EXIT_OK


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "process", help="run WS-02 batches: claim, download, analyse, write back",
        description="Claim due tasks and take each through download, Vision AI analysis, "
                    "write-back and completion: the processor the PythonCaller runs.",
        epilog=exit_codes("the ledger failed during --once"))
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--once", dest="loop", action="store_false",
                      help="run one batch and exit (the default)")
    mode.add_argument("--loop", dest="loop", action="store_true",
                      help="run batches until SIGTERM or Ctrl-C (then nothing more is claimed and the "
                           "tasks in hand are finished)")
    p.add_argument("--idle", type=number(minimum=0, maximum=DAY_S), default=5.0, metavar="S",
                   help="with --loop: seconds to wait when no task is due or the ledger is "
                        "away (default: 5)")
    p.add_argument("--max-batches", type=whole(minimum=0, maximum=MAX_COUNT),
                   default=0, metavar="N",
                   help="with --loop: stop after N batches (default: 0, no limit)")
    p.add_argument("--owner", default=None,
                   help="the lease owner's name (default: process@host:pid)")
    p.add_argument("--json", action="store_true", help="one JSON object per batch")
    p.add_argument("--set", dest="values", action="append", default=[], metavar="NAME=VALUE",
                   help="a setting for this run over $FAIR_* and the ledger's config, e.g. "
                        "--set processing.claim_limit=20; repeatable (default: none)")
    add_db_option(p)
    add_log_option(p)
    p.set_defaults(func=run, loop=False)
