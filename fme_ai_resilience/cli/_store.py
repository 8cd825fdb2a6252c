"""What the breaker and degrade commands share: the ledger from ``--db`` and the settings."""
from __future__ import annotations

import argparse
import contextlib
import functools
import sys
from typing import Any, Callable, Iterator, Tuple

from ..errors import ResilienceError, StoreError
from ..settings import Settings
from .db import EXIT_STORE, add_db_option, open_from_args, store_failed

__all__ = ["add_db_option", "ledger", "reports_errors", "settings_for"]


class _NoLedger(Exception):
    """``--db`` was missing or unusable (already reported to the user)."""


def settings_for(store: Any) -> Settings:
    """Settings from ``FAIR_*`` variables, then the run-time ``resilience_config`` table."""
    return Settings.from_env().with_values(store.get_config())


@contextlib.contextmanager
def ledger(args: argparse.Namespace) -> Iterator[Tuple[Any, Settings]]:
    """The store named by ``--db`` and the settings in force, closed afterwards."""
    store = open_from_args(args)
    if store is None:
        raise _NoLedger()
    try:
        yield store, settings_for(store)
    finally:
        store.close()


def reports_errors(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """A missing or failing ledger exits 1, a bad value exits 2: one line on stderr each."""
    @functools.wraps(run)
    def wrapper(args: argparse.Namespace) -> int:
        try:
            return run(args)
        except _NoLedger:
            return EXIT_STORE
        except StoreError as exc:
            return store_failed(args, exc)
        except (ValueError, ResilienceError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    return wrapper
