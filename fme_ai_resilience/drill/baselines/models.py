"""How each baseline calls the Vision AI: its retry, its timeouts and what it assumes.

A :class:`Baseline` is a frozen value naming one way FME authors call a Vision AI service
today; :data:`BASELINES` holds them by name (``naive``, ``tenacity``, ``httpcaller``,
``sweep``), each with a ``note`` saying what it models and assumes, shown in every report.
:func:`baseline` looks one up.
"""
from __future__ import annotations

import abc
import importlib
import json
import random
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Mapping, Optional

import requests

from ...core.errors import ConfigurationError, ResilienceError

__all__ = ["Baseline", "Naive", "Tenacity", "HTTPCaller", "Sweep", "BASELINES", "baseline",
           "tenacity_wait", "read_json", "BaselineError", "TENACITY_MISSING", "Pause", "Send"]

TENACITY_MISSING = "tenacity is not installed (pip install 'fme-ai-resilience[drill]')"

Pause = Callable[[float], None]
Send = Callable[[], requests.Response]


class BaselineError(ResilienceError):
    """One photo of a baseline's job failed (what the FME job would log)."""


def _tenacity() -> Any:
    """The tenacity module, or None when it is not installed."""
    try:
        return importlib.import_module("tenacity")
    except ImportError:
        return None


def tenacity_wait(*, rng: random.Random) -> Any:
    """``tenacity.wait_random_exponential(multiplier=1, max=60)`` drawing from ``rng``.

    tenacity draws from the global random module; this is its own class and formula (the
    window ``min(60, 2 ** (attempt - 1))``, a uniform draw inside it) with the draw from the
    run's seeded source. Raises ConfigurationError when tenacity is not installed.
    """
    tenacity = _tenacity()
    if tenacity is None:
        raise ConfigurationError("baseline", "tenacity", TENACITY_MISSING)

    class SeededRandomExponential(tenacity.wait_random_exponential):  # type: ignore[misc]
        def __call__(self, retry_state: Any) -> float:
            high = tenacity.wait_exponential.__call__(self, retry_state)
            return rng.uniform(self.min, high)

    return SeededRandomExponential(multiplier=1, max=60)


def read_json(answer: requests.Response) -> Any:
    answer.raise_for_status()
    return answer.json()


@dataclass(frozen=True)
class Baseline(abc.ABC):
    """How one baseline calls the Vision AI service: its timeouts, its retry and its note.

    ``attempts`` is the most Vision AI calls per photo; ``transfers_per_job`` how many photos
    of one job are in flight at once; timeouts are production seconds.
    """

    name: str
    summary: str
    note: str
    attempts: int
    connect_timeout_s: float
    transfer_timeout_s: float
    transfers_per_job: int = 1

    def missing(self) -> Optional[str]:
        """Why this baseline cannot run here (a library not installed), else None."""
        return None

    @abc.abstractmethod
    def call(self, send: Send, *, pause: Pause, rng: random.Random) -> Any:
        """The decoded JSON answer of the Vision AI, calling ``send`` (one POST) as this
        baseline does and ``pause`` (production seconds) between calls; what finally fails
        is raised."""


@dataclass(frozen=True)
class Naive(Baseline):
    """Tries ``attempts`` times whatever failed, ``wait_s`` apart."""

    wait_s: float = 1.0

    def call(self, send: Send, *, pause: Pause, rng: random.Random) -> Any:
        for attempt in range(1, self.attempts + 1):
            try:
                return read_json(send())
            except (requests.RequestException, ValueError):
                if attempt == self.attempts:
                    raise
                pause(self.wait_s)
        raise BaselineError("no attempt was made")  # attempts >= 1: never reached


def _tenacity_retries(exc: BaseException) -> bool:
    """What the careful author retries: every ``requests.RequestException`` (connection
    errors, timeouts, a body cut short, ``ChunkedEncodingError``) but a 4xx other than 429,
    and a body that is not JSON (``JSONDecodeError``, a truncated answer)."""
    if isinstance(exc, requests.HTTPError) and exc.response is not None:
        status = exc.response.status_code
        return status == 429 or status >= 500
    return isinstance(exc, (requests.RequestException, json.JSONDecodeError))


@dataclass(frozen=True)
class Tenacity(Baseline):
    """``tenacity.retry`` around the call: random exponential wait, stop after ``attempts``."""

    def missing(self) -> Optional[str]:
        return TENACITY_MISSING if _tenacity() is None else None

    def call(self, send: Send, *, pause: Pause, rng: random.Random) -> Any:
        tenacity = _tenacity()
        if tenacity is None:
            raise ConfigurationError("baseline", self.name, TENACITY_MISSING)

        @tenacity.retry(wait=tenacity_wait(rng=rng),
                        stop=tenacity.stop_after_attempt(self.attempts),
                        retry=tenacity.retry_if_exception(_tenacity_retries),
                        sleep=pause, reraise=True)
        def analyse() -> Any:
            return read_json(send())

        return analyse()


@dataclass(frozen=True)
class HTTPCaller(Baseline):
    """HTTPCaller's retry as documented: ``retries`` after the first try, the wait doubling
    from ``initial_backoff_s``, on connection errors, 429 and 500-511."""

    retries: int = 3
    initial_backoff_s: float = 0.5

    def call(self, send: Send, *, pause: Pause, rng: random.Random) -> Any:
        for retry in range(self.retries + 1):
            last = retry == self.retries
            try:
                answer = send()
            except (requests.ConnectionError, requests.Timeout):
                if last:
                    raise
            else:
                if last or not (answer.status_code == 429 or 500 <= answer.status_code <= 511):
                    return read_json(answer)
            pause(self.initial_backoff_s * 2 ** retry)
        raise BaselineError("no attempt was made")  # the last retry returns or raises


_HTTPCALLER_NOTE = (
    "modelled from the documentation, not run in FME: HTTPCaller with retry on (connection "
    "errors, 429 and 500-511; 3 retries, the default), 60 s connect and 90 s transfer "
    "timeouts, up to 25 transfers in flight per job, nothing shared across engines; assumed "
    "where the documentation is silent: the wait doubling from 500 ms (0.5, 1, 2 s), "
    "Retry-After is not read, a body cut short is not retried")

@dataclass(frozen=True)
class Sweep(HTTPCaller):
    """HTTPCaller's retry, plus the FME author's safety net: a workspace scheduled every
    ``sweep_every_s`` that queries the layer for features whose assessment is empty (with a
    related table, the photos no row names) and processes up to ``sweep_limit`` of them per
    job, with HTTPCaller's ``transfers_per_job`` in flight."""

    sweep_every_s: float = 120.0
    sweep_limit: int = 100


_SWEEP_NOTE = (
    "the strongest peer an FME author builds: every webhook job as httpcaller, plus a "
    "workspace scheduled every 2 min for the whole run (a job on the same engines, on the "
    "schedule's cron marks) that queries the layer for features whose assessment is empty "
    "(with a photo repeat: the photos no related-table row names), at most 100 a job, and "
    "processes each photo from the layer's attachments the same way, up to 25 transfers in "
    "flight as HTTPCaller; no ledger, no breaker, no notification; a killed job is "
    "resubmitted by FME Flow's job recovery; the drill watches it until a pass queued after "
    "the last delivery leaves nothing owed")

#: The baselines by name.
BASELINES: Mapping[str, Baseline] = MappingProxyType({
    "naive": Naive(
        "naive", "three tries, a fixed 1 s wait",
        "three tries of the Vision AI call with a fixed 1 s wait whatever failed (a 400 "
        "too), Retry-After not read, a 30 s timeout; no ledger, no breaker",
        attempts=3, connect_timeout_s=30.0, transfer_timeout_s=30.0),
    "tenacity": Tenacity(
        "tenacity", "tenacity: random exponential wait, stop after 5",
        "tenacity.retry(wait=wait_random_exponential(multiplier=1, max=60), "
        "stop=stop_after_attempt(5)) on every requests.RequestException (connection errors, "
        "timeouts, ChunkedEncodingError) but a 4xx other than 429, and on a body that is not "
        "JSON; a 30 s timeout, Retry-After not read; no ledger, no breaker",
        attempts=5, connect_timeout_s=30.0, transfer_timeout_s=30.0),
    "httpcaller": HTTPCaller(
        "httpcaller", "FME HTTPCaller, retry on", _HTTPCALLER_NOTE,
        attempts=4, connect_timeout_s=60.0, transfer_timeout_s=90.0, transfers_per_job=25),
    "sweep": Sweep(
        "sweep", "HTTPCaller, retry on, plus a scheduled sweep", _SWEEP_NOTE,
        attempts=4, connect_timeout_s=60.0, transfer_timeout_s=90.0, transfers_per_job=25),
})


def baseline(name: str) -> Baseline:
    """The baseline called ``name``; raises ConfigurationError for an unknown one."""
    found = BASELINES.get(name) if isinstance(name, str) else None
    if found is None:
        raise ConfigurationError("name", name, f"must be one of {sorted(BASELINES)}")
    return found
