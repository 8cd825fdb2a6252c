"""Run by tests/packaging/test_fpkg_install.py under another interpreter, from a copy outside
the checkout: the FME Package's wheels installed with ``--target`` (argv[1]) ahead of "FME's
own" requests, urllib3 and pypac (argv[2]); the ledger at $FAIR_TEST_LEDGER (a plain
postgresql:// URL, which must get the pure driver); FME's proxy in $HTTP_PROXY (as FME's
startup sets it from its network settings). Webhook -> processor -> compensator through the
callers under the test kit, against the drill's stand-ins on loopback. Prints one JSON object
of what the stand-ins served (requests per port), what the callers emitted and logged.
"""
import json
import os
import sys
import time

sys.path[:0] = [sys.argv[1], sys.argv[2]]

import jsonschema
import requests

import fme_ai_resilience
from fme_ai_resilience.drill.standins import (FaultSchedule, FeatureLayerStandIn,
                                              PhotoHost, Survey123Sender, VisionStandIn)
from fme_ai_resilience.fme import CompensatorCaller, IntakeCaller, ProcessorCaller
from fme_ai_resilience.core.fme.parameters import parameter_name
from fme_ai_resilience.store import open_store
from fme_ai_resilience.testing import FakeClock, run_caller

FIELDS = ("ai_condition", "ai_confidence", "ai_status", "ai_model", "ai_trace_id",
          "ai_assessed_at")


def main():
    url = os.environ["FAIR_TEST_LEDGER"]
    with open_store(url, init_schema=True) as store:
        store.clear()
        driver = store.driver
    layer, photos = FeatureLayerStandIn(seed=7, fields=FIELDS), PhotoHost(seed=7)
    vision = VisionStandIn(FaultSchedule(), seed=7)
    served = {}
    for server in (layer, photos, vision):
        server.start()
        served[server.url.rsplit(":", 1)[1].strip("/")] = counted = [0]

        def handle(request, real=server.handle, counted=counted):
            counted[0] += 1
            return real(request)
        server.handle = handle
    try:
        sender = Survey123Sender("http://127.0.0.1:9/unused")
        features, bodies = [], []
        for i in range(3):
            feature = layer.add_feature(photos=1)
            body = sender.body_for(feature)
            if i == 2:  # this photo is gone from its host
                photos.add("gone.jpg")
                photos.missing("gone.jpg")
                for group in body["feature"]["attachments"].values():
                    for photo in group:
                        photo["url"] = photos.url_for("gone.jpg")
            features.append(feature)
            bodies.append(body)
        settings = {
            "vision.endpoint": vision.endpoint, "intake.feature_services": layer.service_url,
            "download.allowed_hosts": photos.url.split("//", 1)[1].rstrip("/"),
            "download.allow_http_hosts": "127.0.0.1",
            "download.allow_private_hosts": "127.0.0.1", "intake.watermark": "2000",
            "retry.backoff_base_s": "0.05", "retry.backoff_cap_s": "0.5",
            "writeback.layer_url": layer.layer_url}
        macros = {"FAIR_DB": url, **{parameter_name(k): v for k, v in settings.items()}}
        clock = FakeClock(time.time() + 1)
        intake = [run_caller(IntakeCaller, [{
            "message": json.dumps(b), "webhook.headers": json.dumps(
                {"X-Survey123-Delivery": f"d-{i}", "Content-Type": "application/json"})}],
            macros, clock=clock) for i, b in enumerate(bodies)]
        processed = run_caller(ProcessorCaller, [{}], macros, clock=clock)
        compensated = run_caller(CompensatorCaller, [{}], macros, clock=clock)
        truths = [vision.truth(f.attachments[0].data)[0] for f in features[:2]]
        written = [layer.attributes_of(f.global_id).get("ai_condition") for f in features]
        report = compensated.output[0]
        print(json.dumps({
            "library": fme_ai_resilience.__file__, "jsonschema": jsonschema.__file__,
            "jsonschema_version": jsonschema.__version__, "requests": requests.__file__,
            "driver": driver,
            "registered": [r.output[0].getAttribute("fair_http_status") for r in intake],
            "succeeded": sorted(f.getAttribute("fair_status") for f in processed.output),
            "rejected": [f.getAttribute("fme_rejection_code") for f in processed.rejected],
            "truths": truths, "written": written,
            "analysed": sorted(vision.snapshot()["analysed_by_sha256"].values()),
            "report": [report.getAttribute("fair_status"), report.getAttribute("fair_notified")],
            "served": {port: n[0] for port, n in served.items()},
            "ports": {"vision": vision.url, "photos": photos.url, "layer": layer.url},
            "lines": processed.messages(), "warnings": processed.messages("WARN"),
        }))
    finally:
        for server in (vision, photos, layer):
            server.stop()


if __name__ == "__main__":
    main()
