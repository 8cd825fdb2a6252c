"""FME Flow's Automation webhook trigger, as a baseline meets a layer webhook with it.

:class:`WebhookTrigger` listens on loopback and answers every ``POST`` with 200 at once,
handing its body to ``submit`` first (the Automation queues one job per delivery and never
refuses one). It cannot answer ArcGIS's challenge (``GET ?crc_token=``) nor check an
``x-esriHook-Signature``: a baseline's layer webhook is registered without a signature key,
so no challenge is sent and the bodies come unsigned.
"""
from __future__ import annotations

from typing import Any, Callable, Dict

from ..standins.server import Reply, Request, StandInServer

__all__ = ["WebhookTrigger"]


class WebhookTrigger(StandInServer):
    """An Automation's webhook trigger: each ``POST`` body to ``submit``, then 200."""

    kind = "flow-webhook"

    def __init__(self, submit: Callable[[bytes], None], *, port: int = 0) -> None:
        super().__init__(port=port)
        self._submit = submit
        self._received = 0

    def handle(self, request: Request) -> Reply:
        if request.method != "POST":
            return Reply.json(405, {"error": {"code": 405, "message": "POST only",
                                              "details": []}})
        with self.lock:
            self._received += 1
        self._submit(request.body)
        return Reply.json(200, {"success": True})

    def snapshot(self) -> Dict[str, Any]:
        """``received``: the deliveries taken (each queued one job)."""
        with self.lock:
            return {"received": self._received}
