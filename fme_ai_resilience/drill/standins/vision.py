"""A fault-injecting Vision AI service on loopback that speaks the library's ``generic`` provider.

It takes what ``build_request("generic", ...)`` sends: a POST of the image bytes
(``application/octet-stream``) or of JSON ``{"image_url": ...}`` (the stand-in fetches the
URL, which must be on loopback). A successful answer is what ``normalize("generic", payload)``
reads with the default ``GenericMapping``::

    {"condition": "fair", "confidence": 0.8123,
     "labels": [{"name": "fair", "confidence": 0.8123}, ...three labels...],
     "model_version": "standin-vision-1.0"}

The condition and confidence of a photo are its ground truth, :meth:`VisionStandIn.truth`: a
function of the image's SHA-256 and the seed only, so a photo always gets the same answer.

Faults come from a :class:`FaultSchedule`, in schedule seconds (see ``server``), checked in
this order for each call:

1. a wrong or missing bearer token (when ``token`` is set): 401, outcome ``unauthorized``;
2. an outage window: 503 with a JSON error body (the listener stays up: refusing connections
   on a schedule would mean closing the listening socket and re-binding the same port later,
   which another process can take in between; ``stop()`` then ``start()`` does refuse
   connections, on the same port, when a test wants that), outcome ``outage``;
3. the token bucket (``rate_limit_per_s``), or with ``rate_window_s`` a quota of
   ``rate_limit_per_s * rate_window_s`` calls per fixed window (a per-minute quota, whose
   429 says to wait until the window ends: up to a minute): 429 with ``Retry-After`` in whole
   schedule seconds (at least 1), outcome ``rate_limited``;
4. an unreadable request (no image, not an image, a URL that cannot be fetched): 400,
   outcome ``bad_request``;
5. the model's latency (``latency_s``, or the ``latency_profile`` at the call's time, or
   ``slow_photo_latency_s`` for a slow photo; plus a uniform draw up to ``latency_jitter_s``),
   waited in a queue when ``capacity`` calls are being computed already, then one draw against
   the rates: ``server_error`` (500 or 503, JSON error), ``html_502`` (a proxy's ``text/html``
   page), ``truncated`` (half the JSON: either the connection closes after a
   ``Content-Length`` that promised all of it, or a ``Content-Length`` that matches the cut);
   a photo drawn under ``cut_photo_rate`` has its first answers cut so (1 to ``cut_answers``
   of them, drawn per photo);
6. otherwise an answer: ``drift`` from ``drift_from_s`` on, until ``drift_until_s`` (the
   operator's fix: the model answers in schema again; None: never fixed) (``confidence``
   renamed ``score`` everywhere, model version 2.0), else ``constant`` from ``constant_confidence_from_s`` on
   (the answer and every label at :data:`CONSTANT_CONFIDENCE`), else ``ok``.

The draws for a photo's n-th call that reaches the model come from
``random.Random(f"{seed}:{sha256}:{n}")``, so they do not depend on how calls for different
photos interleave. Latency is waited in real time (``latency_s * time_scale``).
"""
from __future__ import annotations

import hashlib
import http.client
import json
import math
import random
import threading
import time
from collections import Counter
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union
from urllib.parse import urlsplit

from ...core.checks import name
from ...core.errors import ConfigurationError
from .server import LOOPBACK_HOSTS, Reply, Request, StandInServer
from .vision_faults import TRUNCATION_MODES, FaultSchedule, Quota, RateBucket

__all__ = ["FaultSchedule", "VisionStandIn", "OUTCOMES", "ANALYSED_OUTCOMES", "MODEL_VERSION",
           "DRIFTED_MODEL_VERSION", "CONSTANT_CONFIDENCE", "HTML_502_PAGE", "TRUNCATION_MODES"]

#: Every outcome a call can have, as counted in ``snapshot()["by_outcome"]``.
OUTCOMES = ("ok", "server_error", "html_502", "truncated", "rate_limited", "outage", "drift",
            "constant", "bad_request", "unauthorized")
#: The outcomes where the model produced a whole answer (a call a real service would bill).
ANALYSED_OUTCOMES = ("ok", "drift", "constant")
MODEL_VERSION = "standin-vision-1.0"
DRIFTED_MODEL_VERSION = "standin-vision-2.0"
#: The one confidence every label and answer carries once the constant-confidence bug is on.
CONSTANT_CONFIDENCE = 0.9
HTML_502_PAGE = (b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
                 b"<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n"
                 b"</body>\r\n</html>\r\n")

_MAX_IMAGE_BYTES = 20 * 1024 * 1024
_FETCH_TIMEOUT_S = 5.0
_IMAGE_MAGIC = (b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n", b"GIF87a", b"GIF89a", b"BM")
_LABELS = ("utility asset", "outdoor scene")

def _error(status: int, code: Union[int, str], message: str,
           headers: Tuple[Tuple[str, str], ...] = (), delay_s: float = 0.0) -> Reply:
    return Reply.json(status, {"error": {"code": code, "message": message}}, headers, delay_s)


class VisionStandIn(StandInServer):
    """A Vision AI service on 127.0.0.1 that fails on a :class:`FaultSchedule` and counts calls.

    ``conditions`` are the answers it gives (the ground truth picks one per photo); ``token``,
    when set, is the bearer token every call must carry (``Authorization: Bearer <token>``);
    ``url_field`` is the JSON field of an image URL. Post to :attr:`endpoint` (any path works).
    ``retry_after_ms`` sends a 429's wait as ``retry-after-ms`` in real milliseconds (as Azure
    OpenAI does, with millisecond precision) instead of ``Retry-After`` in whole schedule
    seconds, so a compressed schedule's waits stay in proportion.
    """

    kind = "vision"

    def __init__(self, schedule: Optional[FaultSchedule] = None, *, seed: int = 0,
                 conditions: Sequence[str] = ("good", "fair", "damaged"),
                 time_scale: float = 1.0, port: int = 0, token: Optional[str] = None,
                 url_field: str = "image_url", retry_after_ms: bool = False) -> None:
        super().__init__(port=port, time_scale=time_scale)
        if schedule is None:
            schedule = FaultSchedule()
        if not isinstance(schedule, FaultSchedule):
            raise ConfigurationError("schedule", schedule, "must be a FaultSchedule")
        self.schedule = schedule
        self.seed = seed
        self.conditions = tuple(name("conditions", c) for c in conditions)
        if not self.conditions:
            raise ConfigurationError("conditions", conditions, "must name at least one")
        self.token = token
        self.url_field = name("url_field", url_field)
        self.retry_after_ms = bool(retry_after_ms)
        self._clear()

    @property
    def endpoint(self) -> str:
        """The URL to post images to."""
        return f"{self.url}/analyze"

    def truth(self, image: bytes) -> Tuple[str, float]:
        """The photo's ground truth: ``(condition, confidence)``, from its SHA-256 and the seed."""
        return self._truth(hashlib.sha256(bytes(image)).hexdigest())

    def truth_of(self, sha256: str) -> Tuple[str, float]:
        """The ground truth of the photo whose bytes have this SHA-256 (see :meth:`truth`)."""
        return self._truth(sha256)

    def _truth(self, sha: str) -> Tuple[str, float]:
        digest = hashlib.sha256(f"truth:{self.seed}:{sha}".encode("ascii")).digest()
        condition = self.conditions[int.from_bytes(digest[:4], "big") % len(self.conditions)]
        confidence = 0.55 + 0.44 * int.from_bytes(digest[4:8], "big") / 0xFFFFFFFF
        return condition, round(confidence, 4)

    # --- counters --------------------------------------------------------------------------

    def _clear(self) -> None:
        self._total = 0
        self._by_outcome: Counter = Counter({o: 0 for o in OUTCOMES})
        self._by_sha: Counter = Counter()
        self._analysed: Counter = Counter()
        self._draws: Counter = Counter()
        self._answers: Dict[str, Tuple[str, float]] = {}
        self._outage_calls = [0] * len(self.schedule.outages)
        self._log: List[Tuple[float, Optional[str], str]] = []
        self._unread: List[Tuple[float, str, str]] = []
        self._sent: List[Tuple[float, str, str]] = []
        self._closed: List[Tuple[float, str, str]] = []
        schedule = self.schedule
        self._bucket: Optional[Union[RateBucket, Quota]] = None
        if schedule.rate_limit_per_s is not None and schedule.rate_window_s is not None:
            self._bucket = Quota(schedule.burst, schedule.rate_window_s)
        elif schedule.rate_limit_per_s is not None:
            self._bucket = RateBucket(float(schedule.rate_limit_per_s), schedule.burst)
        self._cut: Counter = Counter()
        capacity = schedule.capacity
        self._computing = threading.BoundedSemaphore(capacity) if capacity else None

    def snapshot(self) -> Dict[str, Any]:
        """The counters: ``total``; ``by_outcome`` (every outcome of :data:`OUTCOMES`);
        ``by_sha256`` (every call per image SHA-256, refusals included); ``analysed_by_sha256``
        (calls that got a whole answer, :data:`ANALYSED_OUTCOMES`; a JSON ``image_url`` call
        refused before its URL was fetched has no SHA-256); ``outages`` (per window:
        ``start_s``, ``end_s`` and the ``calls`` that arrived inside it); ``log``, the
        time-ordered ``(schedule_s, sha256 or None, outcome)`` of every call;
        ``peak_in_flight``, the most calls answered at once; ``answers``, per SHA-256, the
        ``(condition, confidence)`` of the usable answer (outcome ``ok``, in schema) given for
        those bytes, for a photo that got one; ``left``, ``sent`` and ``closed``, the
        ``(monotonic s, sha256, outcome)`` of every answer whose client closed its connection
        before it was sent, of every answer sent whole, and of every answer sent whole on a
        connection its client closed afterwards (the time is the close's)."""
        with self.lock:
            return {
                "peak_in_flight": self.concurrency()["peak_in_flight"],
                "total": self._total,
                "by_outcome": dict(self._by_outcome),
                "by_sha256": dict(self._by_sha),
                "analysed_by_sha256": dict(self._analysed),
                "outages": [{"start_s": s, "end_s": e, "calls": n} for (s, e), n in
                            zip(self.schedule.outages, self._outage_calls)],
                "log": sorted(self._log, key=lambda entry: entry[0]),
                "answers": dict(self._answers),
                "left": list(self._unread),
                "sent": list(self._sent),
                "closed": list(self._closed),
            }

    def reset(self) -> None:
        """Counters to zero, the bucket full, every photo's draws from the start, and schedule
        time back to 0 (the next run gets the same answers as the first)."""
        with self.lock:
            self._clear()
            self.restart_schedule()
            self.reset_concurrency()

    def _record(self, at_s: float, sha: Optional[str], outcome: str) -> None:
        with self.lock:
            self._total += 1
            self._by_outcome[outcome] += 1
            if sha is not None:
                self._by_sha[sha] += 1
                if outcome in ANALYSED_OUTCOMES:
                    self._analysed[sha] += 1
                if outcome == "ok":
                    self._answers[sha] = self._truth(sha)
            self._log.append((at_s, sha, outcome))

    # --- answering -------------------------------------------------------------------------

    def handle(self, request: Request) -> Reply:
        at_s = self.schedule_time()
        raw_sha = (hashlib.sha256(request.body).hexdigest()
                   if request.body and "json" not in request.content_type else None)
        if request.method != "POST":
            self._record(at_s, None, "bad_request")
            return _error(405, "MethodNotAllowed", "POST an image")
        if self.token is not None and request.header("authorization") != f"Bearer {self.token}":
            self._record(at_s, raw_sha, "unauthorized")
            return _error(401, "Unauthorized", "Access denied due to invalid subscription key.")
        with self.lock:
            window = self.schedule.outage_at(at_s)
            if window is not None:
                self._outage_calls[window] += 1
                self._record(at_s, raw_sha, "outage")
                return _error(503, 503, "Service Unavailable")
            wait_s = self._bucket.take(at_s) if self._bucket is not None else None
            if wait_s is not None:
                self._record(at_s, raw_sha, "rate_limited")
                seconds = max(1, math.ceil(wait_s - 1e-9))
                header = (("retry-after-ms", str(max(1, math.ceil(
                    self.real_seconds(wait_s) * 1000)))) if self.retry_after_ms
                    else ("Retry-After", str(seconds)))
                return _error(429, "429", f"Rate limit is exceeded. Try again in {seconds} "
                              f"seconds.", headers=(header,))
        image, problem = self._image(request)
        if image is None:
            self._record(at_s, raw_sha, "bad_request")
            return _error(400, problem[0], problem[1])
        sha = hashlib.sha256(image).hexdigest()
        with self.lock:
            nth = self._draws[sha]
            self._draws[sha] += 1
        rng = random.Random(f"{self.seed}:{sha}:{nth}")
        schedule = self.schedule
        latency = (schedule.slow_photo_latency_s if self._photo_draw(sha, "slow")
                   < schedule.slow_photo_rate else schedule.latency_at(at_s))
        delay = self.real_seconds(latency + rng.uniform(0, schedule.latency_jitter_s))
        draw, pick = rng.random(), rng.random()
        if self._computing is not None:
            delay = self._compute(delay)
        if self._cut_now(sha):
            return self._truncated(at_s, sha, pick, delay)
        if draw < schedule.error_rate:
            self._record(at_s, sha, "server_error")
            status = 500 if pick < 0.5 else 503
            return _error(status, status, "The server had an error while processing the "
                          "request.", delay_s=delay)
        draw -= schedule.error_rate
        if draw < schedule.html_502_rate:
            self._record(at_s, sha, "html_502")
            return Reply(502, HTML_502_PAGE, "text/html", delay_s=delay)
        draw -= schedule.html_502_rate
        if draw < schedule.truncated_rate:
            return self._truncated(at_s, sha, pick, delay)
        outcome = "ok"
        if schedule.drifted(at_s) or self._drifts(sha):
            outcome = "drift"
        elif (schedule.constant_confidence_from_s is not None
              and at_s >= schedule.constant_confidence_from_s):
            outcome = "constant"
        self._record(at_s, sha, outcome)
        return Reply(200, self._answer_bytes(sha, outcome), "application/json", delay_s=delay,
                     tag=(sha, outcome))

    def client_left(self, reply: Reply) -> None:
        """The client of an answer left before it was sent (its process died, or it gave up
        waiting): the answer was computed, and paid, for nobody."""
        self._note(self._unread, reply)

    def reply_sent(self, reply: Reply) -> None:
        self._note(self._sent, reply)

    def client_closed(self, replies: Tuple[Reply, ...]) -> None:
        """The client of these answers closed the connection they went out on: when it died,
        they died with it unless it had kept them."""
        for reply in replies:
            self._note(self._closed, reply)

    def _note(self, into: List[Tuple[float, str, str]], reply: Reply) -> None:
        if reply.tag is not None:
            sha, outcome = reply.tag
            with self.lock:
                into.append((time.monotonic(), sha, outcome))

    def _truncated(self, at_s: float, sha: str, pick: float, delay: float) -> Reply:
        """Half of the answer: the connection closes after a ``Content-Length`` that promised
        all of it (``close``), or a ``Content-Length`` that matches the cut (``short``)."""
        self._record(at_s, sha, "truncated")
        whole = self._answer_bytes(sha, "ok")
        cut = max(1, len(whole) // 2)
        mode = self.schedule.truncated_mode
        if mode == "either":
            mode = "close" if pick < 0.5 else "short"
        if mode == "close":
            return Reply(200, whole, "application/json", delay_s=delay, send_bytes=cut)
        return Reply(200, whole[:cut], "application/json", delay_s=delay)

    def _photo_draw(self, sha: str, what: str) -> float:
        """A draw in [0, 1) fixed for the photo and the seed (one per fault kind)."""
        return random.Random(f"{self.seed}:{sha}:{what}").random()

    def cut_count(self, image: bytes) -> int:
        """How many of the photo's first answers the schedule cuts short (0: none)."""
        return self._cuts_for(hashlib.sha256(bytes(image)).hexdigest())

    def _cuts_for(self, sha: str) -> int:
        schedule = self.schedule
        if self._photo_draw(sha, "cut") >= schedule.cut_photo_rate:
            return 0
        return 1 + int(self._photo_draw(sha, "cuts") * schedule.cut_answers)

    def _cut_now(self, sha: str) -> bool:
        """Whether this call's answer is one of the photo's first ones the schedule cuts."""
        wanted = self._cuts_for(sha)
        if not wanted:
            return False
        with self.lock:
            if self._cut[sha] >= wanted:
                return False
            self._cut[sha] += 1
            return True

    def slow(self, image: bytes) -> bool:
        """Whether the model takes ``slow_photo_latency_s`` over this photo."""
        return self._photo_draw(hashlib.sha256(bytes(image)).hexdigest(),
                                "slow") < self.schedule.slow_photo_rate

    def _compute(self, delay: float) -> float:
        """Wait for one of the ``capacity`` places, compute for ``delay`` real seconds and
        give the place back; nothing is left to wait before the answer (0)."""
        computing = self._computing
        assert computing is not None
        while not computing.acquire(timeout=0.05):
            if self.wait(0):
                return 0.0
        try:
            self.wait(delay)
        finally:
            computing.release()
        return 0.0

    def drifts(self, image: bytes) -> bool:
        """Whether every answer for this photo drifts (its draw under ``drift_rate``)."""
        return self._drifts(hashlib.sha256(image).hexdigest())

    def _drifts(self, sha: str) -> bool:
        rate = self.schedule.drift_rate
        return bool(rate) and random.Random(f"{self.seed}:{sha}:drift").random() < rate

    def _answer_bytes(self, sha: str, outcome: str) -> bytes:
        condition, confidence = self._truth(sha)
        if outcome == "constant":
            confidence = CONSTANT_CONFIDENCE
            scores = [confidence] * (1 + len(_LABELS))
        else:
            scores = [confidence] + [round(confidence * f, 4) for f in (0.8, 0.6)]
        key = "score" if outcome == "drift" else "confidence"
        labels = [{"name": n, key: c} for n, c in zip((condition,) + _LABELS, scores)]
        payload = {"condition": condition, key: confidence, "labels": labels,
                   "model_version": DRIFTED_MODEL_VERSION if outcome == "drift"
                   else MODEL_VERSION}
        return json.dumps(payload, separators=(",", ":")).encode("utf-8")

    def _image(self, request: Request) -> Tuple[Optional[bytes], Tuple[str, str]]:
        """The image bytes a request carries, else None and ``(error code, message)``."""
        if "json" in request.content_type:
            try:
                data = json.loads(request.body.decode("utf-8"))
            except ValueError:
                return None, ("InvalidRequest", "The body is not JSON.")
            url = data.get(self.url_field) if isinstance(data, dict) else None
            if not isinstance(url, str) or not url:
                return None, ("InvalidRequest", f"The JSON body has no {self.url_field}.")
            image, problem = _fetch(url)
            if image is None:
                return None, ("InvalidImageUrl", problem)
        else:
            image = request.body
        if not image:
            return None, ("InvalidRequest", "The body is empty.")
        if len(image) > _MAX_IMAGE_BYTES:
            return None, ("InvalidImageSize", "The image is over 20 MB.")
        if not image.startswith(_IMAGE_MAGIC) and not (image[:4] == b"RIFF"
                                                       and image[8:12] == b"WEBP"):
            return None, ("InvalidImageFormat", "The data is not an image.")
        return image, ("", "")


def _fetch(url: str) -> Tuple[Optional[bytes], str]:
    """The bytes at a loopback ``url``, else None and why (no proxy, no redirect followed)."""
    parts = urlsplit(url)
    if parts.scheme != "http" or (parts.hostname or "") not in LOOPBACK_HOSTS:
        return None, "The stand-in fetches only http:// URLs on loopback."
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port or 80,
                                      timeout=_FETCH_TIMEOUT_S)
    try:
        conn.request("GET", target)
        answer = conn.getresponse()
        body = answer.read(_MAX_IMAGE_BYTES + 1)
    except (http.client.HTTPException, OSError) as exc:
        return None, f"Fetching the image failed: {exc}."
    finally:
        conn.close()
    if answer.status != 200:
        return None, f"Fetching the image answered HTTP {answer.status}."
    return body, ""
