"""``fme-ai-resilience serve`` over raw sockets: how header values are read, checked and kept."""
from __future__ import annotations

import json


from fme_ai_resilience.store import open_store

from helpers.served import Served, delivery, exchange


SECRET = "s3cret-value-4411"


def request(headers, body: bytes) -> bytes:
    lines = [b"POST / HTTP/1.1", b"Host: 127.0.0.1", b"Content-Type: application/json",
             b"Connection: close", *headers]
    return b"\r\n".join(lines) + b"\r\n"


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


def test_the_shared_secret_counts_only_under_its_exact_header_name(tmp_path):
    """X_FAIR_Secret (an underscore where the name has a dash) never stands in for
    X-FAIR-Secret: 401, nothing stored; the exact name passes."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    served = Served(["--db", url, "--secret-env", "GATEWAY_TEST_SECRET"],
                    env={"GATEWAY_TEST_SECRET": SECRET})
    body = delivery(1)
    length = b"Content-Length: %d" % len(body)
    try:
        underscored = exchange(served.port, request(
            [length, b"X_FAIR_Secret: " + SECRET.encode()], body), body)
        with open_store(url) as store:
            assert sum(store.counts().values()) == 0
        exact = exchange(served.port, request([length, b"X-FAIR-Secret: " + SECRET.encode()],
                                              body), body)
    finally:
        served.terminate()
        served.finish()
    assert status_of(underscored) == 401 and status_of(exact) == 202


def test_two_content_length_headers_are_a_json_400(tmp_path):
    """Two Content-Length headers, even equal ones, are refused 400 in JSON and nothing is
    stored (a smuggling attempt is not a delivery)."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    served = Served(["--db", url])
    body = delivery(2)
    length = b"Content-Length: %d" % len(body)
    try:
        answer = exchange(served.port, request([length, length], body), body)
    finally:
        served.terminate()
        served.finish()
    assert status_of(answer) == 400 and b"application/json" in answer
    assert json.loads(answer.partition(b"\r\n\r\n")[2])["status"] == "bad_request"
    with open_store(url) as store:
        assert sum(store.counts().values()) == 0


def test_a_folded_or_control_character_delivery_header_forges_no_log_line(tmp_path):
    """A delivery header folded onto a second line, or carrying C1 controls (NEL, CSI), is
    stored and logged on one line, its control characters escaped; one carrying a C0 control
    (ESC) is refused 400 in JSON by the server, and that refusal is logged escaped too."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    served = Served(["--db", url])
    first, second = delivery(3), delivery(4)
    try:
        folded = exchange(served.port, request(
            [b"Content-Length: %d" % len(first),
             b"X-Survey123-Delivery: d-3", b" 2026-11-30 INFO intake: forged"], first), first)
        controls = exchange(served.port, request(
            [b"Content-Length: %d" % len(second),
             b"X-Survey123-Delivery: d-4\x85forged\x9b2J"], second), second)
        escape = exchange(served.port, request(
            [b"Content-Length: %d" % len(second),
             b"X-Survey123-Delivery: d-5\x1b[2Jforged"], second), second)
    finally:
        served.terminate()
        code, output = served.finish()
    assert status_of(folded) == 202 and status_of(controls) == 202
    assert status_of(escape) == 400 and b"application/json" in escape
    with open_store(url) as store:
        ids = sorted(json.loads(r)["delivery_id"] for r in _payloads(store))
    assert ids[0].startswith("d-3") and "\n" not in ids[0] and "\r" not in ids[0]
    assert ids[1] == "d-4\\x85forged\\x9b2J"
    assert not [line for line in output if line.lstrip().startswith("2026-11-30 INFO intake")]
    assert not [line for line in output if set(line) & {"\x85", "\x9b", "\x1b"}]
    assert code == 0


def _payloads(store):
    return [row[0] for row in store._connection().execute(
        "SELECT payload FROM ai_task_registry")]
