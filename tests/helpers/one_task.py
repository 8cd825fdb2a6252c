"""One feature on a loopback layer, a ledger holding its task, and ``process --once`` on it:
the setting for the reliability tests of outbound calls."""
from __future__ import annotations

import time
from typing import Dict, Optional

from fme_ai_resilience.cli import main
from fme_ai_resilience.drill.standins import FeatureLayerStandIn, VisionStandIn
from fme_ai_resilience.core.intake.keys import compose_key, trace_id_for
from fme_ai_resilience.store import open_store
from fme_ai_resilience.core.intake.submission import Submission

FIELDS = ("ai_condition", "ai_confidence", "ai_status", "ai_model", "ai_trace_id",
          "ai_assessed_at")


class OneTask:
    """A layer stand-in with one feature (served through ``origin``, a Front or the layer
    itself), a Vision AI stand-in and a SQLite ledger holding the photo's task."""

    def __init__(self, tmp_path, *, photos=1, photo_bytes: Optional[bytes] = None) -> None:
        self.layer = FeatureLayerStandIn(seed=3, fields=FIELDS).start()
        self.vision = VisionStandIn(seed=3).start()
        blobs = [photo_bytes] * photos if photo_bytes is not None else photos
        self.feature = self.layer.add_feature(photos=blobs)
        self.db = f"sqlite:///{tmp_path / 'ledger.db'}"

    def close(self) -> None:
        self.vision.stop()
        self.layer.stop()

    def layer_url(self, origin: str) -> str:
        return origin + "/" + self.layer.layer_url.split("/", 3)[3]

    def register(self, origin: str, settings: Dict[str, str]) -> str:
        """The feature's first photo as a task, its URLs on ``origin``; ``settings`` go into
        the ledger's config table."""
        photo = self.feature.attachments[0]
        layer = self.layer_url(origin)
        service = layer.rsplit("/", 1)[0]
        key = compose_key(self.feature.global_id, photo.global_id)
        values = {"vision.endpoint": self.vision.endpoint,
                  "intake.feature_services": service,
                  "download.allow_http_hosts": "127.0.0.1",
                  "download.allow_private_hosts": "127.0.0.1",
                  "breaker.failure_rate": "0.95", "degrade.fallback_error_rate": "0.95",
                  "retry.backoff_base_s": "0.05", "retry.backoff_cap_s": "0.1",
                  "retry.task_attempts": "2", "processing.claim_limit": "1"}
        values.update(settings)
        with open_store(self.db, init_schema=True, create=True) as store:
            store.set_config(values, now=time.time())
            store.register(Submission(
                key, self.feature.global_id, trace_id_for(key),
                attachment_global_id=photo.global_id,
                attachment_url=f"{layer}/{self.feature.object_id}/attachments/{photo.id}",
                layer_url=layer, service_url=service, object_id=self.feature.object_id,
                attributes={"globalid": self.feature.global_id}), 100, now=time.time())
        return key

    def process(self, *extra: str) -> float:
        """``process --once``; returns its wall time (s)."""
        start = time.monotonic()
        assert main(["process", "--db", self.db, "--once", *extra]) in (0, 1)
        return time.monotonic() - start
