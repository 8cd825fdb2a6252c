"""A Vision AI service for the ``responses`` library, with scripted faults.

:class:`FakeVision` answers POSTs to its ``endpoint`` as the library's ``generic`` provider
reads them (``{"condition", "confidence", "labels", "model_version"}``). Each call takes the
next step of its script; when the script is spent every call gets a good answer (or the
``then`` step). A step is an HTTP status (``503``; ``200`` is a good answer), a name
(``"ok"``, ``"drift"``: the answer with ``confidence`` renamed ``score``, as a model whose JSON
changed; ``"html"``: a proxy's HTML 502 page) or a :class:`Fault` (a status with a
``Retry-After`` header, or any body)::

    vision = FakeVision().script(503, 503, Fault(429, retry_after=7), "drift")
    with responses.RequestsMock() as mock:
        vision.register(mock)
        ...

``responses`` is imported only by :meth:`FakeVision.register` (a test dependency, not one of
the library's). The calls made are in :attr:`FakeVision.calls`.
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple, Union

from ..core.checks import count, ratio
from ..core.errors import ConfigurationError

__all__ = ["FakeVision", "Fault", "Step", "DRIFTED_MODEL_VERSION"]

DRIFTED_MODEL_VERSION = "fake-vision-2"
_HTML_502 = "<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"
_NAMES = ("ok", "drift", "html")


@dataclass(frozen=True)
class Fault:
    """One scripted answer that is not a plain good one: ``status`` (with ``retry_after``
    seconds as a ``Retry-After`` header), and ``body`` (default: a JSON error naming the
    status) of ``content_type``."""

    status: int
    retry_after: Optional[int] = None
    body: Optional[str] = None
    content_type: str = "application/json"

    def __post_init__(self) -> None:
        count("status", self.status, minimum=100, maximum=599)
        if self.retry_after is not None:
            count("retry_after", self.retry_after)


Step = Union[int, str, Fault]


class FakeVision:
    """A scripted Vision AI service at ``endpoint`` (see the module docstring).

    ``condition`` and ``confidence`` are every good answer's; ``labels`` its label names.
    """

    def __init__(self, endpoint: str = "https://vision.test/analyze", *,
                 condition: str = "good", confidence: float = 0.9,
                 labels: Tuple[str, ...] = ("utility asset",),
                 model_version: str = "fake-vision-1", then: Step = "ok") -> None:
        if not isinstance(endpoint, str) or not endpoint.startswith(("http://", "https://")):
            raise ConfigurationError("endpoint", endpoint, "must be an http(s) URL")
        self.endpoint = endpoint
        self.condition = condition
        self.confidence = ratio("confidence", confidence)
        self.labels = tuple(labels)
        self.model_version = model_version
        self.then = _check_step(then)
        self._script: List[Step] = []
        self._lock = threading.Lock()
        #: ``(HTTP status, step)`` of every call answered, in order.
        self.calls: List[Tuple[int, str]] = []
        #: The ``responses`` mock it answers on (after :meth:`register`), for other answers.
        self.mock: Any = None

    def __repr__(self) -> str:
        return f"FakeVision({self.endpoint!r}, {len(self._script)} step(s) left)"

    def script(self, *steps: Step) -> "FakeVision":
        """Append ``steps`` to the script (returns self, to chain)."""
        checked = [_check_step(s) for s in steps]
        with self._lock:
            self._script.extend(checked)
        return self

    def fail(self, status: int, times: int = 1, *, retry_after: Optional[int] = None
             ) -> "FakeVision":
        """Append ``times`` answers of ``status`` (with ``Retry-After`` when given)."""
        count("times", times, minimum=1)
        return self.script(*[Fault(status, retry_after)] * times)

    def answer(self, *, drift: bool = False) -> Dict[str, Any]:
        """The JSON of a good answer (drifted: ``confidence`` renamed ``score``)."""
        key = "score" if drift else "confidence"
        return {"condition": self.condition, key: self.confidence,
                "labels": [{"name": n, key: self.confidence} for n in self.labels],
                "model_version": DRIFTED_MODEL_VERSION if drift else self.model_version}

    def register(self, mock: Any) -> None:
        """Answer POSTs to :attr:`endpoint` on ``mock`` (a ``responses.RequestsMock``, or the
        ``responses`` module while it is active)."""
        import responses   # a test dependency: only needed here

        mock.add_callback(responses.POST, self.endpoint, callback=self._reply)
        self.mock = mock

    @property
    def left(self) -> int:
        """Scripted steps not yet used."""
        with self._lock:
            return len(self._script)

    def _reply(self, request: Any) -> Tuple[int, Dict[str, str], str]:
        with self._lock:
            step = self._script.pop(0) if self._script else self.then
        status, headers, body = self._render(step)
        with self._lock:
            self.calls.append((status, step if isinstance(step, str) else str(status)))
        return status, headers, body

    def _render(self, step: Step) -> Tuple[int, Dict[str, str], str]:
        json_type = {"Content-Type": "application/json"}
        if step in ("ok", 200):
            return 200, json_type, json.dumps(self.answer())
        if step == "drift":
            return 200, json_type, json.dumps(self.answer(drift=True))
        if step == "html":
            return 502, {"Content-Type": "text/html"}, _HTML_502
        fault = step if isinstance(step, Fault) else Fault(int(step))
        headers = {"Content-Type": fault.content_type}
        if fault.retry_after is not None:
            headers["Retry-After"] = str(fault.retry_after)
        body = fault.body if fault.body is not None else json.dumps(
            {"error": {"code": fault.status, "message": f"scripted HTTP {fault.status}"}})
        return fault.status, headers, body


def _check_step(step: Step) -> Step:
    if isinstance(step, Fault) or step in _NAMES:
        return step
    if isinstance(step, int) and not isinstance(step, bool):
        count("step", step, minimum=100, maximum=599)
        return step
    raise ConfigurationError("step", step, f"must be an HTTP status, a Fault or one of "
                                           f"{list(_NAMES)}")
