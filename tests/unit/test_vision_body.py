"""The body reader: one deadline for the whole body, a size cap, and every ending classified."""
from __future__ import annotations

import http.client

import pytest
import urllib3

from fme_ai_resilience.services.vision.phases import PhaseAdapter, read_body, timed_session


class FakeRaw:
    """A urllib3-like body: each read1 returns the next chunk, advancing the clock first."""

    def __init__(self, chunks, clock=None, step_s=0.0):
        self.chunks = list(chunks)
        self.clock = clock
        self.step_s = step_s
        self.reads = 0

    def read1(self, amt):
        self.reads += 1
        if self.clock is not None:
            self.clock.advance(self.step_s)
        if not self.chunks:
            return b""
        item = self.chunks.pop(0)
        if isinstance(item, BaseException):
            raise item
        return item[:amt]


def test_trickle_cannot_reset_the_body_deadline(clock):
    """Chunks arriving steadily still stop at the one body deadline, not per chunk."""
    raw = FakeRaw([b"x"] * 100, clock, step_s=0.125)
    read = read_body(raw, clock=clock, deadline=clock.monotonic() + 1.0, max_bytes=10_000)
    assert read.timed_out and not read.oversize
    assert (len(read.body), raw.reads) == (8, 8)


def test_whole_body_within_deadline(clock):
    """A body finishing before the deadline is returned whole."""
    read = read_body(FakeRaw([b"ab", b"cd"], clock, 0.1), clock.monotonic() + 1, 100, clock=clock)
    assert (read.body, read.timed_out, read.truncated) == (b"abcd", False, False)


def test_size_cap_cuts_at_exactly_max_bytes(clock):
    """A body over max_bytes stops being read and is cut at max_bytes."""
    raw = FakeRaw([b"x" * 40] * 10)
    read = read_body(raw, clock.monotonic() + 1, clock=clock, max_bytes=100)
    assert read.oversize and len(read.body) == 100
    assert raw.reads == 3


@pytest.mark.parametrize("exc, field", [
    (urllib3.exceptions.ProtocolError("Connection broken", http.client.IncompleteRead(b"x", 9)),
     "truncated"),
    (urllib3.exceptions.ProtocolError("Connection broken", ConnectionResetError(104)), "reset"),
    (urllib3.exceptions.ReadTimeoutError(None, "/", "read timed out"), "timed_out"),
    (TimeoutError(), "timed_out"),
    (OSError("bad fd"), "reset"),
])
def test_read_failures_are_classified(clock, exc, field):
    """Each way a read can fail ends the body with the matching flag and what was read."""
    read = read_body(FakeRaw([b"{", exc]), clock.monotonic() + 1, 100, clock=clock)
    assert getattr(read, field) and read.body == b"{"



def test_a_stream_closed_before_the_read_ends_it_with_what_came(clock):
    """A closed stream (requests already read a redirect's body) ends the read, not raises."""
    read = read_body(FakeRaw([b"{", ValueError("I/O operation on closed file.")]),
                     clock.monotonic() + 1, 100, clock=clock)
    assert read.body == b"{" and not (read.timed_out or read.reset or read.oversize)

def test_timed_session_mounts_the_phase_adapter(clock):
    """The default session measures connects and honours the environment's proxies and CA
    bundle (docs/fme-flow.md: FME's own session inside FME, the environment's outside)."""
    session = timed_session(clock=clock)
    assert isinstance(session.get_adapter("https://vision.example.com"), PhaseAdapter)
    assert session.trust_env is True


class HttpClientBody:
    """http.client's response as urllib3 1.26 holds it: read1 counting down ``length``."""

    def __init__(self, chunks, length):
        self.chunks, self.length, self.closed = list(chunks), length, False

    def read1(self, amt):
        if not self.chunks:
            return b""   # http.client ends a short body quietly: length stays above 0
        chunk = self.chunks.pop(0)[:amt]
        self.length -= len(chunk)
        return chunk

    def close(self):
        self.closed = True


class Urllib3v1Raw:
    """A urllib3 1.26 response: no read1 of its own, the http.client response in ``_fp``."""

    def __init__(self, fp):
        self._fp = fp
        self.released = False

    def release_conn(self):
        self.released = True


def test_a_short_body_is_truncated_under_urllib3_1_26(clock):
    """On urllib3 1.26 a body ending before its Content-Length is truncated, not complete."""
    raw = Urllib3v1Raw(HttpClientBody([b'{"condition": "go'], length=40))
    read = read_body(raw, clock.monotonic() + 1, 1000, clock=clock)
    assert read.truncated and read.body == b'{"condition": "go' and not raw.released


def test_a_whole_body_gives_its_connection_back_under_urllib3_1_26(clock):
    """On urllib3 1.26 a body read to its end returns the connection to the pool for reuse."""
    fp = HttpClientBody([b"ab", b"cd"], length=4)
    raw = Urllib3v1Raw(fp)
    read = read_body(raw, clock.monotonic() + 1, 1000, clock=clock)
    assert (read.body, read.truncated) == (b"abcd", False)
    assert fp.closed and raw.released
