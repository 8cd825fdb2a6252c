"""Settings: defaults, loaders from strings and FAIR_* variables, and validation."""
from __future__ import annotations

import dataclasses

import pytest

from fme_ai_resilience.errors import ConfigurationError
from fme_ai_resilience.settings import Settings


def test_defaults_are_the_seeds_thresholds():
    """Every threshold the seed names has its default value."""
    s = Settings()
    assert (s.timeouts.connect_s, s.timeouts.tls_s, s.timeouts.ttfb_s, s.timeouts.body_s) == (
        3, 3, 20, 4)
    assert (s.retry.backoff_base_s, s.retry.backoff_cap_s, s.retry.task_attempts) == (1, 60, 6)
    assert (s.breaker.failure_rate, s.breaker.min_calls, s.breaker.cooldown_s,
            s.breaker.half_open_probes, s.breaker.close_ratio) == (0.5, 20, 60, 5, 0.8)
    assert s.validation.confidence_threshold == 0.75
    assert (s.alerts.anomaly_rate, s.alerts.e2e_p95_warning_ratio) == (0.05, 0.8)
    assert s.intake.backpressure_ratio == 0.8
    assert s.intake.watermark == 0 and s.intake.capacity.watermark == 48


def test_from_mapping_converts_strings_of_every_kind():
    """FME published parameters arrive as strings; each becomes its field's type."""
    s = Settings.from_mapping({
        "timeouts.ttfb_s": "15", "RETRY_TASK_ATTEMPTS": " 4 ", "retry.jitter": "equal",
        "validation.thresholds": "hydrant=0.8, valve=0.9", "download.allowed_hosts": "a.com,b.com",
        "Intake.Overload_Mode": "reject", "intake.watermark": "30",
    })
    assert s.timeouts.ttfb_s == 15.0 and s.retry.task_attempts == 4
    assert s.retry.jitter == "equal" and s.intake.overload_mode == "reject"
    assert dict(s.validation.thresholds) == {"hydrant": 0.8, "valve": 0.9}
    assert s.validation.threshold_for("valve") == 0.9 and s.validation.threshold_for(None) == 0.75
    assert s.download.allowed_hosts == ("a.com", "b.com")
    assert s.intake.capacity.watermark == 30


def test_blank_values_keep_defaults():
    """An optional FME parameter left blank (or None) means 'not set'."""
    assert Settings.from_mapping({"retry.jitter": "  ", "breaker.min_calls": None}) == Settings()


def test_typed_values_are_accepted_and_whole_floats_become_ints():
    """Values already typed pass through; 4.0 for a whole-number field becomes 4."""
    s = Settings.from_mapping({"intake.engines": 4.0, "breaker.failure_rate": 0.3})
    assert s.intake.engines == 4 and isinstance(s.intake.engines, int)
    assert s.breaker.failure_rate == 0.3


def test_from_env_reads_fair_variables_only():
    """FAIR_* variables override defaults; other variables and other tools' FAIR_* are ignored."""
    s = Settings.from_env({"FAIR_BREAKER_FAILURE_RATE": "0.4", "PATH": "/bin",
                           "FAIR_TEST_PG_URL": "postgresql://x", "fair_retry_jitter": "equal"})
    assert s.breaker.failure_rate == 0.4 and s.retry.jitter == "equal"


def test_from_env_typo_in_a_known_group_is_an_error():
    """FAIR_BREAKER_FAILURE_RAT is a typo, not someone else's variable: it raises."""
    with pytest.raises(ConfigurationError) as info:
        Settings.from_env({"FAIR_BREAKER_FAILURE_RAT": "0.4"})
    assert info.value.field == "FAIR_BREAKER_FAILURE_RAT" and info.value.value == "0.4"


def test_without_prefix_every_key_must_be_a_setting():
    """A mapping given without a prefix may not carry unknown names."""
    with pytest.raises(ConfigurationError, match="is not a known setting"):
        Settings.from_mapping({"FME_MF_DIR": "/tmp"})


def test_with_values_returns_a_new_value():
    """Settings are immutable; with_values builds a copy."""
    s = Settings()
    t = s.with_values({"breaker.cooldown_s": "90"})
    assert s.breaker.cooldown_s == 60 and t.breaker.cooldown_s == 90
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.retry = t.retry  # type: ignore[misc]


def test_flat_dict_names_every_setting():
    """as_flat_dict lists group.field names that from_mapping reads back unchanged."""
    flat = Settings().as_flat_dict()
    assert flat["retry.task_attempts"] == 6 and flat["validation.thresholds"] == {}
    assert Settings.from_mapping({k: v for k, v in flat.items()
                                  if not isinstance(v, dict)}) == Settings()


UNCONSTRAINED = {"download.allowed_hosts", "download.allow_http_hosts",
                 "degrade.critical_types"}

INVALID = [
    ("timeouts.connect_s", "0", "timeouts.connect_s"),
    ("timeouts.tls_s", "-1", "timeouts.tls_s"),
    ("timeouts.ttfb_s", "abc", "timeouts.ttfb_s"),
    ("timeouts.body_s", "inf", "timeouts.body_s"),
    ("retry.backoff_base_s", "0", "retry.backoff_base_s"),
    ("retry.backoff_cap_s", "0.5", "retry.backoff_cap_s"),
    ("retry.jitter", "wobbly", "retry.jitter"),
    ("retry.task_attempts", "0", "retry.task_attempts"),
    ("retry.task_attempts", "2.5", "retry.task_attempts"),
    ("retry.max_inline_wait_s", "-1", "retry.max_inline_wait_s"),
    ("retry.fleet_retry_ratio", "1.5", "retry.fleet_retry_ratio"),
    ("retry.fleet_retry_floor_per_s", "-0.1", "retry.fleet_retry_floor_per_s"),
    ("retry.fleet_window_s", "0", "retry.fleet_window_s"),
    ("breaker.failure_rate", "2", "breaker.failure_rate"),
    ("breaker.min_calls", "0", "breaker.min_calls"),
    ("breaker.window_s", "0", "breaker.window_s"),
    ("breaker.slow_call_s", "-1", "breaker.slow_call_s"),
    ("breaker.slow_call_rate", "-0.1", "breaker.slow_call_rate"),
    ("breaker.cooldown_s", "0", "breaker.cooldown_s"),
    ("breaker.cooldown_max_s", "30", "breaker.cooldown_max_s"),
    ("breaker.cooldown_factor", "0.5", "breaker.cooldown_factor"),
    ("breaker.half_open_probes", "0", "breaker.half_open_probes"),
    ("breaker.close_ratio", "1.1", "breaker.close_ratio"),
    ("breaker.probe_timeout_s", "0", "breaker.probe_timeout_s"),
    ("breaker.cache_ttl_s", "2", "breaker.cache_ttl_s"),
    ("degrade.sample_backlog", "0", "degrade.sample_backlog"),
    ("degrade.critical_backlog", "0.5", "degrade.critical_backlog"),
    ("degrade.pause_backlog", "-1", "degrade.pause_backlog"),
    ("degrade.fallback_error_rate", "1.5", "degrade.fallback_error_rate"),
    ("degrade.exit_ratio", "-0.1", "degrade.exit_ratio"),
    ("degrade.hold_s", "0", "degrade.hold_s"),
    ("degrade.sample_ratio", "2", "degrade.sample_ratio"),
    ("intake.engines", "0", "intake.engines"),
    ("intake.mean_processing_s", "0", "intake.mean_processing_s"),
    ("intake.latency_promise_s", "-5", "intake.latency_promise_s"),
    ("intake.watermark", "-1", "intake.watermark"),
    ("intake.backpressure_ratio", "1.5", "intake.backpressure_ratio"),
    ("intake.overload_mode", "drop", "intake.overload_mode"),
    ("intake.park_ceiling", "47", "intake.park_ceiling"),
    ("intake.max_body_bytes", "0", "intake.max_body_bytes"),
    ("intake.max_depth", "0", "intake.max_depth"),
    ("intake.max_attachments", "many", "intake.max_attachments"),
    ("intake.drain_window_s", "0", "intake.drain_window_s"),
    ("intake.drain_min_completions", "1.5", "intake.drain_min_completions"),
    ("intake.max_invalid_per_minute", "-1", "intake.max_invalid_per_minute"),
    ("intake.max_invalid_total", "1e3", "intake.max_invalid_total"),
    ("processing.lease_s", "0", "processing.lease_s"),
    ("processing.claim_limit", "0", "processing.claim_limit"),
    ("validation.confidence_threshold", "1.5", "validation.confidence_threshold"),
    ("validation.thresholds", "hydrant=2", "validation.thresholds[hydrant]"),
    ("validation.thresholds", "hydrant", "validation.thresholds"),
    ("validation.conditions", ",", "validation.conditions"),
    ("download.max_photo_bytes", "0", "download.max_photo_bytes"),
    ("download.max_redirects", "-1", "download.max_redirects"),
    ("alerts.anomaly_rate", "2", "alerts.anomaly_rate"),
    ("alerts.e2e_p95_warning_ratio", "-1", "alerts.e2e_p95_warning_ratio"),
    ("database.connect_timeout_s", "0", "database.connect_timeout_s"),
    ("database.statement_timeout_s", "0", "database.statement_timeout_s"),
    ("database.lock_timeout_s", "-1", "database.lock_timeout_s"),
    ("database.keepalives_idle_s", "0", "database.keepalives_idle_s"),
    ("database.keepalives_interval_s", "inf", "database.keepalives_interval_s"),
    ("database.keepalives_count", "0", "database.keepalives_count"),
    ("database.busy_timeout_s", "0", "database.busy_timeout_s"),
    # a rate of 0 inverts the breaker: it would trip a healthy service, close a dead one
    ("breaker.failure_rate", "0", "breaker.failure_rate"),
    ("breaker.slow_call_rate", "0", "breaker.slow_call_rate"),
    ("breaker.close_ratio", "0", "breaker.close_ratio"),
    # counts beyond what the ledger stores, factors beyond sense
    ("intake.watermark", "99999999999999999999", "intake.watermark"),
    ("intake.max_body_bytes", "2147483648", "intake.max_body_bytes"),
    ("breaker.half_open_probes", "1001", "breaker.half_open_probes"),
    ("intake.park_ceiling", "1e30", "intake.park_ceiling"),
    ("intake.park_ceiling", "2147483648", "intake.park_ceiling"),
    ("intake.max_refusal_records", "-1", "intake.max_refusal_records"),
    # numbers in ASCII digits only
    ("retry.task_attempts", "\u0666", "retry.task_attempts"),
    ("intake.engines", "1_000", "intake.engines"),
    ("breaker.window_s", "\u0666\u0660", "breaker.window_s"),
    ("breaker.window_s", "6_0", "breaker.window_s"),
    ("validation.thresholds", "hydrant=0.\u0665", "validation.thresholds"),
]


@pytest.mark.parametrize("name, raw, field", INVALID)
def test_every_invalid_value_names_field_and_value(name, raw, field):
    """A bad string raises ConfigurationError naming the field and the offending value."""
    with pytest.raises(ConfigurationError) as info:
        Settings.from_mapping({name: raw})
    assert info.value.field == field
    assert f"{field}=" in str(info.value)
    value = info.value.value
    assert value == raw or str(value) in raw or (
        isinstance(value, (int, float)) and float(raw.rpartition("=")[2]) == value) or value == ()


def test_the_invalid_table_covers_every_constrained_setting():
    """Each validated setting has at least one invalid case above, so none goes unchecked."""
    covered = {name for name, _, _ in INVALID}
    assert covered | UNCONSTRAINED == set(Settings().as_flat_dict())


@pytest.mark.parametrize("value", [True, 2.5, "6"])
def test_direct_construction_checks_whole_numbers(value):
    """Building a group in code gets the same checks: no bools or fractions for counts."""
    from fme_ai_resilience.settings import RetrySettings
    with pytest.raises(ConfigurationError) as info:
        RetrySettings(task_attempts=value)
    assert info.value.field == "retry.task_attempts"


@pytest.mark.parametrize("name, value", [
    ("degrade.critical_types", 5), ("retry.jitter", 5), ("validation.thresholds", 5),
    ("validation.conditions", 3.5), ("breaker.cooldown_factor", [2]),
    ("intake.park_ceiling", "10".encode()), ("breaker.failure_rate", True),
    ("download.allowed_hosts", ("ok.example", 5)),
])
def test_typed_value_of_the_wrong_type_is_a_configuration_error(name, value):
    """A typed value a field cannot take raises ConfigurationError naming it, never TypeError."""
    with pytest.raises(ConfigurationError) as info:
        Settings().with_values({name: value})
    assert info.value.field == name


def test_largest_counts_are_accepted():
    """The documented maxima themselves are valid: 2**31-1 for a count or the park ceiling."""
    settings = Settings().with_values({"intake.watermark": str(2 ** 31 - 1),
                                       "intake.park_ceiling": str(2 ** 31 - 1),
                                       "breaker.half_open_probes": "1000",
                                       "breaker.failure_rate": "1", "intake.engines": "+8"})
    assert settings.intake.watermark == 2 ** 31 - 1
    assert settings.intake.park_ceiling == 2 ** 31 - 1 and settings.intake.engines == 8


def test_the_park_ceiling_may_not_lie_below_the_watermark():
    """A park ceiling under the watermark (configured or derived) names both numbers."""
    with pytest.raises(ConfigurationError) as info:
        Settings().with_values({"intake.watermark": "500", "intake.park_ceiling": "400"})
    assert info.value.field == "intake.park_ceiling" and "500" in info.value.reason


def test_the_retired_park_ceiling_factor_says_what_replaced_it():
    """The old factor setting is refused with the name of its replacement, a number of rows."""
    with pytest.raises(ConfigurationError) as info:
        Settings.from_mapping({"FAIR_INTAKE_PARK_CEILING_FACTOR": "10"}, prefix="FAIR_")
    assert "intake.park_ceiling" in info.value.reason and "rows" in info.value.reason


def test_a_derived_watermark_beyond_the_largest_count_is_refused():
    """With watermark 0, engines x latency / processing time past 2**31-1 names intake.watermark."""
    with pytest.raises(ConfigurationError) as info:
        Settings().with_values({"intake.engines": str(2 ** 31 - 1)})
    assert info.value.field == "intake.watermark"
    assert Settings().with_values({"intake.engines": str(2 ** 31 - 1),
                                   "intake.watermark": "48"}).intake.watermark == 48
