"""A PostgreSQL ledger that stops answering (a proxy that freezes: the socket stays open and
every byte is acknowledged, nothing comes back) or goes away for a few seconds is a bounded
wait and an unavailable ledger, with psycopg2 and with pg8000 (the FME Package's driver):
a statement is cut at the session's statement timeout plus a margin, a webhook and
``/healthz`` are answered 503 with Retry-After within that bound, and ``process --loop`` and
``compensate --loop`` outlive the outage and go on after it, the reaper too."""
from __future__ import annotations

import http.client
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from typing import List, Optional, Tuple
from urllib.parse import urlsplit

import pytest

from fme_ai_resilience.core.config.settings import DatabaseSettings, Settings
from fme_ai_resilience.core.intake.survey123 import parse_webhook
from fme_ai_resilience.gateway.app import make_app
from fme_ai_resilience.gateway.server import serving
from fme_ai_resilience.core.errors import StoreUnavailable
from fme_ai_resilience.store import open_store

from helpers.hostile import TcpProxy
from helpers.served import delivery


#: Settings that make the bound short: statement_timeout 1 s, so no answer is waited for past
#: 3 s (1 s + the 2 s margin); a connect gives up after 1 s (libpq: 2 s).
FAST = {"statement_timeout_s": 1.0, "lock_timeout_s": 0.5, "connect_timeout_s": 1.0}
FAST_ENV = {"FAIR_DATABASE_STATEMENT_TIMEOUT_S": "1", "FAIR_DATABASE_LOCK_TIMEOUT_S": "0.5",
            "FAIR_DATABASE_CONNECT_TIMEOUT_S": "1"}
#: The bound (3 s), one wait for the connection another request holds (3 s more), and room
#: for a loaded machine; Survey123 gives up after 10 s.
ANSWERED_WITHIN_S = 8.0
#: A frozen ledger thaws after this long whatever happens (an unbounded wait then ends).
THAW_AFTER_S = 14.0
SERVICE = "https://services.example.com/abc/arcgis/rest/services/inspection/FeatureServer"


@pytest.fixture(params=["psycopg2", "pg8000"])
def proxied(request, pg_ledger_url):
    """``(url, proxy)``: the emptied test ledger through a freezable proxy, by each driver."""
    if request.param == "pg8000":
        pytest.importorskip("pg8000", reason="pg8000 is not installed: pip install pg8000")
    base = f"postgresql+{request.param}://" + pg_ledger_url.split("://", 1)[1]
    parts = urlsplit(base)
    with TcpProxy((parts.hostname or "127.0.0.1", parts.port or 5432)) as proxy:
        yield proxy.url(base), proxy


def _frozen_for(proxy: TcpProxy, seconds: float) -> threading.Timer:
    proxy.freeze()
    timer = threading.Timer(seconds, proxy.thaw)
    timer.daemon = True
    timer.start()
    return timer


def test_a_statement_is_cut_at_the_bound_when_the_ledger_stops_answering(proxied):
    """Guarantee: a statement waits for a ledger that stops answering at most its
    statement_timeout_s plus 2 s, with either driver; then it is StoreUnavailable (never a
    raw socket error), and the store works again on a new connection once it answers."""
    url, proxy = proxied
    with open_store(url, settings=DatabaseSettings(**FAST)) as store:
        assert store.backlog(10) == 0
        timer = _frozen_for(proxy, THAW_AFTER_S)
        start = time.monotonic()
        try:
            with pytest.raises(StoreUnavailable):
                store.backlog(10)
            took = time.monotonic() - start
        finally:
            timer.cancel()
            proxy.thaw()
        assert took < ANSWERED_WITHIN_S, took
        assert store.backlog(10) == 0


def _request(port: int, method: str, path: str, body: Optional[bytes] = None,
             headers: Optional[dict] = None) -> Tuple[int, dict, float]:
    start = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        answer = conn.getresponse()
        answer.read()
        return answer.status, dict(answer.getheaders()), time.monotonic() - start
    finally:
        conn.close()


def test_a_webhook_and_healthz_get_503_with_retry_after_while_the_ledger_is_frozen(proxied):
    """Guarantee: while the ledger stops answering, a webhook and /healthz arriving together
    are each answered 503 with Retry-After within the bound (statement_timeout_s + 2 s, plus
    one wait for the shared connection), well inside Survey123's 10 s, with either driver."""
    url, proxy = proxied
    settings = Settings().with_values({"intake.feature_services": SERVICE})
    hook = {"Content-Type": "application/json", "X-Survey123-Event": "addData"}
    with open_store(url, settings=DatabaseSettings(**FAST)) as store, \
            serving(make_app(settings, store=store)) as base:
        port = int(base.rstrip("/").rsplit(":", 1)[1])
        assert _request(port, "POST", "/", delivery(1), hook)[0] == 202
        answers: "queue.Queue" = queue.Queue()

        def ask(*request) -> None:
            try:
                answers.put((request[1], _request(port, *request)))
            except OSError as exc:   # the client's own 10 s timeout
                answers.put((request[1], exc))

        timer = _frozen_for(proxy, THAW_AFTER_S)
        try:
            asking = [threading.Thread(target=ask, args=("POST", "/", delivery(2), hook)),
                      threading.Thread(target=ask, args=("GET", "/healthz"))]
            for thread in asking:
                thread.start()
            for thread in asking:
                thread.join(30)
        finally:
            timer.cancel()
            proxy.thaw()
        got = dict(answers.get_nowait() for _ in range(2))
    for path, answer in got.items():
        assert not isinstance(answer, Exception), (path, answer)
        status, headers, took = answer
        assert status == 503, (path, status)
        assert int(headers["Retry-After"]) >= 1, (path, headers)
        assert took < ANSWERED_WITHIN_S, (path, took)


class _Loop:
    """A ``--loop`` command as a process; its output lines as they come."""

    def __init__(self, args: List[str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fme_ai_resilience", *args], stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1", FAIR_INTAKE_FEATURE_SERVICES=SERVICE,
                     FAIR_VISION_ENDPOINT="http://127.0.0.1:9/vision",
                     **FAST_ENV))
        self.lines: "queue.Queue[Optional[str]]" = queue.Queue()
        self.seen: List[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_for(self, text: str, timeout_s: float) -> None:
        """Wait for an output line containing ``text``; AssertionError if none comes in time
        or the process ends."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no line with {text!r} within {timeout_s:g} s: "
                                     f"{self.seen[-20:]}") from None
            if line is None:
                raise AssertionError(f"exited ({self.proc.wait()}) without {text!r}: "
                                     f"{self.seen[-20:]}")
            self.seen.append(line)
            if text in line:
                return

    def skip_ahead(self) -> None:
        """Forget the lines written so far."""
        while True:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                return
            if line is None:
                self.lines.put(None)
                return
            self.seen.append(line)

    def stop(self) -> Tuple[int, List[str]]:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        time.sleep(0.1)
        self.skip_ahead()
        return code, self.seen


def _unavailable_while_frozen(loop: "_Loop", proxy: TcpProxy, seconds: float) -> None:
    """Freeze the ledger for ``seconds``; the loop must log it unavailable within the bound;
    return once it is thawed."""
    timer = _frozen_for(proxy, seconds)
    try:
        loop.skip_ahead()
        loop.wait_for("ledger unavailable", ANSWERED_WITHIN_S)
        timer.join(THAW_AFTER_S)
    finally:
        timer.cancel()
        proxy.thaw()


def test_process_loop_outlives_a_frozen_ledger_and_goes_on_after_it(proxied):
    """Guarantee: `process --loop` notices a ledger that stops answering within the bound,
    logs it as unavailable, keeps running (no traceback), and runs batches again once the
    ledger answers; it exits 0 only on SIGTERM."""
    url, proxy = proxied
    loop = _Loop(["process", "--loop", "--idle", "0.2", "--json", "--db", url])
    try:
        loop.wait_for('"stopped"', 30)           # a first batch ran
        _unavailable_while_frozen(loop, proxy, 6.0)
        loop.skip_ahead()
        loop.wait_for('"NO_DUE_TASK"', 20)       # batches again, against the ledger
        assert loop.proc.poll() is None, loop.seen[-20:]
    finally:
        code, seen = loop.stop()
    assert code == 0, seen[-20:]
    assert not any("Traceback" in line for line in seen), seen


def test_compensate_loop_outlives_a_frozen_ledger_and_reaps_after_it(proxied):
    """Guarantee: `compensate --loop` outlives a ledger frozen for 5 s (past the 3 s bound),
    logging it unavailable, and its reaper then returns tasks whose leases expired to
    PENDING; it exits 0 only on SIGTERM."""
    url, proxy = proxied
    loop = _Loop(["compensate", "--loop", "--interval", "0.3", "--no-reconcile", "--json",
                  "--db", url])
    try:
        loop.wait_for('"reaped"', 30)            # a first pass ran
        _unavailable_while_frozen(loop, proxy, 5.0)
        now = time.time()
        body = json.loads(delivery(3, photos=8))
        with open_store(url) as store:
            for sub in parse_webhook(body):
                store.register(sub, 10_000, now=now - 120)
            claimed = store.claim("gone-processor", 8, 1.0, now=now - 60)
        assert len(claimed) == 8
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with open_store(url) as store:
                if store.counts()["PROCESSING"] == 0:
                    break
            time.sleep(0.3)
        with open_store(url) as store:
            counts = store.counts()
        assert counts["PROCESSING"] == 0 and counts["PENDING"] == 8, counts
        assert loop.proc.poll() is None, loop.seen[-20:]
    finally:
        code, seen = loop.stop()
    assert code == 0, seen[-20:]
    assert not any("Traceback" in line for line in seen), seen
