"""Settings: defaults, loaders from strings and FAIR_* variables, and validation."""
from __future__ import annotations

import dataclasses

import pytest

from fme_ai_resilience.core.errors import ConfigurationError
from fme_ai_resilience.core.config.settings import SECRET_SETTINGS, Settings


def test_defaults_are_the_seeds_thresholds():
    """Every threshold the seed names has its default value."""
    s = Settings()
    assert (s.timeouts.connect_s, s.timeouts.tls_s, s.timeouts.ttfb_s, s.timeouts.body_s) == (
        3, 3, 20, 4)
    assert (s.retry.backoff_base_s, s.retry.backoff_cap_s, s.retry.task_attempts) == (1, 60, 5)
    assert (s.breaker.failure_rate, s.breaker.min_calls, s.breaker.cooldown_s,
            s.breaker.half_open_probes, s.breaker.close_ratio) == (0.5, 20, 5, 1, 0.8)
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
    t = s.with_values({"breaker.cooldown_s": "20"})
    assert s.breaker.cooldown_s == 5 and t.breaker.cooldown_s == 20
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.retry = t.retry  # type: ignore[misc]


def test_flat_dict_names_every_setting():
    """as_flat_dict lists group.field names that from_mapping reads back unchanged."""
    flat = Settings().as_flat_dict()
    assert flat["retry.task_attempts"] == 5 and flat["validation.thresholds"] == {}
    assert Settings.from_mapping({k: v for k, v in flat.items()
                                  if not isinstance(v, dict)}) == Settings()


# host entries are checked where the download policy is built (DownloadPolicy.from_settings)
UNCONSTRAINED = {"download.allowed_hosts", "download.allow_http_hosts",
                 "download.allow_private_hosts", "degrade.critical_types",
                 # names checked against degrade.critical_types (test below)
                 "degrade.non_critical_types",
                 # free text: a model name, a prompt, a credential, a currency, a boolean
                 "vision.key", "vision.model", "vision.fallback_model", "vision.prompt",
                 "arcgis.token", "arcgis.web_connection", "compensation.reconcile_backfill",
                 "cost.currency"}

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
    ("breaker.consecutive_failures", "1", "breaker.consecutive_failures"),
    ("concurrency.ceiling", "0", "concurrency.ceiling"),
    ("concurrency.ceiling", "10001", "concurrency.ceiling"),
    ("concurrency.per_engine", "0", "concurrency.per_engine"),
    ("concurrency.start", "0", "concurrency.start"),
    ("concurrency.start", "33", "concurrency.start"),
    ("breaker.cooldown_s", "0", "breaker.cooldown_s"),
    ("breaker.cooldown_max_s", "4", "breaker.cooldown_max_s"),
    ("breaker.cooldown_factor", "0.5", "breaker.cooldown_factor"),
    ("breaker.half_open_probes", "0", "breaker.half_open_probes"),
    ("breaker.drift_calls", "1", "breaker.drift_calls"),
    ("breaker.close_ratio", "1.1", "breaker.close_ratio"),
    ("breaker.probe_timeout_s", "0", "breaker.probe_timeout_s"),
    ("breaker.cache_ttl_s", "2", "breaker.cache_ttl_s"),
    ("breaker.line_s", "-1", "breaker.line_s"),
    ("breaker.behind_s", "1", "breaker.behind_s"),        # not behind the 1 s line
    ("degrade.sample_backlog", "0", "degrade.sample_backlog"),
    ("degrade.critical_backlog", "0.5", "degrade.critical_backlog"),
    ("degrade.pause_backlog", "-1", "degrade.pause_backlog"),
    ("degrade.fallback_error_rate", "1.5", "degrade.fallback_error_rate"),
    ("degrade.exit_ratio", "-0.1", "degrade.exit_ratio"),
    ("degrade.hold_s", "0", "degrade.hold_s"),
    ("degrade.sample_ratio", "2", "degrade.sample_ratio"),
    ("degrade.when_degraded", "drop", "degrade.when_degraded"),
    ("alerts.dead_letter_ratio", "1.5", "alerts.dead_letter_ratio"),
    ("alerts.review_age_s", "0", "alerts.review_age_s"),
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
    ("timeouts.ttfb_s", "1e308", "timeouts.ttfb_s"),
    ("processing.lease_s", "1e12", "processing.lease_s"),
    ("download.host_headers", '{"photos.example.com": {"Bad Header": "x"}}',
     "download.host_headers"),
    ("download.host_headers", "[1]", "download.host_headers"),
    ("intake.feature_services", "ftp://gis.example.com/x/FeatureServer",
     "intake.feature_services"),
    ("intake.feature_services", "https://gis.example.com/x/FeatureServer?token=abc",
     "intake.feature_services"),
    ("alerts.anomaly_rate", "2", "alerts.anomaly_rate"),
    ("alerts.e2e_p95_warning_ratio", "-1", "alerts.e2e_p95_warning_ratio"),
    ("alerts.backlog_ratio", "1.5", "alerts.backlog_ratio"),
    ("alerts.window_s", "0", "alerts.window_s"),
    ("processing.job_runtime_limit_s", "-5", "processing.job_runtime_limit_s"),
    ("vision.provider", "bing", "vision.provider"),
    ("vision.endpoint", "ftp://vision", "vision.endpoint"),
    ("vision.fallback_endpoint", "vision.local", "vision.fallback_endpoint"),
    ("vision.service", "vision ai", "vision.service"),
    ("vision.max_response_bytes", "0", "vision.max_response_bytes"),
    ("arcgis.portal_url", "portal", "arcgis.portal_url"),
    ("arcgis.client_id", "app-1", "arcgis.client_secret"),
    ("arcgis.client_secret", "s3cret", "arcgis.client_id"),
    ("arcgis.username", "field_user", "arcgis.password"),
    ("arcgis.password", "pw", "arcgis.username"),
    ("arcgis.token_refresh_margin_s", "-1", "arcgis.token_refresh_margin_s"),
    ("arcgis.request_timeout_s", "0", "arcgis.request_timeout_s"),
    ("arcgis.changes_wait_s", "0", "arcgis.changes_wait_s"),
    ("arcgis.changes_poll_s", "nan", "arcgis.changes_poll_s"),
    ("writeback.sink", "email", "writeback.sink"),
    ("writeback.layer_url", "layer/0", "writeback.layer_url"),
    ("writeback.table_url", "table/1", "writeback.table_url"),
    ("writeback.parent_field", "ai condition", "writeback.parent_field"),
    ("writeback.photo_field", "ai condition", "writeback.photo_field"),
    ("writeback.condition_field", "ai condition", "writeback.condition_field"),
    ("writeback.confidence_field", "ai condition", "writeback.confidence_field"),
    ("writeback.outcome_field", "ai condition", "writeback.outcome_field"),
    ("writeback.model_field", "ai condition", "writeback.model_field"),
    ("writeback.trace_field", "ai condition", "writeback.trace_field"),
    ("writeback.assessed_at_field", "ai condition", "writeback.assessed_at_field"),
    ("compensation.requeue_budget", "-1", "compensation.requeue_budget"),
    ("compensation.requeue_backoff_s", "0", "compensation.requeue_backoff_s"),
    ("compensation.requeue_backoff_cap_s", "10", "compensation.requeue_backoff_cap_s"),
    ("compensation.batch", "0", "compensation.batch"),
    ("compensation.retention_days", "0", "compensation.retention_days"),
    ("compensation.reconcile_window_s", "0", "compensation.reconcile_window_s"),
    ("compensation.date_field", "ai condition", "compensation.date_field"),
    ("compensation.crew_field", "ai condition", "compensation.crew_field"),
    ("cost.per_call", "-0.01", "cost.per_call"),
    ("database.connect_timeout_s", "0", "database.connect_timeout_s"),
    ("database.statement_timeout_s", "0", "database.statement_timeout_s"),
    ("database.lock_timeout_s", "-1", "database.lock_timeout_s"),
    ("database.keepalives_idle_s", "0", "database.keepalives_idle_s"),
    ("database.keepalives_interval_s", "inf", "database.keepalives_interval_s"),
    ("database.keepalives_count", "0", "database.keepalives_count"),
    ("database.busy_timeout_s", "0", "database.busy_timeout_s"),
    # a rate of 0 inverts the breaker: it would trip a healthy service, close a dead one
    ("breaker.failure_rate", "0", "breaker.failure_rate"),
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
    """A bad string raises ConfigurationError naming the field and the offending value (a
    secret's value shown as [REDACTED])."""
    with pytest.raises(ConfigurationError) as info:
        Settings.from_mapping({name: raw})
    assert info.value.field == field
    assert f"{field}=" in str(info.value)
    value = info.value.value
    if name in SECRET_SETTINGS:
        assert value in ("[REDACTED]", "") and raw not in str(info.value)
        return
    assert value == raw or str(value) in raw or (
        isinstance(value, (int, float)) and float(raw.rpartition("=")[2]) == value) or value == ()


def test_the_invalid_table_covers_every_constrained_setting():
    """Each validated setting has at least one invalid case above, so none goes unchecked."""
    covered = {name for name, _, _ in INVALID}
    assert covered | UNCONSTRAINED == set(Settings().as_flat_dict())


@pytest.mark.parametrize("value", [True, 2.5, "6"])
def test_direct_construction_checks_whole_numbers(value):
    """Building a group in code gets the same checks: no bools or fractions for counts."""
    from fme_ai_resilience.core.config.settings import RetrySettings
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


def test_the_retired_slow_call_rate_says_slow_is_not_down():
    """The slow-call trip is gone: setting it is refused with what slow calls do now, and a
    blank published parameter an older workspace still carries is ignored."""
    with pytest.raises(ConfigurationError) as info:
        Settings.from_mapping({"FAIR_BREAKER_SLOW_CALL_RATE": "0.8"}, prefix="FAIR_")
    assert "concurrency" in info.value.reason and "consecutive_failures" in info.value.reason
    assert Settings.from_mapping({"FAIR_BREAKER_SLOW_CALL_RATE": ""},
                                 prefix="FAIR_") == Settings()


def test_a_derived_watermark_beyond_the_largest_count_is_refused():
    """With watermark 0, engines x latency / processing time past 2**31-1 names intake.watermark."""
    with pytest.raises(ConfigurationError) as info:
        Settings().with_values({"intake.engines": str(2 ** 31 - 1)})
    assert info.value.field == "intake.watermark"
    assert Settings().with_values({"intake.engines": str(2 ** 31 - 1),
                                   "intake.watermark": "48"}).intake.watermark == 48


SECRETS = {"vision.key": "sk-live-0123456789abcdef", "arcgis.token": "tok-abcdef-123456",
           "arcgis.client_secret": "cs-ABCDEF-987654", "arcgis.password": "pw-Secret-42"}


def test_secret_settings_never_show_in_repr_display_or_errors():
    """API keys, tokens and passwords stay out of repr, as_flat_dict and error messages."""
    s = Settings.from_mapping({**SECRETS, "arcgis.client_id": "app", "arcgis.username": "u"})
    shown = repr(s) + repr(s.vision) + repr(s.arcgis) + str(s.as_flat_dict())
    assert not [v for v in SECRETS.values() if v in shown]
    assert s.as_flat_dict()["vision.key"] == "[REDACTED]"
    assert s.as_flat_dict(reveal_secrets=True)["vision.key"] == SECRETS["vision.key"]
    with pytest.raises(ConfigurationError) as info:
        Settings.from_mapping({"vision.key": 12345678901234567})
    assert "12345678901234567" not in str(info.value)


@pytest.mark.parametrize("load", [
    lambda: Settings().with_values({"retry.task_attempt": ""}),
    lambda: Settings().with_values({"retry.task_attempt": None}),
    lambda: Settings().with_values({"nonsense": "  "}),
    lambda: Settings.from_env({"FAIR_RETRY_TASK_ATTEMPT": ""}),
    lambda: Settings.from_mapping({"FAIR_BREAKER_FAILURE_RAT": " "}, prefix="FAIR_"),
], ids=["dotted", "none", "no-group", "env", "macro"])
def test_an_unknown_name_fails_even_with_an_empty_value(load):
    """Blank means "not set" only for a real setting: a typo with a blank value still raises."""
    with pytest.raises(ConfigurationError, match="is not a known setting"):
        load()


def test_other_tools_fair_variables_are_skipped_even_when_empty():
    """FAIR_DB_URL and FAIR_TEST_PG_URL belong to other tools: empty or not, they are skipped."""
    assert Settings.from_env({"FAIR_DB_URL": "", "FAIR_TEST_PG_URL": "",
                              "FAIR_RETRY_JITTER": ""}) == Settings()


@pytest.mark.parametrize("name, suggested", [
    ("FAIR_RETRY_TASK_ATTEMPT", "FAIR_RETRY_TASK_ATTEMPTS"),
    ("retry.task_attempt", "retry.task_attempts"),
    ("BREAKER_FAILURE_RAT", "BREAKER_FAILURE_RATE"),
])
def test_an_unknown_field_names_the_setting_it_resembles(name, suggested):
    """A typo in a known group names the real setting, written the way the typo was."""
    prefix = "FAIR_" if name.startswith("FAIR_") else ""
    with pytest.raises(ConfigurationError) as info:
        Settings.from_mapping({name: "5"}, prefix=prefix)
    assert info.value.field == name
    assert str(info.value) == f"{name}='5': is not a known setting (did you mean {suggested}?)"


NUMBERS = [name for name, value in Settings().as_flat_dict().items()
           if isinstance(value, (int, float)) and not isinstance(value, bool)]


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", float("inf"), float("nan")],
                         ids=["inf", "-inf", "nan", "float-inf", "float-nan"])
@pytest.mark.parametrize("name", NUMBERS)
def test_every_number_refuses_a_non_finite_value_saying_so(name, value):
    """inf and nan, as text or as floats, are refused by every number with "must be finite"."""
    with pytest.raises(ConfigurationError) as info:
        Settings().with_values({name: value})
    assert (info.value.field, info.value.reason) == (name, "must be finite")


def test_a_non_finite_per_asset_threshold_says_must_be_finite():
    """A per-asset-type threshold of inf is refused with "must be finite" too."""
    with pytest.raises(ConfigurationError) as info:
        Settings().with_values({"validation.thresholds": "hydrant=inf"})
    assert info.value.reason == "must be finite"


@pytest.mark.parametrize("name", ["FAIR_VISION_KYE", "FAIR_ARCGIS_TOKN", "FAIR_VISION_APIKEY"])
def test_a_misspelt_secret_setting_keeps_its_value_out_of_the_error(name):
    """A typo in a group holding a secret is refused without echoing the value it was given."""
    with pytest.raises(ConfigurationError) as info:
        Settings.from_env({name: "sk-live-0123456789abcdef"})
    assert "sk-live-0123456789abcdef" not in str(info.value) + repr(info.value.value)
    assert "is not a known setting" in str(info.value)


def test_feature_services_are_read_from_text_and_compared_loosely():
    """A comma-separated list of FeatureServer URLs; case, default port and slash don't count."""
    s = Settings.from_mapping({"FAIR_INTAKE_FEATURE_SERVICES":
                               "https://GIS.example.com/arcgis/rest/services/A/FeatureServer/, "
                               "https://gis.example.com:6443/arcgis/rest/services/B/FeatureServer"},
                              prefix="FAIR_")
    assert s.intake.feature_services == (
        "https://gis.example.com/arcgis/rest/services/A/FeatureServer",
        "https://gis.example.com:6443/arcgis/rest/services/B/FeatureServer")
    assert s.intake.serves("https://gis.example.com:443/ArcGIS/rest/services/a/featureserver")
    assert s.intake.serves("https://gis.example.com:6443/arcgis/rest/services/B/FeatureServer/")
    assert not s.intake.serves("https://gis.example.com/arcgis/rest/services/B/FeatureServer")
    assert not s.intake.serves("https://evil.example.com/arcgis/rest/services/A/FeatureServer")
    assert not s.intake.serves(None) and not Settings().intake.serves(
        "https://gis.example.com/arcgis/rest/services/A/FeatureServer")


def test_an_asset_type_cannot_be_critical_and_non_critical():
    """A type named in both degrade lists is refused, naming the skip list."""
    with pytest.raises(ConfigurationError) as info:
        Settings.from_mapping({"degrade.critical_types": "hydrant,valve",
                               "degrade.non_critical_types": "bench,valve"})
    assert info.value.field == "degrade.non_critical_types" and "valve" in str(info.value)


def test_nothing_is_skipped_unless_the_deployment_says_so():
    """The default holds analysis back by deferral: no type is named non-critical."""
    degrade = Settings().degrade
    assert degrade.when_degraded.value == "defer" and degrade.non_critical_types == ()
