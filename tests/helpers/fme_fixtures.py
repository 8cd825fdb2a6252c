"""What the PythonCaller tests share: a Survey123 body whose photo ``responses`` serves, the
published parameters of each workspace, and the secrets that must never show."""
from __future__ import annotations

import json
from typing import Any, Dict, Iterable, List

from helpers import DATA


FEATURE = "5c1e0a2b-9d3f-4e61-8a7b-0f2c3d4e5a6b"
ATTACHMENT = "a0b1c2d3-e4f5-4a6b-8c7d-9e0f1a2b3c4d"
KEY = f"{FEATURE}/{ATTACHMENT}"
PORTAL_TOKEN = "PORTAL-TOKEN-7f3a9c1e5b2d4a6f8e0c"
VISION_KEY = "sk-vision-secret-0123456789abcdef"
ARCGIS_TOKEN = "arcgis-static-token-5e6f7a8b9c"
# A public address that ``responses`` answers for: no request ever leaves the process (an
# address, not a name, so the download guard needs no DNS).
PHOTO_HOST = "93.184.216.34"
PHOTO = f"https://{PHOTO_HOST}/abc/arcgis/rest/services/inspection/FeatureServer/0/204/attachments/77"
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 64
SERVICE = "https://services.example.com/abc/arcgis/rest/services/inspection/FeatureServer"
#: Every secret a test hands the callers.
SECRETS = (PORTAL_TOKEN, VISION_KEY, ARCGIS_TOKEN, "ledger-pw-31")


def body(photo: str = PHOTO, feature: str = "{5C1E0A2B-9D3F-4E61-8A7B-0F2C3D4E5A6B}",
         attachment: str = "{A0B1C2D3-E4F5-4A6B-8C7D-9E0F1A2B3C4D}") -> str:
    """The Survey123 addData body of one hydrant photo, as the Automation's ``message``."""
    data = json.loads((DATA / "survey123_add.json").read_text(encoding="utf-8"))
    record = data["feature"]
    record["attributes"]["globalid"] = record["result"]["globalId"] = feature
    (photo_info,) = record["attachments"]["photo"]
    photo_info.update(url=photo, globalId=attachment, parentGlobalId=feature)
    return json.dumps(data)


def intake_macros(db: str, **extra: str) -> Dict[str, str]:
    """WS-01's parameters: the ledger and the feature service the test bodies name (without
    a photo host the intake caller registers nothing)."""
    return {"FAIR_DB": db, "FAIR_INTAKE_FEATURE_SERVICES": SERVICE, **extra}


def processor_macros(db: str, vision: str, **extra: str) -> Dict[str, str]:
    """WS-02's parameters: the fake Vision service, photos from the responses host, the
    conclusions collected for FME's writers, and secrets that must never show."""
    return {"FAIR_DB": db, "FAIR_VISION_ENDPOINT": vision, "FAIR_VISION_KEY": VISION_KEY,
            "FAIR_ARCGIS_TOKEN": ARCGIS_TOKEN, "FAIR_DOWNLOAD_ALLOWED_HOSTS": PHOTO_HOST,
            "FAIR_WRITEBACK_SINK": "collect", "FAIR_RETRY_BACKOFF_BASE_S": "0.1",
            "FAIR_RETRY_BACKOFF_CAP_S": "1", **extra}


def texts(features: Iterable[Any]) -> List[str]:
    """Every attribute name and value of the features, and their reprs, as text."""
    out = []
    for feature in features:
        out.append(repr(feature))
        for name in feature.getAllAttributeNames():
            out += [name, str(feature.getAttribute(name))]
    return out


def assert_no_secret(*chunks: Iterable[str]) -> None:
    for chunk in chunks:
        for text in chunk:
            for secret in SECRETS:
                assert secret not in text, (secret, text)
