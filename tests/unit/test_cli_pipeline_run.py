"""``process``, ``compensate`` and ``reconcile`` on a SQLite ledger, ArcGIS and the Vision AI
behind ``responses``."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
import responses

from fme_ai_resilience.cli import main
from fme_ai_resilience.cli.compensate import read_time
from fme_ai_resilience.cli.common import OptionError
from fme_ai_resilience.core.intake.keys import compose_key, trace_id_for
from fme_ai_resilience.store import open_store
from fme_ai_resilience.core.intake.submission import Submission

SERVICE = "https://gis.example.com/arcgis/rest/services/Inspections/FeatureServer"
LAYER = f"{SERVICE}/0"
VISION = "https://vision.example.com/analyze"
PHOTO_URL = f"{LAYER}/7/attachments/1"
FEATURE = "1f0c6a52-3b1e-4a53-9d2e-6e1d7f1b2c3d"
PHOTO = "a9d6e0b1-7c2f-4e8a-b5d4-3c2b1a0f9e8d"


@pytest.fixture
def db(tmp_path, monkeypatch):
    for name in ("FAIR_DB_URL", "FAIR_LOG_FORMAT"):
        monkeypatch.delenv(name, raising=False)
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with open_store(url, init_schema=True, create=True) as store:
        store.set_config({"vision.endpoint": VISION, "intake.feature_services": SERVICE},
                         now=time.time())
    return url


def register(db):
    key = compose_key(FEATURE, PHOTO)
    with open_store(db) as store:
        store.register(Submission(key, FEATURE, trace_id_for(key), attachment_global_id=PHOTO,
                                  attachment_url=PHOTO_URL, layer_url=LAYER,
                                  service_url=SERVICE, object_id=7,
                                  attributes={"globalid": "{" + FEATURE.upper() + "}"}),
                       100, now=time.time())
    return key


def test_process_once_on_an_empty_ledger_says_so(db, capsys):
    assert main(["process", "--db", db]) == 0
    assert capsys.readouterr().out.strip() == "0 task(s) (stopped: no due task)"


def test_process_without_a_vision_endpoint_is_a_configuration_error(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'bare.db'}"
    open_store(url, init_schema=True, create=True).close()
    assert main(["process", "--db", url]) == 2
    assert "vision.endpoint" in capsys.readouterr().err


def test_process_loop_stops_after_max_batches(db, capsys):
    assert main(["process", "--db", db, "--loop", "--idle", "0", "--max-batches", "3"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3


def test_set_overrides_the_ledger_config_for_one_run(db, capsys):
    """--set wins over the config table; a bad value names its setting."""
    assert main(["process", "--db", db, "--set", "processing.claim_limit=0"]) == 2
    assert "processing.claim_limit" in capsys.readouterr().err


def test_process_logs_json_lines_with_the_trace_id(db):
    """--log-format json: one JSON object per line, the task's trace id on its lines."""
    key = register(db)
    with open_store(db) as store:   # the photo host is not allowed: a dead letter, logged
        store.set_config({"intake.feature_services": "https://elsewhere.example.com/arcgis/"
                                                     "rest/services/X/FeatureServer"},
                         now=time.time())
    done = subprocess.run([sys.executable, "-m", "fme_ai_resilience", "process", "--db", db,
                           "--log-format", "json"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stderr.splitlines()]
    (dead,) = [line for line in lines if "DEAD" in line["message"]]
    assert dead["level"] == "WARNING" and dead["trace_id"] == trace_id_for(key)


def test_an_unknown_log_format_is_refused(db, monkeypatch, capsys):
    monkeypatch.setenv("FAIR_LOG_FORMAT", "xml")
    assert main(["process", "--db", db]) == 2
    assert "FAIR_LOG_FORMAT" in capsys.readouterr().err


def test_compensate_runs_one_pass_and_says_what_it_did(db, capsys):
    assert main(["compensate", "--db", db, "--no-reconcile"]) == 0
    out = capsys.readouterr().out
    assert "reaped: 0 requeued, 0 buried" in out and "reconciled: not run" in out


@responses.activate
def test_reconcile_reports_the_gap_of_a_webhook_that_never_came(db, capsys):
    responses.get(f"{LAYER}/query", json={"features": [{"attributes": {
        "objectid": 7, "globalid": "{" + FEATURE.upper() + "}", "CreationDate": 1_790_000_000_000,
        "asset_type": "hydrant", "crew": "north-2"}}]})
    responses.get(f"{LAYER}/queryAttachments", json={"attachmentGroups": [{
        "parentObjectId": 7, "attachmentInfos": [
            {"id": 1, "globalId": "{" + PHOTO.upper() + "}", "contentType": "image/jpeg"}]}]})
    code = main(["reconcile", "--db", db, "--layer", LAYER, "--since", "2026-09-20",
                 "--until", "2026-09-23T00:00Z"])
    out = capsys.readouterr().out
    assert code == 0
    assert "1 feature(s), 1 photo(s) expected, 1 missing, 0 backfilled" in out
    assert "hydrant 1" in out and "north-2 1" in out


@pytest.mark.parametrize("args, field", [
    (["--since", "yesterday"], "--since"),
    (["--since", "2026-11-30", "--until", "2026-11-29"], "--since"),
    (["--since", "inf"], "--since")])
def test_reconcile_refuses_a_window_it_cannot_read(db, capsys, args, field):
    try:
        code = main(["reconcile", "--db", db, "--layer", LAYER, *args])
    except SystemExit as exc:       # argparse refuses what it cannot parse
        code = exc.code
    assert code == 2
    assert field in capsys.readouterr().err


@pytest.mark.parametrize("text, epoch", [
    ("2026-11-30", 1_795_996_800.0), ("2026-11-30T06:00Z", 1_796_018_400.0),
    ("2026-11-30T07:00+01:00", 1_796_018_400.0), ("1796018400", 1_796_018_400.0)])
def test_times_are_iso_8601_in_utc_unless_an_offset_or_epoch_seconds(text, epoch):
    assert read_time(text) == epoch


def test_a_time_that_is_no_time_is_an_option_error():
    with pytest.raises(OptionError):
        read_time("last tuesday")
