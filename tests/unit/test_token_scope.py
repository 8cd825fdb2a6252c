"""The ArcGIS token goes only to the configured feature services and write-back layers; a
photo host gets only its own credential (download.host_headers), and no secret reaches an
error message."""
from __future__ import annotations

import json

import pytest
import requests
import responses

from fme_ai_resilience.core.errors import DownloadError, UnsafeURL
from fme_ai_resilience.services.vision.download import DownloadPolicy, fetch_photo
from fme_ai_resilience.core.config.settings import Settings

SERVICE = "https://services.example.com/abc/arcgis/rest/services/inspection/FeatureServer"
LAYER_PHOTO = f"{SERVICE}/0/11/attachments/42"
EVIL = "https://evil.photos.test/p.jpg"
TOKEN = "Zq8-portal-token-7781xx"
PHOTO_KEY = "photo-host-key-5512"
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 64


def policy(**settings):
    values = {"intake.feature_services": SERVICE, "download.allowed_hosts": ".photos.test"}
    values.update(settings)
    return DownloadPolicy.from_settings(Settings.from_mapping(values),
                                        resolver=lambda host, port: ["93.184.216.34"])


def fetched_headers(url, pol, token=TOKEN):
    with responses.RequestsMock() as mock:
        mock.get(url, body=JPEG, content_type="image/jpeg")
        fetch_photo(url, token, pol, session=requests.Session())
        return mock.calls[0].request.headers


def test_the_token_never_reaches_a_host_that_is_only_an_allowed_photo_host():
    """A photo at a host admitted by a download.allowed_hosts suffix gets no ArcGIS token."""
    assert "X-Esri-Authorization" not in fetched_headers(EVIL, policy())


def test_the_token_goes_to_the_feature_services_host():
    """A photo of the configured feature service is fetched with the token in its header."""
    headers = fetched_headers(LAYER_PHOTO, policy())
    assert headers["X-Esri-Authorization"] == f"Bearer {TOKEN}"


def test_the_token_goes_to_the_writeback_layers_host():
    """The write-back layer's host is a token host too."""
    url = "https://gis.example.org/arcgis/rest/services/W/FeatureServer/0/1/attachments/2"
    pol = policy(**{"writeback.layer_url": "https://gis.example.org/arcgis/rest/services/W/"
                                          "FeatureServer/0",
                    "download.allowed_hosts": "gis.example.org"})
    assert fetched_headers(url, pol)["X-Esri-Authorization"] == f"Bearer {TOKEN}"


def test_a_photo_host_gets_its_own_credential_and_not_the_token():
    """download.host_headers sends a photo host its own header, and the token stays home."""
    pol = policy(**{"download.host_headers": json.dumps(
        {"evil.photos.test": {"Authorization": f"Key {PHOTO_KEY}"}})})
    headers = fetched_headers(EVIL, pol)
    assert headers["Authorization"] == f"Key {PHOTO_KEY}"
    assert "X-Esri-Authorization" not in headers
    assert "Authorization" not in fetched_headers("https://other.photos.test/p.jpg", pol)


def test_a_photo_hosts_credential_is_not_sent_over_plain_http():
    """A host's credential goes only over https."""
    pol = policy(**{"download.host_headers": json.dumps(
        {"evil.photos.test": {"Authorization": f"Key {PHOTO_KEY}"}}),
        "download.allow_http_hosts": "evil.photos.test"})
    assert "Authorization" not in fetched_headers("http://evil.photos.test/p.jpg", pol)


def test_a_photo_hosts_credential_never_reaches_an_error_or_the_policys_repr():
    """The credential is redacted from the error of a failed download and absent from repr."""
    pol = policy(**{"download.host_headers": json.dumps(
        {"evil.photos.test": {"X-Key": PHOTO_KEY}})})
    assert PHOTO_KEY not in repr(pol)
    with responses.RequestsMock() as mock:
        mock.get(EVIL, json={"error": {"code": 403, "message": f"bad key {PHOTO_KEY}"}})
        with pytest.raises(DownloadError) as info:
            fetch_photo(EVIL, None, pol, session=requests.Session())
    assert PHOTO_KEY not in str(info.value)


def test_the_allow_list_refusal_names_the_settings_that_admit_a_host():
    """A host off the allow-list is refused naming intake.feature_services and
    download.allowed_hosts."""
    with pytest.raises(UnsafeURL) as info:
        fetch_photo("https://elsewhere.example.net/p.jpg", TOKEN, policy())
    assert "intake.feature_services" in str(info.value)
    assert "download.allowed_hosts" in str(info.value)
