"""The people a subject tells: a mailbox standing in for what WS-03's Emailer sends.

:class:`NotificationStandIn` keeps every message handed to it, thread-safe: the task key or
feature GlobalID it names, its cause and text, and when it came (monotonic seconds). The drill
forwards the library's compensator notifications to it as WS-03's PythonCaller hands them to
FME's Emailer; a baseline writes to it only if its model tells anyone.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

__all__ = ["NotificationStandIn", "Message"]


@dataclass(frozen=True)
class Message:
    """One message people received: what it names, its cause and text, when (monotonic s)."""

    cause: str
    text: str
    at: float
    task_key: Optional[str] = None
    feature_global_id: Optional[str] = None


class NotificationStandIn:
    """A mailbox: :meth:`notify` adds a message, :meth:`snapshot` lists them."""

    kind = "notifications"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._messages: List[Message] = []

    def __repr__(self) -> str:
        return f"NotificationStandIn(messages={len(self._messages)})"

    def notify(self, cause: str, text: str, *, task_key: Optional[str] = None,
               feature_global_id: Optional[str] = None, at: Optional[float] = None) -> None:
        """A person is told ``text`` because of ``cause`` about a task or a feature, ``at``
        (monotonic seconds, default now: a message handed on later says when it was sent)."""
        with self._lock:
            self._messages.append(Message(str(cause), str(text),
                                          time.monotonic() if at is None else float(at),
                                          task_key, feature_global_id))

    def snapshot(self) -> Dict[str, Any]:
        """``messages``: every message so far, in order."""
        with self._lock:
            return {"messages": list(self._messages)}
