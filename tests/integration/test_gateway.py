"""The gateway over real HTTP on loopback, backed by PostgreSQL: the whole status contract.

Each test starts the WSGI app on a wsgiref server (port 0) in a thread. The last test scans
every text column of every table and every captured log record for the portal token.
"""
from __future__ import annotations

import contextlib
import json
import logging
import threading
import urllib.error
import urllib.request
from typing import Any, Dict, Iterator, List, Tuple
from wsgiref.simple_server import WSGIRequestHandler, make_server

import pytest

from fme_ai_resilience.core.clock import SystemClock
from fme_ai_resilience.gateway import make_app
from fme_ai_resilience.core.intake.keys import body_key
from fme_ai_resilience.core.ledger import Status, TaskOutcome
from fme_ai_resilience.core.config.settings import IntakeSettings, Settings
from fme_ai_resilience.store import open_store
from fme_ai_resilience.core.intake.submission import Submission

from helpers.postgres import pg_run
from helpers import DATA


pytestmark = pytest.mark.postgres

BODY = (DATA / "survey123_add.json").read_bytes()
TOKEN = "PORTAL-TOKEN-7f3a9c1e5b2d4a6f8e0c"
KEY = "5c1e0a2b-9d3f-4e61-8a7b-0f2c3d4e5a6b/a0b1c2d3-e4f5-4a6b-8c7d-9e0f1a2b3c4d"


class _Records(logging.Handler):
    """Every log record of the module, formatted with its arguments (what a log file holds)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: List[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record) + (record.exc_text or ""))


@pytest.fixture(scope="module")
def records() -> Iterator[_Records]:
    handler = _Records()
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    yield handler
    root.removeHandler(handler)
    root.setLevel(old_level)


@pytest.fixture
def pg(pg_store_url, records):
    store = open_store(pg_store_url, init_schema=True)
    store.clear()
    yield store
    store.close()


class _Handler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        logging.getLogger("test.http").info(format, *args)


@contextlib.contextmanager
def serving(store, **intake) -> Iterator[str]:
    """The gateway for ``store`` on 127.0.0.1:<free port>; yields its base URL."""
    settings = Settings(intake=IntakeSettings(**intake))
    app = make_app(settings, store=store, clock=SystemClock())
    server = make_server("127.0.0.1", 0, app, handler_class=_Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield "http://127.0.0.1:%d" % server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def post(url: str, body: bytes, delivery: str) -> Tuple[int, Dict[str, str], Dict[str, Any]]:
    headers = {"Content-Type": "application/json; charset=UTF-8",
               "X-Survey123-Event": "addData", "X-Survey123-Delivery": delivery}
    request = urllib.request.Request(url + "/", data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), json.loads(err.read())


def fill(store, n: int, now: float) -> None:
    for i in range(n):
        store.register(Submission(idempotency_key=f"filler-{i}", feature_global_id="f",
                                  trace_id="t"), 10 ** 6, now=now)


def photos(n: int) -> bytes:
    data = json.loads(BODY)
    data["feature"]["attachments"]["photo"] = [
        {"globalId": "{%08d-1111-4222-8333-444444444444}" % i, "id": i,
         "contentType": "image/jpeg"} for i in range(n)]
    return json.dumps(data).encode()


def test_first_delivery_then_redelivery_pending_then_succeeded(pg):
    """202 first; a new delivery id 202 while pending; 200 once the task SUCCEEDED."""
    with serving(pg) as url:
        status, _, body = post(url, BODY, "delivery-1")
        assert status == 202 and body["status"] == "accepted"
        assert pg.get(KEY).status is Status.PENDING
        status, _, body = post(url, BODY, "delivery-2")
        assert status == 202 and body["status"] == "duplicate_in_progress"
        now = SystemClock().now()
        (task,) = pg.claim("engine-1", 1, 60.0, now=now)
        assert pg.complete(task.key, task.lease_token, TaskOutcome.ACCEPTED, {"condition": "good"},
                           now=now)
        status, _, body = post(url, BODY, "delivery-3")
        assert status == 200 and body["status"] == "duplicate_done"
    assert sum(pg.counts().values()) == 1


def test_garbage_is_400_with_a_dead_letter(pg):
    """A body that is not a Survey123 webhook answers 400 and leaves a DEAD row as evidence."""
    garbage = b'{"portalInfo": {"token": "' + TOKEN.encode() + b'"}, "feature": 7}'
    with serving(pg) as url:
        status, _, body = post(url, garbage, "delivery-g")
    assert status == 400 and body["dead_letter"] == body_key(garbage)
    record = pg.get(body_key(garbage))
    assert record.status is Status.DEAD and record.failure_class.value == "INVALID_PAYLOAD"
    assert "no feature" in record.payload["reason"]


def test_a_webhook_for_another_feature_service_is_422_over_http(pg):
    """With feature services configured, a body for another one is 422 and never a task."""
    data = json.loads(BODY)
    data["surveyInfo"]["serviceUrl"] = ("https://attacker.example/arcgis/rest/services/x/"
                                        "FeatureServer")
    forged = json.dumps(data).encode()
    served = ("https://services.example.com/abc/arcgis/rest/services/inspection/FeatureServer",)
    with serving(pg, feature_services=served) as url:
        status, _, body = post(url, forged, "delivery-f")
        assert status == 422 and body["status"] == "unknown_service"
        assert pg.get(KEY) is None
        assert pg.get(body_key(forged)).failure_class.value == "UNKNOWN_SERVICE"
        status, _, body = post(url, BODY, "delivery-1")
        assert status == 202 and pg.get(KEY).status is Status.PENDING


def test_reject_mode_over_the_watermark_is_429(pg):
    """reject mode past the watermark: 429, an integer Retry-After >= 1, nothing stored."""
    fill(pg, 5, SystemClock().now())
    with serving(pg, watermark=3, overload_mode="reject") as url:
        status, headers, body = post(url, BODY, "delivery-r")
    assert status == 429 and headers["Retry-After"].isdigit()
    assert int(headers["Retry-After"]) >= 1 and body["retry_after_s"] == int(headers["Retry-After"])
    assert pg.get(KEY) is None


def test_park_mode_over_the_watermark_is_202_deferred(pg):
    """park mode past the watermark: 202 and the row DEFERRED."""
    fill(pg, 5, SystemClock().now())
    with serving(pg, watermark=3) as url:
        status, _, body = post(url, BODY, "delivery-p")
    assert status == 202 and body["submissions"][0]["outcome"] == "PARKED"
    assert pg.get(KEY).status is Status.DEFERRED


def _admin(pg_url: str):
    import psycopg2

    from helpers.postgres import PG_ADMIN_URL

    conn = psycopg2.connect(PG_ADMIN_URL, connect_timeout=5)
    conn.autocommit = True
    return conn, pg_url.rsplit("/", 1)[1]


def test_database_stopped_is_503_and_nothing_half_written(pg, pg_store_url):
    """With the database's backends killed and reconnects refused: 503 + Retry-After, no rows."""
    admin, name = _admin(pg_store_url)
    body = photos(3)
    try:
        with serving(pg) as url:
            assert pg.counts()["PENDING"] == 0  # the gateway's store holds a live connection
            with admin.cursor() as cur:
                cur.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
                cur.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                            "WHERE datname = %s AND pid <> pg_backend_pid()", (name,))
            status, headers, answer = post(url, body, "delivery-down")
            health = urllib.request.Request(url + "/healthz")
            with pytest.raises(urllib.error.HTTPError) as down:
                urllib.request.urlopen(health, timeout=30)
    finally:
        with admin.cursor() as cur:
            cur.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
        admin.close()
    assert status == 503 and int(headers["Retry-After"]) >= 1
    assert answer["stored"] == [] and down.value.code == 503
    assert sum(pg.counts().values()) == 0  # reconnected: nothing was half-written


def test_no_token_in_database_or_logs(pg, pg_store_url, records):
    """After deliveries of every kind, no text column of any table and no log line holds the token."""
    from psycopg2 import sql

    with serving(pg, watermark=1, overload_mode="reject") as url:
        assert post(url, BODY, "scan-1")[0] == 202
        assert post(url, BODY.replace(b"A0B1C2D3", b"B0B1C2D3"), "scan-2")[0] == 429
        assert post(url, BODY.replace(b'"feature"', b'"featur"'), "scan-3")[0] == 400
    assert pg.counts()["PENDING"] == 1 and pg.counts()["DEAD"] == 1
    columns = pg_run(pg_store_url, "SELECT table_name, column_name FROM "
                     "information_schema.columns WHERE table_schema = 'public' AND data_type IN "
                     "('text', 'character varying', 'character', 'json', 'jsonb')")
    assert len(columns) >= 5
    leaks = [f"{table}.{column}" for table, column in columns if pg_run(
        pg_store_url, sql.SQL("SELECT count(*) FROM {} WHERE {}::text LIKE %s").format(
            sql.Identifier(table), sql.Identifier(column)), ("%" + TOKEN + "%",))[0][0]]
    assert leaks == []
    assert len(records.lines) > 5
    assert not [line for line in records.lines if TOKEN in line]
