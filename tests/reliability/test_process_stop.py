"""``process --loop`` stops when asked, not when its batch is done: on SIGTERM it claims no
other task, finishes the ones in hand and exits 0, so a service manager's stop waits one
task's worst case at most (the units' stop timeouts), and the tasks it never started stay
PENDING for the next engine."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from fme_ai_resilience.core.intake.keys import compose_key, trace_id_for
from fme_ai_resilience.core.intake.submission import Submission
from fme_ai_resilience.drill.standins import FeatureLayerStandIn, VisionStandIn
from fme_ai_resilience.drill.standins.vision_faults import FaultSchedule
from fme_ai_resilience.store import open_store

PHOTOS = 12


@pytest.mark.skipif(sys.platform == "win32", reason="the loop is stopped by SIGTERM")
def test_sigterm_mid_batch_claims_nothing_more_and_leaves_the_rest_pending(tmp_path):
    """Guarantee: ``process --loop`` asked to stop (SIGTERM) while its batch of 12 photos is
    under way (a Vision AI taking 0.5 s a call, one call at a time) finishes the task in hand,
    claims no other and exits 0; the photos it never started are PENDING, none lost or
    half-done."""
    layer = FeatureLayerStandIn(seed=5).start()
    vision = VisionStandIn(FaultSchedule(latency_s=0.5), seed=5).start()
    try:
        feature = layer.add_feature(photos=PHOTOS)
        service = layer.layer_url.rsplit("/", 1)[0]
        db = f"sqlite:///{tmp_path / 'ledger.db'}"
        with open_store(db, init_schema=True, create=True) as store:
            store.set_config({"vision.endpoint": vision.endpoint,
                              "intake.feature_services": service,
                              "download.allow_http_hosts": "127.0.0.1",
                              "download.allow_private_hosts": "127.0.0.1",
                              "writeback.sink": "collect", "concurrency.per_engine": "1",
                              "processing.claim_limit": str(PHOTOS)}, now=time.time())
            for photo in feature.attachments:
                key = compose_key(feature.global_id, photo.global_id)
                store.register(Submission(
                    key, feature.global_id, trace_id_for(key),
                    attachment_global_id=photo.global_id,
                    attachment_url=f"{layer.layer_url}/{feature.object_id}/attachments/"
                                   f"{photo.id}",
                    layer_url=layer.layer_url, service_url=service,
                    object_id=feature.object_id), 100, now=time.time())
        env = {k: v for k, v in os.environ.items() if not k.startswith("FAIR_")}
        proc = subprocess.Popen([sys.executable, "-m", "fme_ai_resilience", "process", "--loop",
                                 "--db", db], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 60
            while vision.snapshot()["total"] < 1 and time.monotonic() < deadline \
                    and proc.poll() is None:
                time.sleep(0.05)
            assert vision.snapshot()["total"] >= 1, proc.poll()
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert proc.returncode == 0, err
        assert "asked to stop" in out, out
        with open_store(db) as store:
            counts = {k: v for k, v in store.counts().items() if v}
        # the task in hand (or the two around the signal) finished, every other untouched
        assert counts.get("SUCCEEDED", 0) <= 2 and counts.get("SUCCEEDED", 0) >= 1, counts
        assert counts.get("PENDING", 0) == PHOTOS - counts["SUCCEEDED"], counts
        assert vision.snapshot()["total"] == counts["SUCCEEDED"]
    finally:
        vision.stop()
        layer.stop()
