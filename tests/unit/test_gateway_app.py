"""The WSGI gateway: HTTP handling (method, type, size, auth, health) around the decision."""
from __future__ import annotations

import io
import json
import logging
from typing import Any, Dict, Optional

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from fme_ai_resilience.core.errors import StoreUnavailable
from fme_ai_resilience.services.flow.client import FlowHealth
from fme_ai_resilience.gateway import make_app, sign
from fme_ai_resilience.core.config.settings import IntakeSettings, Settings

from helpers import DATA


BODY = (DATA / "survey123_add.json").read_bytes()
TOKEN = "PORTAL-TOKEN-7f3a9c1e5b2d4a6f8e0c"
WHSEC = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


class UntouchedStore:
    """A store that must not be reached: the gateway refuses before the ledger."""

    dialect = "none"

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the store was called ({name}) for a request refused at the door")


class DownStore:
    """A store whose database is gone."""

    dialect = "none"

    def backlog(self, limit=None):
        raise StoreUnavailable("connection refused")


def call(app, method="POST", path="/", body: bytes = BODY, content_type="application/json",
         headers: Optional[Dict[str, str]] = None, length: Optional[str] = "auto",
         environ_extra: Optional[Dict[str, Any]] = None):
    environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "wsgi.input": io.BytesIO(body),
               "CONTENT_TYPE": content_type}
    if length == "auto":
        environ["CONTENT_LENGTH"] = str(len(body))
    elif length is not None:
        environ["CONTENT_LENGTH"] = length
    for name, value in (headers or {}).items():
        environ["HTTP_" + name.upper().replace("-", "_")] = value
    environ.update(environ_extra or {})
    seen = {}

    def start_response(status, response_headers):
        seen["status"] = int(status.split()[0])
        seen["headers"] = dict(response_headers)

    chunks = app(environ, start_response)
    raw = b"".join(chunks)
    return seen["status"], seen["headers"], (json.loads(raw) if raw else None)


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH"])
def test_webhook_is_post_only(clock, method):
    """Anything but POST on the webhook answers 405 with Allow: POST."""
    status, headers, body = call(make_app(store=UntouchedStore(), clock=clock), method=method)
    assert status == 405 and headers["Allow"] == "POST"
    assert headers["Content-Type"] == "application/json"


@pytest.mark.parametrize("ctype", ["text/plain", "application/x-www-form-urlencoded", ""])
def test_non_json_content_type_is_415(clock, ctype):
    """A body that is not declared JSON answers 415."""
    status, _, _ = call(make_app(store=UntouchedStore(), clock=clock), content_type=ctype)
    assert status == 415


def test_declared_length_over_the_limit_is_413_without_reading(clock):
    """A Content-Length over the limit is refused before a byte is read."""
    settings = Settings(intake=IntakeSettings(max_body_bytes=100))

    class Exploding(io.BytesIO):
        def read(self, *args):
            raise AssertionError("the body was read")

    app = make_app(settings, store=UntouchedStore(), clock=clock)
    status, _, body = call(app, body=b"x" * 101, environ_extra={"wsgi.input": Exploding()})
    assert status == 413 and "100 bytes" in body["reason"]


def test_undeclared_length_reads_at_most_limit_plus_one(clock):
    """Without Content-Length (a terminated stream) the gateway reads limit + 1 bytes at most."""
    settings = Settings(intake=IntakeSettings(max_body_bytes=100))
    stream = io.BytesIO(b"x" * 10_000)
    app = make_app(settings, store=UntouchedStore(), clock=clock)
    status, _, _ = call(app, length=None,
                        environ_extra={"wsgi.input": stream, "wsgi.input_terminated": True})
    assert status == 413 and stream.tell() == 101


def test_missing_length_on_an_unterminated_stream_is_411(clock):
    """A stream without length or terminator cannot be read safely: 411."""
    status, _, _ = call(make_app(store=UntouchedStore(), clock=clock), length=None)
    assert status == 411


def test_bad_content_length_is_400(clock):
    """A Content-Length that is not a number is a bad request."""
    assert call(make_app(store=UntouchedStore(), clock=clock), length="12x")[0] == 400


def test_shared_secret_mismatch_is_401(clock):
    """With a shared secret configured, a missing or wrong header answers 401."""
    app = make_app(store=UntouchedStore(), clock=clock, shared_secret="s3cret-value")
    assert call(app)[0] == 401
    assert call(app, headers={"X-FAIR-Secret": "wrong"})[0] == 401
    assert "s3cret" not in repr(app)


def test_signature_mismatch_is_401(clock):
    """A wrong, stale or missing Standard Webhooks signature answers 401."""
    app = make_app(store=UntouchedStore(), clock=clock, signing_secret=WHSEC)
    now = int(clock.now())
    good = sign(WHSEC, "msg_1", now, BODY)
    assert call(app)[0] == 401
    assert call(app, headers={"webhook-id": "msg_1", "webhook-timestamp": str(now),
                              "webhook-signature": "v1,AAAA"})[0] == 401
    assert call(app, headers={"webhook-id": "msg_2", "webhook-timestamp": str(now),
                              "webhook-signature": good})[0] == 401
    stale = str(now - 301)
    assert call(app, headers={"webhook-id": "msg_1", "webhook-timestamp": stale,
                              "webhook-signature": sign(WHSEC, "msg_1", now - 301, BODY)})[0] == 401
    assert call(app, body=BODY + b" ", headers={
        "webhook-id": "msg_1", "webhook-timestamp": str(now), "webhook-signature": good})[0] == 401


def test_sign_matches_the_standard_webhooks_reference_vector():
    """The signature scheme matches the Standard Webhooks specification's example."""
    body = b'{"test": 2432232314}'
    assert sign(WHSEC, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body) == \
        "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_bad_signing_secret_is_refused_up_front():
    """An undecodable whsec_ secret raises ValueError at construction."""
    with pytest.raises(ValueError):
        make_app(store=UntouchedStore(), signing_secret="whsec_!!!")


def test_healthz_reports_the_ledger(clock):
    """GET /healthz: 200 with the capped backlog when the ledger answers, 503 when it does not."""

    class Up:
        dialect = "sqlite"
        limits = []

        def backlog(self, limit=None):
            self.limits.append(limit)
            return 2

    up = Up()
    status, _, body = call(make_app(store=up, clock=clock), method="GET", path="/healthz")
    assert status == 200 and body == {"ledger": "reachable", "backlog": 2, "watermark": 48}
    assert up.limits == [100_001]  # never counts past the park ceiling (100,000 rows) + 1
    status, _, body = call(make_app(store=DownStore(), clock=clock), method="GET", path="/healthz")
    assert status == 503 and body["ledger"] == "unreachable"
    assert call(make_app(store=Up(), clock=clock), method="POST", path="/healthz")[0] == 405


def test_healthz_includes_flow_health(clock):
    """With a flow probe configured, /healthz shows FME Flow's capacity."""

    class Up:
        def backlog(self, limit=None):
            return 0

    health = FlowHealth(reachable=True, has_capacity=False, queued=9, engines=2, busy_engines=2)
    app = make_app(store=Up(), clock=clock, flow_health=lambda: health, monitor_token="m-7731")
    _, _, body = call(app, method="GET", path="/healthz",
                      headers={"Authorization": "Bearer m-7731"})
    assert body["flow"]["has_capacity"] is False and body["flow"]["queued"] == 9
    assert "flow" not in call(app, method="GET", path="/healthz")[2]


def test_unexpected_failure_is_a_json_500_without_secrets(clock, caplog):
    """A store bug answers 500 JSON and the log line carries no token."""

    class Broken:
        def register(self, *a, **k):
            raise RuntimeError(f"boom token={TOKEN}")

    caplog.set_level(logging.DEBUG)
    status, _, body = call(make_app(store=Broken(), clock=clock))
    assert status == 500 and body["status"] == "error"
    assert TOKEN not in caplog.text


@pytest.fixture
def ledger():
    from fme_ai_resilience.store import open_store

    s = open_store("sqlite:///:memory:", init_schema=True)
    yield s
    s.close()


def test_valid_delivery_reaches_the_ledger(ledger, clock):
    """A JSON POST is decided: 202 with the decision body, then 202 duplicate."""
    app = make_app(store=ledger, clock=clock)
    status, headers, body = call(app, content_type="application/json; charset=UTF-8",
                                 headers={"X-Survey123-Delivery": "d-1"})
    assert status == 202 and body["status"] == "accepted"
    assert body["delivery_id"] == "d-1" and headers["Content-Type"] == "application/json"
    status, _, body = call(app, headers={"X-Survey123-Delivery": "d-2"})
    assert status == 202 and body["status"] == "duplicate_in_progress"
    assert ledger.counts()["PENDING"] == 1


def test_correct_secret_and_signature_are_accepted(ledger, clock):
    """The right shared secret and a fresh valid signature pass through to the decision."""
    app = make_app(store=ledger, clock=clock, shared_secret="s3cret-value", signing_secret=WHSEC)
    now = int(clock.now()) - 60  # inside the tolerance window
    status, _, _ = call(app, headers={
        "X-FAIR-Secret": "s3cret-value", "webhook-id": "msg_1", "webhook-timestamp": str(now),
        "webhook-signature": "v1,bogus " + sign(WHSEC, "msg_1", now, BODY)})
    assert status == 202


def test_invalid_json_through_the_gateway_is_400(ledger, clock):
    """Garbage posted as JSON is answered 400 and kept as a dead letter."""
    status, _, body = call(make_app(store=ledger, clock=clock), body=b"{oops")
    assert status == 400 and body["dead_letter"].startswith("body:sha256:")
    assert ledger.counts()["DEAD"] == 1


def test_retry_after_header_is_an_integer(ledger, clock):
    """A 429 carries Retry-After as whole seconds >= 1."""
    settings = Settings(intake=IntakeSettings(watermark=1, overload_mode="reject"))
    app = make_app(settings, store=ledger, clock=clock)
    call(app, body=BODY.replace(b"A0B1C2D3", b"B0B1C2D3"))
    status, headers, _ = call(app)
    assert status == 429 and int(headers["Retry-After"]) >= 1


@hsettings(max_examples=150, deadline=None,
           suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(body=st.binary(max_size=300) | st.sampled_from([BODY, BODY[:200], BODY + b"}"]),
       method=st.sampled_from(["POST", "GET", "PUT"]),
       ctype=st.sampled_from(["application/json", "text/plain", "application/cloudevents+json"]))
def test_any_request_gets_a_json_answer_from_the_contract(ledger, clock, body, method, ctype):
    """Whatever arrives, the gateway answers a contract status with a JSON body, never a 500."""
    status, headers, answer = call(make_app(store=ledger, clock=clock), method=method, body=body,
                                   content_type=ctype)
    assert status in (200, 202, 400, 405, 415, 429)
    assert headers["Content-Type"] == "application/json" and isinstance(answer, dict)


def test_live_settings_are_read_per_request(tmp_path, clock):
    """With LiveSettings, a resilience_config change reaches the next request after its TTL."""
    from fme_ai_resilience.services.config.settings import LiveSettings
    from fme_ai_resilience.store import open_store

    with open_store(f"sqlite:///{tmp_path / 'ledger.db'}", init_schema=True) as ledger:
        app = make_app(LiveSettings(store=ledger, ttl_s=5.0, clock=clock), store=ledger,
                       clock=clock)
        assert call(app, method="GET", path="/healthz")[2]["watermark"] == 48
        ledger.set_config({"intake.watermark": "7"}, now=clock.now())
        clock.advance(5.0)
        assert call(app, method="GET", path="/healthz")[2]["watermark"] == 7


@pytest.mark.parametrize("stamp", ["1" + "0" * 400, "9" * 5000, "-" + "9" * 400])
def test_an_absurd_webhook_timestamp_is_401(clock, stamp):
    """A timestamp too large for a float (or for int()) answers 401, not 500."""
    app = make_app(store=UntouchedStore(), clock=clock, signing_secret=WHSEC)
    assert call(app, headers={"webhook-id": "m1", "webhook-timestamp": stamp,
                              "webhook-signature": "v1,xx"})[0] == 401


class CountingParser:
    """parse_webhook as seen by intake.receive, counting its calls."""

    def __init__(self, monkeypatch) -> None:
        from fme_ai_resilience.core.intake.survey123 import parse_webhook

        self.calls = 0
        self._parse = parse_webhook
        monkeypatch.setattr("fme_ai_resilience.services.intake.webhook.parse_webhook", self)

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self._parse(*args, **kwargs)


# -- header values: control characters, lengths and timestamps --------------------------------

FORGED = "d-1\r\n2026-11-30 08:15:00 INFO intake: accepted forged\x85line\u2028two\x1b[2J"


def test_control_characters_in_the_delivery_header_reach_no_log_answer_or_ledger(ledger, clock,
                                                                                 caplog):
    """A delivery id folded onto a second line (or carrying any control character) is stored,
    answered and logged escaped: it cannot forge a log line."""
    caplog.set_level(logging.DEBUG)
    app = make_app(store=ledger, clock=clock)
    status, _, body = call(app, headers={"X-Survey123-Delivery": FORGED})
    assert status == 202
    garbage_status, _, garbage = call(app, body=b"{oops", headers={"X-Survey123-Delivery": FORGED})
    assert garbage_status == 400
    stored = [ledger.get(r["key"]).payload["delivery_id"] for r in body["submissions"]]
    stored.append(ledger.get(garbage["dead_letter"]).payload["delivery_id"])
    for value in stored + [body["delivery_id"], garbage["delivery_id"]]:
        assert value.startswith("d-1") and "forged" in value
        assert not [c for c in value if ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f
                    or c in "\u2028\u2029"], value
    lines = [r.getMessage() for r in caplog.records]
    assert any("forged" in line for line in lines)
    assert not [line for line in lines if len(line.splitlines()) > 1 or "\x1b" in line]


@pytest.mark.parametrize("declared", ["+12", " 12", "12 ", "1_2", "\u0661\u0662", "12, 12",
                                      "0x0c", "12.0"])
def test_content_length_is_ascii_digits_only(clock, declared):
    """A Content-Length that is not plain ASCII digits (signs, blanks, underscores, other
    scripts' digits, two values) answers 400 before the body is read."""
    assert call(make_app(store=UntouchedStore(), clock=clock), body=b"x" * 12,
                length=declared)[0] == 400


@pytest.mark.parametrize("form", ["+{}", " {}", "{}_", "0{}", "{}\u0660"])
def test_webhook_timestamp_is_ascii_digits_only(clock, form):
    """A webhook-timestamp written any other way than plain ASCII digits answers 401, even
    with a signature computed over exactly that text."""
    import base64
    import hashlib
    import hmac

    now = int(clock.now())
    stamp = form.format(now)
    key = base64.b64decode(WHSEC[len("whsec_"):])
    signed = f"msg_1.{stamp}.".encode("utf-8") + BODY
    signature = "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    app = make_app(store=UntouchedStore(), clock=clock, signing_secret=WHSEC)
    assert call(app, headers={"webhook-id": "msg_1", "webhook-timestamp": stamp,
                              "webhook-signature": signature})[0] == 401


def test_a_path_with_control_characters_is_logged_escaped(clock, caplog):
    """The request path in the gateway's own log lines is escaped too."""

    class Broken:
        dialect = "none"

        def register(self, *a, **k):
            raise RuntimeError("boom")

    caplog.set_level(logging.DEBUG)
    status, _, _ = call(make_app(store=Broken(), clock=clock), path="/hook\n2026 INFO forged")
    assert status == 500
    assert not [r for r in caplog.records if len(r.getMessage().splitlines()) > 1]


@pytest.mark.parametrize("name", ["X_FAIR_Secret", "X-FAIR Secret", "", "X-FAIR-Secret:"])
def test_a_secret_header_name_a_server_cannot_keep_apart_is_refused(name):
    """A WSGI server maps X_FAIR_Secret and X-FAIR-Secret to the same key: a secret header
    named with an underscore (or anything but a plain header name) is a configuration error."""
    with pytest.raises(ValueError) as info:
        make_app(store=UntouchedStore(), shared_secret="s3cret-value", secret_header=name)
    assert "secret_header" in str(info.value)


class HostDownStore(DownStore):
    """A store whose PostgreSQL server is gone, the error naming its host and port."""

    def backlog(self, limit=None):
        raise StoreUnavailable("could not connect to server at db.internal.example:5432")


def test_unauthenticated_health_names_no_database_host(clock):
    """An unauthenticated /healthz says the ledger is down without its host and port; the
    monitor token shows why."""
    app = make_app(store=HostDownStore(), clock=clock, monitor_token="m-7731")
    status, _, body = call(app, method="GET", path="/healthz")
    assert status == 503 and body["ledger"] == "unreachable"
    assert "db.internal" not in json.dumps(body) and "5432" not in json.dumps(body)
    _, _, detailed = call(app, method="GET", path="/healthz",
                          headers={"Authorization": "Bearer m-7731"})
    assert "db.internal.example:5432" in detailed["reason"]


def metrics_status(app, **headers):
    seen = {}
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics", "wsgi.input": io.BytesIO(b"")}
    environ.update({"HTTP_" + k.upper(): v for k, v in headers.items()})
    b"".join(app(environ, lambda status, hdrs: seen.update(status=int(status[:3]))))
    return seen["status"]


def test_metrics_need_the_monitor_token(tmp_path, clock):
    """With a monitor token, /metrics answers 401 without it and 200 with it."""
    from fme_ai_resilience.store import open_store

    with open_store(f"sqlite:///{tmp_path / 'ledger.db'}", init_schema=True) as ledger:
        app = make_app(store=ledger, clock=clock, monitor_token="m-7731")
        assert metrics_status(app) == 401
        assert metrics_status(app, authorization="Bearer wrong") == 401
        assert metrics_status(app, authorization="Bearer m-7731") == 200


def test_a_gateway_with_a_shared_secret_keeps_its_metrics_closed(clock):
    """A shared secret but no monitor token: /metrics is refused, never open."""
    app = make_app(store=DownStore(), clock=clock, shared_secret="s-1234")
    assert metrics_status(app) == 401
