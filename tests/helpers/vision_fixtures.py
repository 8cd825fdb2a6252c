"""Realistic Vision AI answers per provider: success, drifted, error, wrong scale.

Field names follow shared/reference/vision-providers.md; values are illustrative.
"""
from __future__ import annotations

import copy
import json

#: Where each provider's request goes for the endpoint https://vision.example.com.
URLS = {
    "azure-v4": "https://vision.example.com/computervision/imageanalysis:analyze",
    "google": "https://vision.example.com/v1/images:annotate",
    "rekognition": "https://vision.example.com/",
    "openai": "https://vision.example.com/chat/completions",
    "generic": "https://vision.example.com",
}

AZURE_OK = {
    "modelVersion": "2023-10-01",
    "captionResult": {"text": "a rusty fire hydrant on a sidewalk", "confidence": 0.83},
    "metadata": {"width": 1024, "height": 768},
    "tagsResult": {"values": [
        {"name": "outdoor", "confidence": 0.99},
        {"name": "fire hydrant", "confidence": 0.97},
        {"name": "rust", "confidence": 0.88},
        {"name": "sidewalk", "confidence": 0.71},
    ]},
    "objectsResult": {"values": [
        {"boundingBox": {"x": 210, "y": 96, "w": 380, "h": 610},
         "tags": [{"name": "fire hydrant", "confidence": 0.91}]},
    ]},
}
# Version 3.2's shape: top-level tags, description.captions (the classic drift)
AZURE_DRIFTED = {
    "modelVersion": "2021-05-01",
    "description": {"captions": [{"text": "a fire hydrant", "confidence": 0.8}]},
    "tags": [{"name": "fire hydrant", "confidence": 0.97}],
}
AZURE_ERROR = {"error": {"code": "InvalidRequest", "message": "Image size is too big.",
                         "innererror": {"code": "InvalidImageSize",
                                        "message": "Image size is too big."}}}
AZURE_PERCENT = copy.deepcopy(AZURE_OK)
AZURE_PERCENT["tagsResult"]["values"][2]["confidence"] = 88.0

GOOGLE_OK = {"responses": [{"labelAnnotations": [
    {"mid": "/m/01pns0", "description": "Fire hydrant", "score": 0.962, "topicality": 0.962},
    {"mid": "/m/0h8n6f9", "description": "Crack", "score": 0.811, "topicality": 0.811},
    {"mid": "/m/06gfj", "description": "Road surface", "score": 0.74, "topicality": 0.74},
]}]}
# `score` renamed/absent, deprecated `confidence` given as 0 instead
GOOGLE_DRIFTED = {"responses": [{"labelAnnotations": [
    {"mid": "/m/01pns0", "description": "Fire hydrant", "confidence": 0, "topicality": 0.96},
]}]}
GOOGLE_ERROR_200 = {"responses": [{"error": {
    "code": 14, "message": "We can not access the URL currently. Please download the content "
                           "and pass it in.", "details": []}}]}
GOOGLE_QUOTA = {"error": {"code": 429, "message": "Quota exceeded for quota metric "
                          "'Requests' of service 'vision.googleapis.com'.",
                          "status": "RESOURCE_EXHAUSTED"}}
GOOGLE_PERCENT = {"responses": [{"labelAnnotations": [
    {"mid": "/m/01pns0", "description": "Fire hydrant", "score": 96.2, "topicality": 0.96},
]}]}

REKOGNITION_OK = {
    "Labels": [
        {"Name": "Fire Hydrant", "Confidence": 99.1, "Instances": [], "Parents": [],
         "Aliases": [], "Categories": [{"Name": "Public Safety"}]},
        {"Name": "Rust", "Confidence": 92.4, "Instances": [], "Parents": [], "Aliases": [],
         "Categories": []},
        {"Name": "Sidewalk", "Confidence": 80.2, "Instances": [], "Parents": [{"Name": "Path"}],
         "Aliases": [], "Categories": []},
    ],
    "LabelModelVersion": "3.0",
}
REKOGNITION_CUSTOM = {"CustomLabels": [{"Name": "valve_ok", "Confidence": 91.0,
                                         "Geometry": {}}]}
REKOGNITION_DRIFTED = {"Labels": [{"Label": "Fire Hydrant", "Confidence": 99.1}],
                       "LabelModelVersion": "3.0"}
REKOGNITION_THROTTLED = {"__type": "ThrottlingException", "message": "Rate exceeded"}
REKOGNITION_UNIT_SCALE = {"Labels": [{"Name": "Fire Hydrant", "Confidence": 0.991},
                                     {"Name": "Rust", "Confidence": 0.924}],
                          "LabelModelVersion": "3.0"}


def openai_answer(content, refusal=None, finish_reason="stop"):
    """A chat completion whose message holds ``content`` (dict -> JSON string)."""
    if isinstance(content, dict):
        content = json.dumps(content)
    return {"id": "chatcmpl-9x", "object": "chat.completion", "model": "gpt-4o-2024-08-06",
            "choices": [{"index": 0, "finish_reason": finish_reason,
                         "message": {"role": "assistant", "content": content,
                                     "refusal": refusal}}],
            "usage": {"prompt_tokens": 812, "completion_tokens": 41, "total_tokens": 853}}


OPENAI_OK = openai_answer({"condition": "damaged", "confidence": 0.86,
                           "labels": [{"name": "rust", "confidence": 0.9}]})
OPENAI_DRIFTED = openai_answer({"asset_condition": "damaged", "confidence": 0.86})
OPENAI_PERCENT = openai_answer({"condition": "good", "confidence": 86})
OPENAI_REFUSAL = openai_answer(None, refusal="I'm sorry, I can't help with that.")
OPENAI_TRUNCATED = openai_answer('{"condition": "dam', finish_reason="length")
OPENAI_NULL = openai_answer(None)
OPENAI_RATE_LIMIT = {"error": {
    "message": "Rate limit reached for gpt-4o in organization org-x on requests per min "
               "(RPM): Limit 500, Used 500, Requested 1. Please try again in 41.724s.",
    "type": "requests", "param": None, "code": "rate_limit_exceeded"}}

GENERIC_OK = {"result": {"asset_condition": "fair", "score": 0.81,
                         "tags": [{"tag": "wear", "p": 0.81}]},
              "model": {"version": "insp-2.4"}}
GENERIC_DRIFTED = {"result": {"condition": "fair", "score": 0.81, "tags": []},
                   "model": {"version": "insp-2.5"}}
GENERIC_PERCENT = {"result": {"asset_condition": "fair", "score": 81,
                              "tags": [{"tag": "wear", "p": 81}]},
                   "model": {"version": "insp-2.4"}}
GENERIC_ERROR = {"error": {"code": 503, "message": "model warming up"}}
