"""The stand-ins' pure parts: the fault schedule, the where clauses, the photos and the truth."""
from __future__ import annotations

import pytest

from fme_ai_resilience.drill.standins import (FaultSchedule, FeatureLayerStandIn, PhotoHost,
                                              StandInError, Survey123Sender, VisionStandIn,
                                              WhereError, fake_jpeg)
from fme_ai_resilience.drill.standins.where import braced_global_id, parse_where, timestamp_ms
from fme_ai_resilience.core.errors import ConfigurationError, ResilienceError

FIELDS = {"objectid": "objectid", "globalid": "globalid", "creationdate": "CreationDate",
          "asset_type": "asset_type", "crew": "crew"}
GID = "{5C1E0A2B-9D3F-4E61-8A7B-0F2C3D4E5A6B}"
ROWS = [
    {"objectid": 1, "globalid": GID, "CreationDate": timestamp_ms("2026-11-29 08:00:00"),
     "asset_type": "hydrant", "crew": "north-2"},
    {"objectid": 2, "globalid": "{0A0A0A0A-0000-4000-8000-000000000002}",
     "CreationDate": timestamp_ms("2026-11-30 08:00:00"), "asset_type": "Valve", "crew": None},
    {"objectid": 3, "globalid": "{0A0A0A0A-0000-4000-8000-000000000003}",
     "CreationDate": timestamp_ms("2026-12-01 00:00:00"), "asset_type": "pole",
     "crew": "o'neil"},
]


def _select(where):
    predicate = parse_where(where, FIELDS, guid_fields=("globalid",),
                            date_fields=("CreationDate",))
    return [row["objectid"] for row in ROWS if predicate(row)]


# --- the fault schedule --------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, field", [
    ({"error_rate": 1.5}, "error_rate"),
    ({"error_rate": 0.6, "html_502_rate": 0.6}, "error_rate"),
    ({"latency_s": -1}, "latency_s"),
    ({"rate_limit_per_s": 0}, "rate_limit_per_s"),
    ({"rate_limit_per_s": 1, "rate_limit_burst": 0}, "rate_limit_burst"),
    ({"outages": [(40, 10)]}, "outages[0].end_s"),
    ({"outages": [(1, 2, 3)]}, "outages[0]"),
    ({"truncated_mode": "sometimes"}, "truncated_mode"),
    ({"drift_from_s": float("nan")}, "drift_from_s"),
    ({"drift_rate": 1.1}, "drift_rate"),
    ({"drift_until_s": 30.0}, "drift_until_s"),
    ({"drift_from_s": 30.0, "drift_until_s": 30.0}, "drift_until_s"),
    ({"latency_profile": [(10, 1.0), (5, 2.0)]}, "latency_profile[1].at_s"),
    ({"latency_profile": [(10, -1.0)]}, "latency_profile[0].latency_s"),
    ({"latency_profile": [10]}, "latency_profile[0]"),
    ({"slow_photo_rate": 2.0}, "slow_photo_rate"),
    ({"capacity": 0}, "capacity"),
    ({"cut_photo_rate": -0.1}, "cut_photo_rate"),
    ({"cut_answers": 0}, "cut_answers"),
])
def test_a_bad_fault_schedule_names_its_field(kwargs, field):
    """A schedule that cannot run is a ConfigurationError naming the field, at construction."""
    with pytest.raises(ConfigurationError) as info:
        FaultSchedule(**kwargs)
    assert info.value.field == field


def test_outage_windows_are_start_inclusive_end_exclusive():
    """A call at an outage's start is inside it, a call at its end is not."""
    schedule = FaultSchedule(outages=[(10, 40), (60, 61)])
    assert schedule.outages == ((10.0, 40.0), (60.0, 61.0))
    assert [schedule.outage_at(t) for t in (9.99, 10, 39.99, 40, 60.5)] == [None, 0, 0, None, 1]


def test_the_model_drifts_from_its_start_until_the_operators_fix():
    """Answers drift from ``drift_from_s`` (inclusive) until ``drift_until_s`` (the fix,
    exclusive); without a fix they drift for good."""
    fixed = FaultSchedule(drift_from_s=60.0, drift_until_s=150.0)
    assert [fixed.drifted(t) for t in (59.9, 60.0, 149.9, 150.0)] == [False, True, True, False]
    assert FaultSchedule(drift_from_s=60.0).drifted(1e6)
    assert not FaultSchedule().drifted(100.0)


def test_a_latency_profile_is_interpolated_and_held_flat_at_its_ends():
    """A service that slows down gradually and recovers: the latency in force follows the
    profile's points linearly, and stays at the first before it and the last after it."""
    ramp = FaultSchedule(latency_s=9.0, latency_profile=[(10, 1.0), (20, 3.0), (30, 1.0)])
    assert [ramp.latency_at(t) for t in (0, 10, 15, 20, 25, 30, 99)] == [
        1.0, 1.0, 2.0, 3.0, 2.0, 1.0, 1.0]
    assert FaultSchedule(latency_s=9.0).latency_at(50) == 9.0


def test_cut_answers_pick_photos_and_how_often_from_the_seed():
    """The photos whose first answers are cut, and how many of them (1..cut_answers), are a
    function of the photo and the seed: every count occurs over enough photos."""
    vision = VisionStandIn(FaultSchedule(cut_photo_rate=0.5, cut_answers=3), seed=4)
    counts = [vision.cut_count(fake_jpeg(f"p{i}", seed=4)) for i in range(200)]
    assert counts == [vision.cut_count(fake_jpeg(f"p{i}", seed=4)) for i in range(200)]
    assert set(counts) == {0, 1, 2, 3}
    assert 60 < counts.count(0) < 140
    assert VisionStandIn(FaultSchedule(), seed=4).cut_count(fake_jpeg("p0", seed=4)) == 0


def test_the_token_bucket_holds_one_second_of_calls_by_default():
    """Without a burst size the bucket holds a second's worth of calls, at least one."""
    assert FaultSchedule(rate_limit_per_s=5).burst == 5
    assert FaultSchedule(rate_limit_per_s=0.5).burst == 1
    assert FaultSchedule(rate_limit_per_s=5, rate_limit_burst=2).burst == 2
    assert FaultSchedule().burst == 0


# --- ground truth and photos ---------------------------------------------------------------------

def test_ground_truth_is_a_function_of_the_photo_and_the_seed():
    """The same bytes get the same truth from any stand-in with that seed; another seed differs."""
    photos = [fake_jpeg(f"p{i}") for i in range(40)]
    first, again = VisionStandIn(seed=5), VisionStandIn(seed=5)
    truths = [first.truth(p) for p in photos]
    assert truths == [again.truth(p) for p in photos]
    assert truths != [VisionStandIn(seed=6).truth(p) for p in photos]
    assert {c for c, _ in truths} == {"good", "fair", "damaged"}
    assert all(0.55 <= conf <= 0.99 for _, conf in truths)


def test_ground_truth_uses_the_conditions_given():
    """A stand-in configured with other conditions answers only with those."""
    vision = VisionStandIn(conditions=("ok", "replace"))
    assert {vision.truth(fake_jpeg(f"p{i}"))[0] for i in range(30)} == {"ok", "replace"}
    with pytest.raises(ConfigurationError):
        VisionStandIn(conditions=())


def test_fake_photos_look_like_jpegs_and_differ_by_name_and_seed():
    """Every generated photo starts and ends like a JPEG, repeats exactly, and is distinct."""
    photos = {fake_jpeg(f"photo-{i}", seed=s) for i in range(20) for s in (0, 1)}
    assert len(photos) == 40
    assert all(p.startswith(b"\xff\xd8\xff") and p.endswith(b"\xff\xd9") for p in photos)
    assert fake_jpeg("x", seed=3) == fake_jpeg("x", seed=3)
    assert len(fake_jpeg("x", size=4096)) == 4096
    with pytest.raises(ConfigurationError):
        fake_jpeg("x", size=10)


# --- where clauses -------------------------------------------------------------------------------

@pytest.mark.parametrize("where, expected", [
    ("1=1", [1, 2, 3]),
    ("", [1, 2, 3]),
    ("1=0", []),
    ("CreationDate >= timestamp '2026-11-30 00:00:00' AND "
     "CreationDate < timestamp '2026-12-01 00:00:00'", [2]),
    ("creationdate >= DATE '2026-11-30'", [2, 3]),
    ("CreationDate < '2026-11-30 00:00:00'", [1]),
    (f"globalid IN ('{GID.lower()}', '{{0A0A0A0A-0000-4000-8000-000000000003}}')", [1, 3]),
    (f"GlobalID = '{GID[1:-1]}'", [1]),
    ("asset_type = 'VALVE'", [2]),
    ("asset_type <> 'valve' OR objectid = 2", [1, 2, 3]),
    ("NOT (asset_type = 'hydrant' OR asset_type = 'pole')", [2]),
    ("crew IS NULL", [2]),
    ("crew IS NOT NULL AND objectid > 1", [3]),
    ("crew = 'o''neil'", [3]),
    ("asset_type LIKE 'h%'", [1]),
    ("asset_type NOT IN ('pole')", [1, 2]),
    ("objectid IN (1, 3) and asset_type like '_ole'", [3]),
])
def test_where_clauses_select_the_features_they_name(where, expected):
    """CreationDate ranges, GlobalID lists in any case and the usual SQL select as in ArcGIS."""
    assert _select(where) == expected


@pytest.mark.parametrize("where", [
    "CreationDate >> 5", "nosuchfield = 1", "objectid = ", "objectid IN (1, 2",
    "globalid = 'not-a-guid'", "CreationDate > timestamp 'yesterday'", "objectid = 1 extra",
    "objectid IN (crew)", "(objectid = 1", "objectid = 1 @",
])
def test_a_where_clause_it_cannot_read_is_a_where_error(where):
    """An unreadable clause raises WhereError (a ResilienceError), never a Python error."""
    with pytest.raises(WhereError) as info:
        _select(where)
    assert isinstance(info.value, ResilienceError)


def test_timestamps_are_utc_epoch_milliseconds():
    """``timestamp 'YYYY-MM-DD HH:MM:SS'`` is read as UTC, to the millisecond."""
    assert timestamp_ms("1970-01-01 00:00:01") == 1000
    assert timestamp_ms("2026-11-29 08:15:00.250") == 1795940100250
    assert braced_global_id("5c1e0a2b-9d3f-4e61-8a7b-0f2c3d4e5a6b") == GID


# --- construction --------------------------------------------------------------------------------

def test_a_stand_in_has_no_url_before_its_first_start():
    """With port 0 the port is only known once started: asking earlier is a StandInError."""
    with pytest.raises(StandInError):
        PhotoHost().url  # noqa: B018
    with pytest.raises(StandInError):
        FeatureLayerStandIn().add_feature()


@pytest.mark.parametrize("url", ["http://example.com/webhook", "https://127.0.0.1/x",
                                 "ftp://127.0.0.1/x"])
def test_the_sender_posts_only_to_loopback(url):
    """A drill never fires a burst at a real host by mistake."""
    with pytest.raises(ConfigurationError):
        Survey123Sender(url)


def test_bad_constructor_arguments_are_configuration_errors():
    """Ports, time scales and page sizes are checked where they are given."""
    for make in (lambda: VisionStandIn(time_scale=0), lambda: PhotoHost(port=70000),
                 lambda: FeatureLayerStandIn(max_record_count=0),
                 lambda: FeatureLayerStandIn(service_name="a/b"),
                 lambda: VisionStandIn(schedule="fast")):
        with pytest.raises(ConfigurationError):
            make()
