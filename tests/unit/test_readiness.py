"""The start-up check (``core.config.readiness``): what a deployment's settings leave
impossible, named by setting, and the download guard's refusal when nothing is configured."""
from __future__ import annotations

import pytest

from fme_ai_resilience.core.config.readiness import gaps, require_workable
from fme_ai_resilience.core.config.settings import Settings
from fme_ai_resilience.core.errors import ConfigurationError, ErrorClass, UnsafeURL
from fme_ai_resilience.services.resilience.retry import classify_exception
from fme_ai_resilience.services.vision.url_guard import DownloadPolicy, approve_url

SERVICE = "https://services.example.com/abc/arcgis/rest/services/inspection/FeatureServer"


def settings(**values):
    return Settings().with_values(values)


def test_the_defaults_can_neither_download_a_photo_nor_write_a_layer():
    """Default settings: two gaps, the photo hosts first, each naming its setting."""
    assert [g.setting for g in gaps(Settings())] == ["intake.feature_services",
                                                     "writeback.layer_url"]


def test_a_feature_service_answers_both():
    """intake.feature_services gives the photo hosts and the layers to write."""
    assert gaps(settings(**{"intake.feature_services": SERVICE})) == ()


@pytest.mark.parametrize("values, sink, writes", [
    ({"writeback.layer_url": f"{SERVICE}/0"}, None, True),
    ({"writeback.table_url": f"{SERVICE}/1"}, None, True),
    ({"writeback.sink": "collect"}, None, True),
    ({"writeback.sink": "table"}, None, True),
    ({}, "collect", True),
    ({}, None, False)])
def test_photo_hosts_with_somewhere_to_write_are_enough(values, sink, writes):
    """download.allowed_hosts with a layer URL, a table URL, another sink (by setting or the
    sink the processor is handed), or for intake (which does not write): nothing missing."""
    s = settings(**{"download.allowed_hosts": "photos.example.com", **values})
    assert gaps(s, sink=sink, writes=writes) == ()


def test_photo_hosts_without_a_layer_name_the_layer_setting():
    """Hosts but no layer for the feature_layer sink: one gap, writeback.layer_url."""
    (gap,) = gaps(settings(**{"download.allowed_hosts": "photos.example.com"}))
    assert gap.setting == "writeback.layer_url" and "feature_layer" in gap.reason


def test_intake_checks_the_photo_hosts_only():
    """writes=False: with no photo host the one gap is intake.feature_services."""
    assert [g.setting for g in gaps(Settings(), writes=False)] == ["intake.feature_services"]


def test_blank_host_entries_are_no_hosts():
    """An allow-list of blanks (as typed values may give) admits nothing."""
    s = Settings().with_values({"download.allowed_hosts": ("", " ", ".")})
    assert [g.setting for g in gaps(s, writes=False)] == ["intake.feature_services"]


def test_require_workable_names_the_first_gap_and_tells_the_rest():
    """One ConfigurationError naming the first setting; the other gap follows in its
    reason, with the published parameters an FME author sets."""
    with pytest.raises(ConfigurationError) as refused:
        require_workable(Settings())
    assert refused.value.field == "intake.feature_services"
    assert "FAIR_DOWNLOAD_ALLOWED_HOSTS" in refused.value.reason
    assert "also writeback.layer_url" in refused.value.reason
    require_workable(settings(**{"intake.feature_services": SERVICE}))


def test_an_empty_allow_list_refuses_as_the_deployments_fault():
    """A policy with no host refuses any URL (a forged internal one too) before reading it,
    as CONFIGURATION; a URL outside a non-empty allow-list stays UNSAFE_URL."""
    for url in (f"{SERVICE}/0/1/attachments/2", "http://127.0.0.1:6379/"):
        with pytest.raises(UnsafeURL) as refused:
            approve_url(url, DownloadPolicy())
        assert refused.value.error_class is ErrorClass.CONFIGURATION
        assert classify_exception(refused.value) is ErrorClass.CONFIGURATION
    with pytest.raises(UnsafeURL) as outside:
        approve_url("https://elsewhere.example.net/p.jpg",
                    DownloadPolicy(allowed_hosts=("services.example.com",)))
    assert outside.value.error_class is ErrorClass.UNSAFE_URL
    assert classify_exception(outside.value) is ErrorClass.UNSAFE_URL
