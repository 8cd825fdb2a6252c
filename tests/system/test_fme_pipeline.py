"""The three PythonCaller classes end to end, as FME Flow would run them, on loopback: Survey123
webhook features -> IntakeCaller -> ProcessorCaller -> CompensatorCaller, over SQLite and
PostgreSQL, with the drill's feature layer, photo host and Vision AI stand-ins and a fake clock."""
from __future__ import annotations

import json
import threading
import time


from fme_ai_resilience.drill.standins import FaultSchedule, VisionStandIn
from fme_ai_resilience.fme import CompensatorCaller, IntakeCaller, ProcessorCaller
from fme_ai_resilience.core.intake.keys import trace_id_for
from fme_ai_resilience.core.fme.parameters import parameter_name
from fme_ai_resilience.testing import FakeClock, run_caller

from helpers.pipeline_world import World, loopback_settings


VISION_KEY = "sk-standin-key-0123456789abcdef"


def macros(world, db, **extra):
    """The published parameters every workspace of the test gets (unused ones are ignored,
    as FME passes its own macros too)."""
    values = {parameter_name(k): v for k, v in loopback_settings(world, **extra).items()}
    return {"FAIR_DB": db, "FAIR_VISION_KEY": VISION_KEY,
            "FAIR_WRITEBACK_LAYER_URL": world.layer.layer_url, **values}


def webhook(body, delivery):
    """A feature as the Automation's reader gives it: the body and the headers as JSON."""
    return {"message": json.dumps(body), "webhook.method": "POST",
            "webhook.headers": json.dumps({"X-Survey123-Delivery": delivery,
                                           "Content-Type": "application/json"})}


def test_webhooks_through_intake_processor_and_compensator(shared_ledger_url):
    """Three webhooks (one photo gone): three registrations; two tasks written back to the
    layer through Output, the gone photo NOT_FOUND through <Rejected>; WS-03 reconciles
    the layer (nothing missing) and emits one notification; attributes checked one by one."""
    with World(FaultSchedule()) as world:
        bodies = world.bodies(3, missing_every=3)
        clock = FakeClock(time.time() + 1)   # after the layer dated the features
        given = macros(world, shared_ledger_url)
        intake = [run_caller(IntakeCaller, [webhook(b, f"d-{i}")], given, clock=clock)
                  for i, b in enumerate(bodies)]
        registrations = [run.output[0].as_dict() for run in intake]
        assert [r["fair_http_status"] for r in registrations] == [202, 202, 202]
        assert [r["fair_delivery_id"] for r in registrations] == ["d-0", "d-1", "d-2"]
        keys = [r["fair_key"] for r in registrations]
        assert [r["fair_trace_id"] for r in registrations] == [trace_id_for(k) for k in keys]
        assert all(run.rejected == [] for run in intake)

        processed = run_caller(ProcessorCaller, [{}], given, clock=clock)
        done = {f.getAttribute("fair_key"): f.as_dict() for f in processed.output}
        assert sorted(done) == sorted(keys[:2])
        for key, feature in zip(keys, world.features):
            if key not in done:
                continue
            truth = world.vision.truth(feature.attachments[0].data)
            values = done[key]
            assert (values["fair_status"], values["fair_condition"],
                    values["fair_confidence"]) == ("SUCCEEDED", *truth)
            assert values["fair_outcome"] in ("ACCEPTED", "REVIEW")
            assert (values["fair_error_class"], values["fair_failure_class"],
                    values["fair_retry_at"]) == (None, None, None)
            written = world.layer.attributes_of(feature.global_id)
            assert (written["ai_condition"], written["ai_trace_id"]) == (
                truth[0], trace_id_for(key))
        (gone,) = processed.rejected
        assert (gone.getAttribute("fair_key"), gone.getAttribute("fair_status"),
                gone.getAttribute("fme_rejection_code")) == (keys[2], "DEAD", "NOT_FOUND")

        compensated = run_caller(CompensatorCaller, [{}], given, clock=clock)
        report, note = compensated.output
        assert compensated.rejected == []
        assert (report.getAttribute("fair_status"), report.getAttribute("fair_notified"),
                report.getAttribute("fair_reconciled"), report.getAttribute("fair_missing"),
                report.getAttribute("fair_backfilled")) == ("DONE", 1, 3, 0, 0)
        assert (note.getAttribute("fair_kind"), note.getAttribute("fair_key")) == (
            "notification", keys[2])
        for run in (*intake, processed, compensated):
            for feature in run.output + run.rejected:
                assert all(VISION_KEY not in str(feature.getAttribute(n))
                           for n in feature.getAllAttributeNames())
            assert all(VISION_KEY not in m and "stand-in-portal-token" not in m
                       for m in run.messages())


def test_a_vision_outage_parks_every_task_and_a_later_run_finishes_them(shared_ledger_url):
    """The Vision AI down for the whole first run: every task FAILED through Output with its
    retry time, no <Rejected> feature at all; after that time, with the service back, the
    next run succeeds for each one."""
    clock = FakeClock(time.time())
    with World(FaultSchedule(outages=((0, 3600),))) as world:
        given = macros(world, shared_ledger_url, **{"retry.max_inline_wait_s": "0"})
        for i, b in enumerate(world.bodies(3)):
            run_caller(IntakeCaller, [webhook(b, f"d-{i}")], given, clock=clock)
        first = run_caller(ProcessorCaller, [{}], given, clock=clock)
        assert first.rejected == []
        assert [f.getAttribute("fair_status") for f in first.output] == ["FAILED"] * 3
        assert {f.getAttribute("fair_error_class") for f in first.output} == {"SERVER_ERROR"}
        wait = max(f.getAttribute("fair_retry_after_s") for f in first.output)
        assert world.vision.snapshot()["by_outcome"]["outage"] == 3
        with VisionStandIn(seed=7) as healthy:
            clock.advance(wait + 1)
            again = run_caller(ProcessorCaller, [{}], dict(
                given, FAIR_VISION_ENDPOINT=healthy.endpoint), clock=clock)
        assert again.rejected == []
        assert [f.getAttribute("fair_status") for f in again.output] == ["SUCCEEDED"] * 3


def test_engines_running_the_processor_at_once_share_the_work(shared_ledger_url):
    """Four ProcessorCaller runs in four threads (four engines), as the drill drives them:
    every task is done by exactly one of them, and each photo analysed once. (The fleet's
    concurrency limit starts at four calls: on a fake clock the threads share, a call that
    waited for a slot would see its inline wait pass at once.)"""
    clock = FakeClock(time.time())
    with World(FaultSchedule()) as world:
        given = macros(world, shared_ledger_url, **{"processing.claim_limit": "3",
                                                    "concurrency.start": "4"})
        for i, b in enumerate(world.bodies(12)):
            run_caller(IntakeCaller, [webhook(b, f"d-{i}")], given, clock=clock)
        runs, errors = [], []

        def engine():
            try:
                runs.append(run_caller(ProcessorCaller, [{}], given, clock=clock))
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=engine) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert errors == []
        keys = [f.getAttribute("fair_key") for run in runs for f in run.output]
        assert len(keys) == len(set(keys)) == 12
        assert all(f.getAttribute("fair_status") == "SUCCEEDED"
                   for run in runs for f in run.output)
        assert set(world.vision.snapshot()["analysed_by_sha256"].values()) == {1}
        assert all(len(run.output) == 3 for run in runs)
