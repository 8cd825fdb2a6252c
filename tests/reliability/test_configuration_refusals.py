"""Settings that cannot work are refused, never buried: with no photo host configured (the
defaults) ``serve``, ``process`` and the intake and processor PythonCallers refuse to start
naming the setting, and so does the processor without a layer for its ``feature_layer`` sink;
a task that meets the deployment's setup later is a CONFIGURATION dead letter (never
BAD_REQUEST), requeued by ``dlq requeue --cause CONFIGURATION`` once the setup is fixed."""
from __future__ import annotations

import os
import random
import subprocess
import sys
import time

import pytest
import requests

from fme_ai_resilience.cli import main
from fme_ai_resilience.core.clock import SystemClock
from fme_ai_resilience.core.config.settings import Settings
from fme_ai_resilience.core.errors import FailureClass
from fme_ai_resilience.core.intake.keys import compose_key, trace_id_for
from fme_ai_resilience.core.intake.submission import Submission
from fme_ai_resilience.core.ledger import Status
from fme_ai_resilience.fme import IntakeCaller, ProcessorCaller
from fme_ai_resilience.services.processing.processor import Processor, VisionRoute
from fme_ai_resilience.services.processing.sinks import CollectingSink
from fme_ai_resilience.services.vision import VisionClient
from fme_ai_resilience.store import open_store
from fme_ai_resilience.testing import run_caller

from helpers.fme_fixtures import KEY, body
from helpers.hostile import Front
from helpers.one_task import OneTask

SERVICE = "https://services.example.com/abc/arcgis/rest/services/inspection/FeatureServer"
VISION = "https://vision.example.com/analyze"
FEATURE = "5c1e0a2b-9d3f-4e61-8a7b-0f2c3d4e5a6b"
PHOTO = "a0b1c2d3-e4f5-4a6b-8c7d-9e0f1a2b3c4d"


@pytest.fixture(autouse=True)
def no_fair_environment(monkeypatch):
    """Only what a test configures counts: no ``FAIR_*`` variable of the machine."""
    for name in list(os.environ):
        if name.startswith("FAIR_"):
            monkeypatch.delenv(name)


def ledger_with_a_task(tmp_path, config, url=f"{SERVICE}/0/204/attachments/77", now=None):
    """A SQLite ledger holding one photo's task (due from ``now``, default the time), ``config``
    in its config table."""
    db = f"sqlite:///{tmp_path / 'ledger.db'}"
    key = compose_key(FEATURE, PHOTO)
    with open_store(db, init_schema=True, create=True) as store:
        if config:
            store.set_config(config, now=time.time())
        store.register(Submission(key, FEATURE, trace_id_for(key), attachment_global_id=PHOTO,
                                  attachment_url=url, layer_url=f"{SERVICE}/0",
                                  service_url=SERVICE), 100,
                       now=time.time() if now is None else now)
    return db, key


def test_serve_with_no_photo_host_refuses_to_start_naming_the_setting(tmp_path):
    """Guarantee: `serve` with no feature service and no photo host (the defaults) exits 2
    before it listens, with one error line naming intake.feature_services: it never answers a
    webhook 202 whose every photo would be refused."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAIR_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "fme_ai_resilience", "serve", "--db",
         f"sqlite:///{tmp_path / 'ledger.db'}", "--host", "127.0.0.1", "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"serve started with nothing configured: {out[-500:]}")
    assert proc.returncode == 2, (out, err)
    assert "intake gateway on" not in out
    (line,) = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert line.startswith("error: intake.feature_services=")
    assert "download.allowed_hosts" in line


def test_process_with_no_photo_host_refuses_to_start_and_buries_nothing(tmp_path, capsys):
    """Guarantee: `process` with a Vision AI but no feature service and no photo host exits 2
    naming intake.feature_services, and the waiting task stays PENDING (no dead letter), to
    be processed once the setting is there."""
    db, key = ledger_with_a_task(tmp_path, {"vision.endpoint": VISION})
    assert main(["process", "--db", db, "--once"]) == 2
    errors = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: intake.feature_services=")
    with open_store(db) as store:
        assert store.get(key).status is Status.PENDING
        assert store.counts().get("DEAD", 0) == 0


def test_process_with_photo_hosts_but_no_layer_to_write_refuses_to_start(tmp_path, capsys):
    """Guarantee: `process` whose feature_layer sink has no layer it may write (no feature
    service, writeback.layer_url or writeback.table_url) exits 2 naming writeback.layer_url,
    the task left PENDING; the same hosts with writeback.sink=collect start."""
    config = {"vision.endpoint": VISION, "download.allowed_hosts": "photos.example.com"}
    db, key = ledger_with_a_task(tmp_path, config, url="https://photos.example.com/p.jpg")
    assert main(["process", "--db", db, "--once"]) == 2
    errors = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: writeback.layer_url=")
    with open_store(db) as store:
        assert store.get(key).status is Status.PENDING
    empty = f"sqlite:///{tmp_path / 'empty.db'}"
    with open_store(empty, init_schema=True, create=True) as store:
        store.set_config({**config, "writeback.sink": "collect"}, now=time.time())
    assert main(["process", "--db", empty, "--once"]) == 0


def test_the_intake_caller_rejects_naming_the_parameter_and_registers_nothing(fair_db,
                                                                             fake_clock):
    """Guarantee: the WS-01 caller with no photo host rejects the webhook's feature
    (CONFIGURATION, naming FAIR_INTAKE_FEATURE_SERVICES) and registers no task: nothing is
    accepted that could only become a dead letter."""
    run = run_caller(IntakeCaller, [{"message": body()}], {"FAIR_DB": fair_db},
                     clock=fake_clock)
    assert run.output == []
    (out,) = run.rejected
    assert out.getAttribute("fme_rejection_code") == "CONFIGURATION"
    assert out.getAttribute("fair_parameter") == "FAIR_INTAKE_FEATURE_SERVICES"
    assert "FAIR_DOWNLOAD_ALLOWED_HOSTS" in out.getAttribute("fme_rejection_message")
    with open_store(fair_db) as store:
        assert store.get(KEY) is None and sum(store.counts().values()) == 0


@pytest.mark.parametrize("macros, parameter", [
    ({}, "FAIR_INTAKE_FEATURE_SERVICES"),
    ({"FAIR_DOWNLOAD_ALLOWED_HOSTS": "photos.example.com"}, "FAIR_WRITEBACK_LAYER_URL")])
def test_the_processor_caller_rejects_naming_the_parameter_and_claims_nothing(
        tmp_path, fake_clock, macros, parameter):
    """Guarantee: the WS-02 caller with no photo host, or with hosts but no layer for its
    feature_layer sink, rejects its Creator feature (CONFIGURATION, naming the parameter)
    and leaves the waiting task PENDING, never a BAD_REQUEST dead letter."""
    db, key = ledger_with_a_task(tmp_path, {}, now=fake_clock.now())   # due at once
    run = run_caller(ProcessorCaller, [{}], {"FAIR_DB": db, "FAIR_VISION_ENDPOINT": VISION,
                                            **macros}, clock=fake_clock)
    (out,) = run.rejected
    assert out.getAttribute("fme_rejection_code") == "CONFIGURATION"
    assert out.getAttribute("fair_parameter") == parameter
    with open_store(db) as store:
        assert store.get(key).status is Status.PENDING


def test_a_processor_built_without_photo_hosts_makes_configuration_dead_letters(tmp_path):
    """Guarantee: a processor built by hand around settings with no photo host (past the
    start-up check) turns the task into a CONFIGURATION dead letter, not BAD_REQUEST, before
    any connection: the deployment's fault, for `dlq requeue --cause CONFIGURATION`."""
    db, key = ledger_with_a_task(tmp_path, {})
    with Front(lambda method, path: b"{}") as vision, open_store(db) as store:
        client = VisionClient(vision.url + "/analyze", "generic", "sk-test-0123456789abcdef",
                              session=requests.Session(), clock=SystemClock(),
                              rng=random.Random(1))
        processor = Processor(Settings(), VisionRoute.of(client, "vision"), CollectingSink(),
                              store=store, rng=random.Random(2))
        (result,) = processor.run_batch().results
        record = store.get(key)
        assert vision.seen == []
    assert (result.status, result.failure_class) == (Status.DEAD, FailureClass.CONFIGURATION)
    assert record.failure_class is FailureClass.CONFIGURATION
    assert "allow-list is empty" in record.last_error
    assert main(["dlq", "requeue", "--cause", "CONFIGURATION", "--db", db]) == 0
    with open_store(db) as store:
        assert store.get(key).status is Status.PENDING


def test_a_photo_list_refused_for_want_of_a_service_is_requeued_after_the_fix(tmp_path,
                                                                               capsys):
    """Guarantee: a webhook without a photo list, met by a processor whose settings name no
    feature service (photos from download.allowed_hosts, conclusions collected), is a
    CONFIGURATION dead letter, not BAD_REQUEST; once intake.feature_services names the
    service, `dlq requeue --cause CONFIGURATION` brings it back and `process` lists the
    feature's photo and analyses it (real layer and Vision AI stand-ins on loopback)."""
    world = OneTask(tmp_path)
    try:
        layer, service = world.layer.layer_url, world.layer.service_url
        feature = world.feature
        key = compose_key(feature.global_id, None)
        host = world.layer.url.split("//", 1)[1]
        with open_store(world.db, init_schema=True, create=True) as store:
            store.set_config({"vision.endpoint": world.vision.endpoint,
                              "download.allowed_hosts": host,
                              "download.allow_http_hosts": "127.0.0.1",
                              "download.allow_private_hosts": "127.0.0.1",
                              "writeback.sink": "collect"}, now=time.time())
            store.register(Submission(key, feature.global_id, trace_id_for(key),
                                      layer_url=layer, service_url=service,
                                      object_id=feature.object_id, attachments_unknown=True),
                           100, now=time.time())
        assert main(["process", "--db", world.db, "--once"]) == 0
        with open_store(world.db) as store:
            dead = store.get(key)
            assert (dead.status, dead.failure_class) == (Status.DEAD,
                                                         FailureClass.CONFIGURATION)
            assert "intake.feature_services" in dead.last_error
            store.set_config({"intake.feature_services": service}, now=time.time())
        capsys.readouterr()
        assert main(["dlq", "requeue", "--cause", "CONFIGURATION", "--db", world.db]) == 0
        assert "requeued 1 dead letter(s)" in capsys.readouterr().out
        assert main(["process", "--db", world.db, "--once"]) == 0
        assert main(["process", "--db", world.db, "--once"]) == 0
        with open_store(world.db) as store:
            assert store.get(key).status is Status.SUCCEEDED   # its photo list registered
            assert store.counts().get("SUCCEEDED") == 2, store.counts()   # and the photo
    finally:
        world.close()


def test_a_url_outside_a_configured_allow_list_stays_the_requests_fault(tmp_path):
    """Guarantee: with photo hosts configured, a webhook's photo URL outside them is still
    refused as the request's fault (BAD_REQUEST), not requeued as the deployment's."""
    db, key = ledger_with_a_task(tmp_path, {"vision.endpoint": VISION,
                                            "intake.feature_services": SERVICE},
                                 url="https://elsewhere.example.net/p.jpg")
    assert main(["process", "--db", db, "--once"]) == 0
    with open_store(db) as store:
        record = store.get(key)
    assert (record.status, record.failure_class) == (Status.DEAD, FailureClass.BAD_REQUEST)
    assert "not on the allow-list" in record.last_error


def test_the_ledger_commands_need_no_photo_host(tmp_path, capsys):
    """Guarantee: the commands that read or repair the ledger (db init, status, check, dlq,
    review, breaker, degrade, compensate) run with nothing configured: only what accepts or
    processes photos refuses."""
    db = f"sqlite:///{tmp_path / 'ledger.db'}"
    for argv in (["db", "init"], ["status"], ["check"], ["dlq", "list"],
                 ["dlq", "requeue", "--cause", "CONFIGURATION"], ["review", "list"],
                 ["breaker", "show"], ["degrade", "show"], ["compensate"]):
        assert main([*argv, "--db", db]) == 0, (argv, capsys.readouterr().err)
