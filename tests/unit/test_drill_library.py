"""The library's side of a drill: its scaled settings and when its reconciliation runs."""
from __future__ import annotations

from types import SimpleNamespace

from fme_ai_resilience.drill import library
from fme_ai_resilience.core.ledger import Status
from fme_ai_resilience.core.config.settings import Settings


def _world():
    faults = SimpleNamespace(latency_s=2.0, latency_jitter_s=2.0)
    return SimpleNamespace(scenario=SimpleNamespace(faults=faults),
                           vision=SimpleNamespace(endpoint="http://127.0.0.1:1/analyze"),
                           layer=SimpleNamespace(service_url="http://127.0.0.1:2/arcgis",
                                                 layer_url="http://127.0.0.1:2/arcgis/0"),
                           photo_host="127.0.0.1", table_url=None)


def test_the_fleet_retry_floor_allows_the_defaults_retries_per_window_at_any_time_scale():
    """A window scaled down by the time scale holds as many floor retries as the defaults'
    window: the per-second floor is scaled up by the same factor."""
    default = Settings().retry
    for scale in (0.1, 0.5, 1.0):
        retry = Settings().with_values(library.drill_settings(
            _world(), engines=4, time_scale=scale)).retry
        assert retry.fleet_window_s == default.fleet_window_s * scale
        assert abs(retry.fleet_retry_floor_per_s * retry.fleet_window_s
                   - default.fleet_retry_floor_per_s * default.fleet_window_s) < 1e-9


class Ledger:
    """Task records whose status the engines (the sleeps between polls) move on."""

    def __init__(self, keys):
        self.status = {k: Status.PENDING for k in keys}

    def get(self, key):
        if key not in self.status:
            return None
        return SimpleNamespace(status=self.status[key], failure_class=None, requeue_count=0)

    def advance(self):
        for key, status in self.status.items():
            self.status[key] = (Status.PROCESSING if status is Status.PENDING
                                else Status.SUCCEEDED)


class Fleet:
    def __init__(self):
        self.kicks = 0

    def heal(self):
        pass

    def kick(self):
        self.kicks += 1


def test_reconciliation_runs_once_engines_took_up_every_delivered_task_and_again_at_the_end(
        monkeypatch):
    """The first reconciliation runs while the delivered tasks are still in flight, so idle
    engines take what it finds; the last runs after every task settled, and its finds and
    the first's are drained before the run ends."""
    ledger = Ledger(["a", "b"])
    seen = []

    def reconcile(settings, world, engines, *, store):
        seen.append(dict(store.status))
        if len(seen) == 1:
            store.status["never-delivered"] = Status.PENDING
            return ["never-delivered"]
        return []

    monkeypatch.setattr(library, "_reconcile", reconcile)
    monkeypatch.setattr(library.time, "sleep", lambda s: ledger.advance())
    assert library._drain(["a", "b"], Settings(), _world(), Fleet(), store=ledger,
                          timeout_s=60.0)
    assert seen[0] == {"a": Status.PROCESSING, "b": Status.PROCESSING}
    assert len(seen) == 2 and set(seen[1].values()) == {Status.SUCCEEDED}
    assert ledger.status["never-delivered"] is Status.SUCCEEDED
