"""Every bound is a bound: a layer listing 20,000 photos for a webhook without a photo list
makes no more tasks than intake.max_attachments and the park ceiling allow."""
from __future__ import annotations

import time

import pytest

from fme_ai_resilience.cli import main
from fme_ai_resilience.drill.standins import FeatureLayerStandIn
from fme_ai_resilience.core.intake.keys import compose_key, trace_id_for
from fme_ai_resilience.store import open_store
from fme_ai_resilience.core.intake.submission import Submission

from helpers.one_task import FIELDS


PHOTOS = 20_000


@pytest.fixture(scope="module")
def layer():
    server = FeatureLayerStandIn(seed=5, fields=FIELDS).start()
    feature = server.add_feature(photos=[b"\xff\xd8\xff\xe0tiny"] * PHOTOS)
    yield server, feature
    server.stop()


def expand(tmp_path, layer, **settings):
    server, feature = layer
    db = f"sqlite:///{tmp_path / 'ledger.db'}"
    key = compose_key(feature.global_id, None)
    values = {"vision.endpoint": "http://127.0.0.1:9/analyze",
              "intake.feature_services": server.service_url,
              "download.allow_http_hosts": "127.0.0.1",
              "download.allow_private_hosts": "127.0.0.1",
              "arcgis.request_timeout_s": "30", "processing.claim_limit": "1"}
    values.update(settings)
    with open_store(db, init_schema=True, create=True) as store:
        store.set_config(values, now=time.time())
        store.register(Submission(key, feature.global_id, trace_id_for(key),
                                  layer_url=server.layer_url, service_url=server.service_url,
                                  object_id=feature.object_id, attachments_unknown=True),
                       100, now=time.time())
    assert main(["process", "--db", db, "--once"]) == 0
    with open_store(db) as store:
        return sum(store.counts().values()), store.get(key).result


def test_a_20000_photo_layer_makes_at_most_max_attachments_tasks(tmp_path, layer):
    """Guarantee: photos the layer lists obey intake.max_attachments; the rest are counted
    as left for reconciliation, not dropped silently."""
    total, result = expand(tmp_path, layer, **{"intake.max_attachments": "50"})
    assert total == 1 + 50
    assert result["left_for_reconciliation"] == PHOTOS - 50


def test_a_20000_photo_layer_stops_at_the_park_ceiling(tmp_path, layer):
    """Guarantee: photos the layer lists stop at intake.park_ceiling unfinished tasks."""
    total, result = expand(tmp_path, layer, **{"intake.watermark": "10",
                                               "intake.park_ceiling": "30",
                                               "intake.max_attachments": "200"})
    assert total <= 30 + 1
    assert result["left_for_reconciliation"] >= PHOTOS - 30
