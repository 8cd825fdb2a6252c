"""A drill world as the library's settings read it, without starting a stand-in."""
from __future__ import annotations

from types import SimpleNamespace


def settings_world(latency_s: float = 2.0, latency_jitter_s: float = 2.0) -> SimpleNamespace:
    """What :func:`fme_ai_resilience.drill.library.drill_settings` reads of a world: its
    faults' latency, where its stand-ins are, no related table."""
    faults = SimpleNamespace(latency_s=latency_s, latency_jitter_s=latency_jitter_s)
    reach = {"vision.endpoint": "http://127.0.0.1:1/analyze",
             "intake.feature_services": "http://127.0.0.1:2/arcgis",
             "download.allowed_hosts": "127.0.0.1",
             "download.allow_http_hosts": "127.0.0.1",
             "download.allow_private_hosts": "127.0.0.1"}
    return SimpleNamespace(scenario=SimpleNamespace(faults=faults), reach=lambda: dict(reach),
                           table_url=None)
