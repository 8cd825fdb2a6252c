"""A forged webhook cannot make ``process`` reach an internal address: photo URLs in 29 forms
of loopback, private, link-local and look-alike hosts are refused, and a server listening on
127.0.0.1 sees no connection."""
from __future__ import annotations

import time


from fme_ai_resilience.cli import main
from fme_ai_resilience.core.intake.keys import compose_key, trace_id_for
from fme_ai_resilience.store import open_store
from fme_ai_resilience.core.intake.submission import Submission

from helpers.hostile import Front


SERVICE = "https://services.example.com/abc/arcgis/rest/services/inspection/FeatureServer"


def forms(port):
    return [f"http://127.0.0.1:{port}/p.jpg", f"https://127.0.0.1:{port}/p.jpg",
            f"http://localhost:{port}/p.jpg", f"http://[::1]:{port}/p.jpg",
            f"http://[::ffff:127.0.0.1]:{port}/p.jpg", f"http://2130706433:{port}/p.jpg",
            f"http://0x7f.1:{port}/p.jpg", f"http://0177.0.0.1:{port}/p.jpg",
            f"http://127.1:{port}/p.jpg", f"http://0:{port}/p.jpg",
            f"http://127.0.0.1.nip.io:{port}/p.jpg", f"http://services.example.com@127.0.0.1:"
            f"{port}/p.jpg", f"https://services.example.com:{port}@127.0.0.1/p.jpg",
            f"http://127.0.0.1:{port}\\@services.example.com/p.jpg",
            f"http://services.example.com#@127.0.0.1:{port}/p.jpg",
            f"http://[0:0:0:0:0:ffff:7f00:1]:{port}/p.jpg", f"http://①②⑦.0.0.1:{port}/p.jpg",
            f"http://127.0.0.1%2f:{port}/p.jpg", f"http://127.0.0.1 :{port}/p.jpg",
            f"http://%31%32%37.0.0.1:{port}/p.jpg", "http://169.254.169.254/latest/meta-data/",
            "http://metadata.google.internal/computeMetadata/v1/", "http://10.0.0.5/p.jpg",
            "http://192.168.1.1/p.jpg", "http://[fd00::1]/p.jpg", "file:///etc/passwd",
            "ftp://services.example.com/p.jpg", "gopher://127.0.0.1:6379/_INFO",
            f"http://services.example.com:{port}/p.jpg"]


def test_29_forms_of_an_internal_photo_url_reach_nothing(tmp_path, monkeypatch):
    """Guarantee: every internal or look-alike photo URL a webhook names is refused before any
    connection, the task a dead letter; the loopback server they point at is never reached."""
    monkeypatch.delenv("FAIR_DB_URL", raising=False)
    with Front(lambda method, path: b"{}") as sentinel:
        urls = forms(sentinel.port)
        assert len(urls) == 29
        db = f"sqlite:///{tmp_path / 'ledger.db'}"
        with open_store(db, init_schema=True, create=True) as store:
            store.set_config({"vision.endpoint": sentinel.url + "/analyze",
                              "intake.feature_services": SERVICE,
                              "processing.claim_limit": "50"}, now=time.time())
            for i, url in enumerate(urls):
                feature, photo = f"{i:08x}-0000-4000-8000-000000000001", \
                    f"{i:08x}-0000-4000-8000-000000000002"
                key = compose_key(feature, photo)
                store.register(Submission(key, feature, trace_id_for(key),
                                          attachment_global_id=photo, attachment_url=url,
                                          layer_url=f"{SERVICE}/0", service_url=SERVICE),
                               1000, now=time.time())
        assert main(["process", "--db", db, "--once"]) == 0
        with open_store(db) as store:
            assert store.counts().get("DEAD") == 29, store.counts()
        assert sentinel.seen == []
