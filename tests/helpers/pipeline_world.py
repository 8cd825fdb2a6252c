"""The pipeline's outside world on loopback, for the end-to-end integration tests.

A :class:`World` holds the drill's stand-ins (a feature layer that also serves the photos, a
photo host for the ones that 404, a Vision AI service with its fault schedule) and the
settings every processor of the test shares, written into the ledger's config table (no
secret among them: those travel as ``FAIR_*`` variables). :class:`GatewayServer` serves the
intake gateway on loopback in this process, as ``serve`` does; :func:`spawn_processes` starts
``fme-ai-resilience process --loop`` as real OS processes.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from fme_ai_resilience.drill.scenarios import Scenario
from fme_ai_resilience.drill.standins import FaultSchedule, Survey123Sender
from fme_ai_resilience.drill.world import World as DrillWorld
from fme_ai_resilience.gateway import make_app, serving
from fme_ai_resilience.core.ledger import Status
from fme_ai_resilience.services.config.settings import LiveSettings
from fme_ai_resilience.core.config.settings import Settings
from fme_ai_resilience.store import open_store

TERMINAL = (Status.SUCCEEDED.value, Status.DEAD.value)
#: Real seconds a process may stand still on a 2-core machine running the whole suite (an
#: engine starved of CPU, or waiting on a starved one's ledger lock): the machine's share of
#: a lag measured at the stand-ins, not the product's, so never scaled.
BUSY_MACHINE_S = 1.5


def loopback_settings(world: "World", **extra: str) -> Dict[str, str]:
    """What the gateway and processors need to reach the stand-ins (the layer's service is
    the one intake serves, photos come from it and the photo host), plus ``extra``: a
    watermark high enough that the burst is not parked, breakers and a ladder that stay out
    of the way unless a test asks, and short backoffs."""
    values = dict(world.reach())
    values.update({
        "intake.watermark": "2000",
        "breaker.failure_rate": "0.95",
        "degrade.fallback_error_rate": "0.95",
        "retry.backoff_base_s": "0.05",
        "retry.backoff_cap_s": "0.5",
        "processing.claim_limit": "5",
    })
    values.update(extra)
    return values


class World(DrillWorld):
    """The drill's world (its stand-ins, started and stopped together) under a fault schedule
    of the test's own, in production seconds at ``scale`` real seconds each (1: real time),
    with bodies made directly."""

    def __init__(self, schedule: FaultSchedule, *, seed: int = 7, scale: float = 1.0) -> None:
        super().__init__(Scenario("test", "a loopback test's own faults", schedule), seed=seed,
                         time_scale=scale)
        self.scale = scale
        self.features: List = []     # what bodies() created, in order

    def bodies(self, count: int, *, missing_every: int = 0) -> List[dict]:
        """``count`` webhook bodies of one-photo features; every ``missing_every``-th photo
        points at the photo host, which answers 404 for it."""
        sender = Survey123Sender("http://127.0.0.1:9/unused")
        bodies = []
        for i in range(count):
            feature = self.layer.add_feature(photos=1)
            self.features.append(feature)
            body = sender.body_for(feature)
            if missing_every and i % missing_every == missing_every - 1:
                name = f"gone-{i}.jpg"
                self.photos.add(name)
                self.photos.missing(name)
                for photos in body["feature"]["attachments"].values():
                    for photo in photos:
                        photo["url"] = self.photos.url_for(name)
            bodies.append(body)
        return bodies


class GatewayServer:
    """The intake gateway served from this process on 127.0.0.1, as ``serve`` serves it
    (waitress, :func:`fme_ai_resilience.gateway.server.serving`); with
    ``arcgis_signature_key``, ArcGIS layer webhooks signed with it are taken too."""

    def __init__(self, db_url: str, *, arcgis_signature_key: Optional[str] = None) -> None:
        self.store = open_store(db_url)
        self._app = make_app(LiveSettings(Settings(), store=self.store, ttl_s=0.5),
                             store=self.store, arcgis_signature_key=arcgis_signature_key)
        self._serving = serving(self._app)
        self.url = ""

    def __enter__(self) -> "GatewayServer":
        self.url = self._serving.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._serving.__exit__(*exc)
        finally:
            self.store.close()


def spawn_processes(db_url: str, count: int, *, extra: Sequence[str] = (),
                    env: Mapping[str, str] = ()) -> List[subprocess.Popen]:
    """``count`` ``fme-ai-resilience process --loop`` OS processes on the ledger."""
    return [spawn([sys.executable, "-m", "fme_ai_resilience", "process", "--db", db_url,
                   "--loop", "--idle", "0.1", "--owner", f"proc-{i}", "--json",
                   "--log-format", "json", *extra], env=env)
            for i in range(count)]


def spawn(argv: Sequence[str], *, env: Mapping[str, str] = ()) -> subprocess.Popen:
    """A child process whose output goes to files (a pipe nobody reads would fill and
    block it), without the caller's ``FAIR_*`` variables."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("FAIR_")}
    environ.update(dict(env))
    out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
    proc = subprocess.Popen(list(argv), env=environ, stdout=out, stderr=err, text=True)
    proc.outputs = (out, err)    # type: ignore[attr-defined]
    return proc


def printed(proc: subprocess.Popen) -> str:
    """What a running child has printed on stdout so far (read at an offset: seeking the
    shared file would move the child's own writing position)."""
    handle = proc.outputs[0]   # type: ignore[attr-defined]
    return os.pread(handle.fileno(), 1 << 20, 0).decode("utf-8", "replace")


def output_of(proc: subprocess.Popen) -> Tuple[str, str]:
    texts = []
    for handle in proc.outputs:   # type: ignore[attr-defined]
        handle.seek(0)
        texts.append(handle.read())
    return texts[0], texts[1]


def stop_processes(procs: Sequence[subprocess.Popen], timeout_s: float = 30.0
                   ) -> List[tuple]:
    """SIGTERM each process and collect ``(returncode, stdout, stderr)``."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    out = []
    for proc in procs:
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        out.append((proc.returncode, *output_of(proc)))
    return out


def wait_until_settled(store, keys: Sequence[str], *, timeout_s: float,
                       procs: Sequence[subprocess.Popen] = ()) -> Dict[str, str]:
    """Poll the ledger until every key is SUCCEEDED or DEAD; returns ``{key: status}``.

    Fails early when a process died (its stderr tells why)."""
    deadline = time.monotonic() + timeout_s
    statuses: Dict[str, str] = {}
    while time.monotonic() < deadline:
        statuses = {k: store.get(k).status.value for k in keys}
        if all(s in TERMINAL for s in statuses.values()):
            return statuses
        for proc in procs:
            if proc.poll() is not None:
                raise AssertionError(f"a process exited {proc.returncode}: "
                                     f"{output_of(proc)[1][-2000:]}")
        time.sleep(0.2)
    left = sorted(k for k, s in statuses.items() if s not in TERMINAL)
    shown = [(k[:12], r.status.value, r.error_class, r.last_error, r.next_attempt_at,
              r.attempt_count) for k, r in ((k, store.get(k)) for k in left[:3])]
    circuits = {name: (state.state.value, state.mode.value, state.open_until)
                for name, state in store.breaker_list().items()}
    calls = {name: store.recent_calls(name, 6) for name in circuits}
    limits = {name: store.limit_read(name, Settings().concurrency, now=time.time())
              for name in circuits}
    tails = [output_of(proc)[1][-600:] for proc in procs]
    raise AssertionError(f"{len(left)} task(s) not settled at {time.time():.0f}: {shown}; "
                         f"circuits {circuits}; latest calls {calls}; fleet limits (state, "
                         f"calls in flight) {limits}; the processes' last words {tails}")
