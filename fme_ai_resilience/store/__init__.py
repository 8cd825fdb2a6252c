"""The ledger store: the only place SQL lives (SQLite embedded default, PostgreSQL)."""
from __future__ import annotations

from .base import Store

__all__ = ["Store"]
