"""Provider adapters: each Vision AI answer mapped onto one :class:`Assessment`.

Supported providers (shapes in docs/vision.md):

``azure-v4``     Azure AI Vision Image Analysis 4.0 (tags and object tags, 0-1)
``google``       Google Cloud Vision ``images:annotate`` label detection (``score``, 0-1)
``rekognition``  AWS Rekognition ``DetectLabels`` / ``DetectCustomLabels`` (0-100 -> 0-1)
``openai``       OpenAI-compatible chat completions with structured output: the assessment is
                 JSON inside ``choices[0].message.content``
``generic``      any JSON service, through a :class:`GenericMapping` of dotted field paths

Label-based providers get their condition from :class:`ConditionRules` (label "rust" or
"crack" -> ``damaged``). An answer reporting an error (an error inside an HTTP 200 body) raises
:class:`~fme_ai_resilience.core.errors.FormatError` with that error's class. Every other payload is
checked against its provider's JSON Schema first: drift (a field missing or renamed, labels
where the adapter does not look for them, confidence out of range or constant, a 0-1 answer
where 0-100 was expected) raises FormatError (BAD_FORMAT) carrying the schema errors, never an
empty conclusion; so does a hostile payload (nested deeper than :data:`MAX_DEPTH`, numbers no
float holds). Pure functions: no I/O.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..checks import finite_number
from ..errors import ConfigurationError, FormatError, InvalidPayload
from ..text.untrusted_json import decode_value, deeper_than
from .validate import schema_errors
from .answer_errors import detect_error, shown, text_of

__all__ = ["PROVIDERS", "Assessment", "DEFAULT_RULES", "ConditionRules", "GenericMapping",
           "PAYLOAD_SCHEMAS", "openai_result_schema", "OPENAI_RESULT_SCHEMA",
           "OPENAI_RESULT_SCHEMA_LOOSE", "normalize", "detect_error", "MAX_DEPTH"]

PROVIDERS = ("azure-v4", "google", "rekognition", "openai", "generic")
#: The deepest nesting an answer may have (real answers nest fewer than ten levels).
MAX_DEPTH = 64


@dataclass(frozen=True)
class Assessment:
    """One photo's conclusion: ``condition``, ``confidence`` in [0, 1] and the evidence.

    ``labels`` holds ``(name, confidence)`` pairs, highest confidence first.
    """

    condition: str
    confidence: float
    labels: tuple = ()
    model_version: Optional[str] = None
    provider: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.condition, str) or not self.condition:
            raise ConfigurationError("condition", self.condition, "must be a non-empty string")
        if not _unit(self.confidence):
            raise ConfigurationError("confidence", self.confidence,
                                     "must be a finite number in [0, 1]")
        pairs = tuple((str(n), float(c)) for n, c in self.labels)
        object.__setattr__(self, "labels", pairs)
        object.__setattr__(self, "confidence", float(self.confidence))

    def to_dict(self) -> Dict[str, Any]:
        """The JSON-ready form (``validate.ASSESSMENT_SCHEMA``), as stored in the ledger."""
        return {"condition": self.condition, "confidence": self.confidence,
                "labels": [list(p) for p in self.labels], "model_version": self.model_version,
                "provider": self.provider}


DEFAULT_RULES: Tuple[Tuple[str, Tuple[str, ...]], ...] = (
    ("damaged", ("rust", "crack", "corrosion", "leak", "broken", "fracture", "damage",
                 "dent", "graffiti", "vandalism")),
    ("fair", ("wear", "worn", "peeling", "faded", "weathered", "dirt", "stain")),
)


@dataclass(frozen=True)
class ConditionRules:
    """How labels become a condition: the first rule with a matching label wins.

    A label matches a rule when one of its keywords starts a word of the label name
    (case-insensitive: "rust" matches "Rust" and "Rusty pipe", not "Trust" or "Crust"; a
    word saying the keyword is absent, "stainless", does not match either) and the
    label's confidence is at least ``min_label_confidence``; the assessment's
    confidence is then the best matching label's. With no match the condition is ``default``
    and its confidence the top label's; with no labels at all it is 0 (nothing seen, nothing
    trusted). Rules run from the most alarming to the least, and a weak match (below
    ``min_label_confidence``) of a more alarming rule caps every less alarming conclusion,
    ``fair`` as much as ``good``, at the doubt it leaves (1 - its confidence): weak rust
    beside strong weathering is not a confident ``fair`` but one a person should look at.
    """

    rules: Tuple[Tuple[str, Tuple[str, ...]], ...] = DEFAULT_RULES
    default: str = "good"
    min_label_confidence: float = 0.5

    def __post_init__(self) -> None:
        if not _unit(self.min_label_confidence):
            raise ConfigurationError("vision.min_label_confidence", self.min_label_confidence,
                                     "must be between 0 and 1")
        rules = tuple((str(c), tuple(k.lower() for k in kws)) for c, kws in self.rules)
        for condition, keywords in rules:
            if not condition or not keywords:
                raise ConfigurationError("vision.rules", condition, "needs a condition and "
                                         "at least one keyword")
        object.__setattr__(self, "rules", rules)

    @classmethod
    def from_string(cls, text: str, default: str = "good") -> "ConditionRules":
        """Rules from ``"damaged=rust|crack;fair=wear"`` (an FME published parameter)."""
        rules = []
        for part in filter(None, (p.strip() for p in text.split(";"))):
            condition, sep, words = part.partition("=")
            keywords = tuple(w.strip() for w in words.split("|") if w.strip())
            if not sep or not condition.strip() or not keywords:
                raise ConfigurationError("vision.rules", part, "expected condition=kw1|kw2")
            rules.append((condition.strip(), keywords))
        return cls(rules=tuple(rules), default=default)

    def derive(self, labels: Sequence[Tuple[str, float]]) -> Tuple[str, float]:
        """The ``(condition, confidence)`` the labels support."""
        alarm = 0.0   # the strongest weak match of a more alarming rule so far
        for condition, keywords in self.rules:
            matches = [c for n, c in labels if _mentions(n, keywords)]
            strong = [c for c in matches if c >= self.min_label_confidence]
            if strong:
                return condition, min(max(strong), 1.0 - alarm)
            if matches:
                alarm = max(alarm, max(matches))
        top = max((c for _, c in labels), default=0.0)
        return self.default, min(top, 1.0 - alarm)


def _mentions(name: str, keywords: Sequence[str]) -> bool:
    """Whether a keyword starts a word of ``name`` (so "dent" is not found in "Residential").

    "<keyword>less" ("Stainless steel") states the keyword's absence and does not match.
    """
    return any(re.search(r"\b" + re.escape(k) + r"(?!less)", name, re.IGNORECASE)
               for k in keywords)


@dataclass(frozen=True)
class GenericMapping:
    """Where a generic JSON service puts each field: dotted paths (``result.items.0.score``).

    ``labels`` points at a list of objects with ``label_name``/``label_confidence`` keys.
    ``confidence_scale`` is 1 (0-1 answers) or 100 (percentages). ``schema`` replaces the
    JSON Schema derived from the paths (every mapped path required).
    """

    condition: str = "condition"
    confidence: str = "confidence"
    labels: Optional[str] = "labels"
    label_name: str = "name"
    label_confidence: str = "confidence"
    model_version: Optional[str] = "model_version"
    confidence_scale: float = 1.0
    schema: Optional[Mapping[str, Any]] = None

    def __post_init__(self) -> None:
        if self.confidence_scale not in (1, 1.0, 100, 100.0):
            raise ConfigurationError("vision.confidence_scale", self.confidence_scale,
                                     "must be 1 or 100")

    def payload_schema(self) -> Mapping[str, Any]:
        """The JSON Schema a payload must satisfy: the configured one or one built from paths."""
        if self.schema is not None:
            return self.schema
        root: Dict[str, Any] = {"type": "object"}
        _require(root, self.condition, leaf={"type": "string"})
        _require(root, self.confidence, leaf={"type": "number"})
        if self.labels:   # optional: a service may state a condition without evidence
            _require(root, self.labels, optional=True, leaf={"type": "array", "items": {
                "type": "object", "required": [self.label_name, self.label_confidence],
                "properties": {self.label_name: {"type": "string"},
                               self.label_confidence: {"type": "number"}}}})
        return root


def _require(node: Dict[str, Any], path: str, leaf: Mapping[str, Any],
             optional: bool = False) -> None:
    parts = path.split(".")
    for i, part in enumerate(parts):
        node.setdefault("required", [])
        if part not in node["required"] and not (optional and i == len(parts) - 1):
            node["required"].append(part)
        props = node.setdefault("properties", {})
        child = props.setdefault(part, {"type": "object"} if i < len(parts) - 1 else dict(leaf))
        node = child


def _get(payload: Any, path: str) -> Any:
    node = payload
    for part in path.split("."):
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, Mapping) and part in node:
            node = node[part]
        else:
            return None
    return node


def _unit(value: Any) -> bool:
    return finite_number(value) and 0.0 <= value <= 1.0


#: Names of fields that hold a confidence by another name (a renamed field, say).
_CONFIDENCE_LIKE = re.compile(r"conf|score|prob|certain", re.IGNORECASE)


def _renamed(obj: Any, field: str) -> Optional[str]:
    """The field of ``obj`` that looks like a confidence and holds one while ``field`` reads
    0: the confidence moved under a new name and the old field stayed behind as 0."""
    if not isinstance(obj, Mapping) or not (finite_number(obj.get(field)) and obj[field] == 0):
        return None
    return next((str(k) for k, v in obj.items() if k != field and isinstance(k, str)
                 and _CONFIDENCE_LIKE.search(k) and finite_number(v) and v != 0), None)


def _pairs(provider: str, items: Sequence[Any], name: str, confidence: str,
           where: str) -> List[Tuple[str, Any]]:
    """``(name, confidence)`` of each label object, refusing one whose confidence was renamed."""
    pairs = []
    for i, item in enumerate(items):
        moved = _renamed(item, confidence)
        if moved:
            raise FormatError(f"{provider} label confidence reads 0 beside {moved!r}: renamed?",
                              errors=[f"{where}/{i}: {confidence} 0, {moved} "
                                      f"{shown(item[moved])}"], provider=provider)
        pairs.append((item[name], item[confidence]))
    return pairs


def _no_labels_but(provider: str, obj: Mapping[str, Any], known: Sequence[str],
                   where: str = "(root)") -> None:
    """An answer with no labels must not carry fields the adapter does not know: there the
    labels may have moved (drift), and reading it as "nothing seen" would hide that."""
    unknown = sorted(str(k) for k in obj if k not in known)
    if unknown:
        raise FormatError(f"{provider} answer has no labels where expected but fields this "
                          f"adapter does not read: {unknown}",
                          errors=[f"{where}: no labels, found {unknown}"], provider=provider)


_NAMED = {"type": "object", "required": ["name", "confidence"],
          "properties": {"name": {"type": "string"}, "confidence": {"type": "number"}}}

#: The payload shape each label-based provider must have (drift = a violation).
PAYLOAD_SCHEMAS: Mapping[str, Mapping[str, Any]] = {
    "azure-v4": {
        "type": "object", "required": ["modelVersion", "tagsResult"],
        "properties": {
            "modelVersion": {"type": "string"},
            "tagsResult": {"type": "object", "required": ["values"],
                           "properties": {"values": {"type": "array", "items": _NAMED}}},
            "objectsResult": {"type": "object", "required": ["values"], "properties": {
                "values": {"type": "array", "items": {
                    "type": "object", "required": ["tags"],
                    "properties": {"tags": {"type": "array", "items": _NAMED}}}}}},
        },
    },
    "google": {
        "type": "object", "required": ["responses"],
        "properties": {"responses": {"type": "array", "minItems": 1, "items": {
            "type": "object", "properties": {"labelAnnotations": {"type": "array", "items": {
                "type": "object", "required": ["description", "score"],
                "properties": {"description": {"type": "string"},
                               "score": {"type": "number"}}}}}}}},
    },
    "rekognition": {
        "type": "object",
        "anyOf": [{"required": ["Labels"]}, {"required": ["CustomLabels"]}],
        "properties": {k: {"type": "array", "items": {
            "type": "object", "required": ["Name", "Confidence"],
            "properties": {"Name": {"type": "string"}, "Confidence": {"type": "number"}}}}
            for k in ("Labels", "CustomLabels")},
    },
    "openai": {
        "type": "object", "required": ["choices"],
        "properties": {"choices": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["message"],
            "properties": {"message": {"type": "object"}}}}},
    },
}

def openai_result_schema(conditions: Sequence[str] = ()) -> Mapping[str, Any]:
    """What the OpenAI-compatible model is asked to return (``response_format``, strict mode).

    Strict structured output needs ``additionalProperties: false`` on every object and every
    property listed in ``required``; ``labels`` is optional, so it may be null. With
    ``conditions`` the condition is one of them (an ``enum``).
    """
    condition: Dict[str, Any] = {"type": "string"}
    if conditions:
        condition["enum"] = list(dict.fromkeys(str(c) for c in conditions))
    label = {"type": "object", "additionalProperties": False,
             "required": ["name", "confidence"],
             "properties": {"name": {"type": "string"}, "confidence": {"type": "number"}}}
    return {
        "type": "object", "additionalProperties": False,
        "required": ["condition", "confidence", "labels"],
        "properties": {
            "condition": condition,
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "labels": {"type": ["array", "null"], "items": label},
        },
    }


#: The result schema without a condition enum (see :func:`openai_result_schema`).
OPENAI_RESULT_SCHEMA: Mapping[str, Any] = openai_result_schema()


def _check_schema(provider: str, payload: Any, schema: Mapping[str, Any]) -> None:
    errors = schema_errors(payload, schema)
    if errors:
        raise FormatError(f"{provider} answer does not match its schema: {errors[0]}",
                          errors=errors, provider=provider)


def _scaled(provider: str, pairs: Sequence[Tuple[str, float]],
            scale: float) -> List[Tuple[str, float]]:
    """Labels on 0-1, refusing out-of-range, constant or wrong-scale confidences."""
    values = [c for _, c in pairs]
    errors = [f"labels/{i}: confidence {shown(c)} outside 0-{scale:g}"
              for i, c in enumerate(values) if not (finite_number(c) and 0 <= c <= scale)]
    if not errors and scale == 100 and values and max(values) <= 1.0:
        errors.append("confidences all <= 1 where a 0-100 scale is expected (0-1 answer?)")
    if not errors and len(values) >= 3 and len(set(values)) == 1:
        errors.append(f"every label has the same confidence {values[0]!r} (constant)")
    if errors:
        raise FormatError(f"{provider} confidences are not usable: {errors[0]}",
                          errors=errors, provider=provider)
    out = [(str(n), float(c) / scale) for n, c in pairs]
    return sorted(out, key=lambda p: -p[1])


def _labelled(provider: str, pairs: Sequence[Tuple[str, float]], scale: float,
              rules: ConditionRules, model_version: Optional[str]) -> Assessment:
    labels = _scaled(provider, pairs, scale)
    condition, confidence = rules.derive(labels)
    return Assessment(condition, confidence, tuple(labels), model_version, provider)


#: The top-level fields of an Image Analysis 4.0 answer.
_AZURE_FIELDS = ("modelVersion", "metadata", "captionResult", "denseCaptionsResult",
                 "tagsResult", "objectsResult", "readResult", "smartCropsResult", "peopleResult")


def _azure(payload: Mapping[str, Any], rules: ConditionRules) -> Assessment:
    _check_schema("azure-v4", payload, PAYLOAD_SCHEMAS["azure-v4"])
    pairs = _pairs("azure-v4", payload["tagsResult"]["values"], "name", "confidence",
                   "tagsResult/values")
    for i, obj in enumerate((payload.get("objectsResult") or {}).get("values", ())):
        pairs.extend(_pairs("azure-v4", obj["tags"], "name", "confidence",
                            f"objectsResult/values/{i}/tags"))
    if not pairs:
        _no_labels_but("azure-v4", payload, _AZURE_FIELDS)
    return _labelled("azure-v4", pairs, 1.0, rules, payload.get("modelVersion"))


def _google(payload: Mapping[str, Any], rules: ConditionRules) -> Assessment:
    """Labels of the first per-image response.

    An empty response object (``{}``) is how Google says it found no labels: that is ``good``
    at confidence 0 (nothing seen, nothing trusted). A non-empty one without
    ``labelAnnotations`` (and without ``error``) answers in fields this adapter does not
    know: drift, a FormatError.
    """
    _check_schema("google", payload, PAYLOAD_SCHEMAS["google"])
    first = payload["responses"][0]
    if first and "labelAnnotations" not in first:
        found = sorted(str(k) for k in first)
        raise FormatError("google answer has no labelAnnotations",
                          errors=[f"responses/0: no labelAnnotations, found {found}"],
                          provider="google")
    pairs = _pairs("google", first.get("labelAnnotations", ()), "description", "score",
                   "responses/0/labelAnnotations")
    if not pairs:
        _no_labels_but("google", first, ("labelAnnotations", "error", "context"), "responses/0")
    return _labelled("google", pairs, 1.0, rules, None)


#: The top-level fields of a DetectLabels or DetectCustomLabels answer.
_REKOGNITION_FIELDS = ("Labels", "CustomLabels", "LabelModelVersion", "OrientationCorrection",
                       "ImageProperties", "ProjectVersionArn")


def _rekognition(payload: Mapping[str, Any], rules: ConditionRules) -> Assessment:
    _check_schema("rekognition", payload, PAYLOAD_SCHEMAS["rekognition"])
    if "Labels" in payload and "CustomLabels" in payload:
        raise FormatError("rekognition answer has both Labels and CustomLabels",
                          errors=["(root): both Labels and CustomLabels, expected one of them"],
                          provider="rekognition")
    key = "Labels" if "Labels" in payload else "CustomLabels"
    pairs = _pairs("rekognition", payload[key], "Name", "Confidence", key)
    if not pairs:
        _no_labels_but("rekognition", payload, _REKOGNITION_FIELDS)
    version = payload.get("LabelModelVersion") or payload.get("ProjectVersionArn")
    return _labelled("rekognition", pairs, 100.0, rules, version)


def _direct(provider: str, data: Any, mapping: GenericMapping,
            model_version: Optional[str]) -> Assessment:
    """An assessment from a service that states its condition itself.

    The condition is trimmed and lower-cased ("Damaged " -> "damaged"); whether it is a
    configured one is for ``validate`` to judge. Labels are objects with a name and a
    confidence, or (where the schema allows them) plain strings, which carry the stated
    confidence.
    """
    _check_schema(provider, data, mapping.payload_schema())
    scale = float(mapping.confidence_scale)
    condition, confidence = _get(data, mapping.condition), _get(data, mapping.confidence)
    if isinstance(condition, str):
        condition = condition.strip().lower()
    raw_labels = (_get(data, mapping.labels) if mapping.labels else None) or []
    errors = []
    if not (isinstance(condition, str) and condition):
        errors.append(f"{mapping.condition}: {shown(condition)} is not a condition")
    if not (finite_number(confidence) and 0 <= confidence <= scale):
        errors.append(f"{mapping.confidence}: {shown(confidence)} outside 0-{scale:g}")
    elif scale == 100 and 0 < confidence <= 1:
        errors.append(f"{mapping.confidence}: {confidence!r} where a 0-100 scale is expected "
                      "(0-1 answer?)")
    else:
        parent, _, leaf = mapping.confidence.rpartition(".")
        moved = _renamed(_get(data, parent) if parent else data, leaf)
        if moved:
            errors.append(f"{mapping.confidence}: 0 beside {moved!r} (a renamed confidence?)")
    pairs: List[Tuple[str, Any]] = []
    names: List[str] = []
    if not isinstance(raw_labels, list):
        errors.append(f"{mapping.labels}: {shown(raw_labels)} is not a list of labels")
    else:
        names = [lab for lab in raw_labels if isinstance(lab, str) and lab.strip()]
        objects = [lab for lab in raw_labels if not isinstance(lab, str)]
        try:
            pairs = _pairs(provider, objects, mapping.label_name, mapping.label_confidence,
                           str(mapping.labels))
        except (KeyError, TypeError, IndexError):
            errors.append(f"{mapping.labels}: labels need {mapping.label_name!r} and "
                          f"{mapping.label_confidence!r}")
    if errors:
        raise FormatError(f"{provider} answer is not usable: {errors[0]}", errors=errors,
                          provider=provider)
    stated = confidence / scale
    labels = (_scaled(provider, pairs, scale) if pairs else []) + [(n, stated) for n in names]
    labels.sort(key=lambda p: -p[1])
    return Assessment(condition, stated, tuple(labels), model_version, provider)


#: The largest structured answer read out of an OpenAI-compatible message (bytes).
_MAX_CONTENT_BYTES = 4 * 1024 * 1024


def _openai(payload: Mapping[str, Any]) -> Assessment:
    _check_schema("openai", payload, PAYLOAD_SCHEMAS["openai"])
    choice = payload["choices"][0]
    message = choice["message"]
    model = payload.get("model")
    if message.get("refusal"):
        raise FormatError("the model refused to assess the image",
                          errors=[f"refusal: {text_of(message['refusal'])}"], provider="openai")
    content = message.get("content")
    if choice.get("finish_reason") == "length":
        raise FormatError("the answer was cut off (finish_reason=length)",
                          errors=["choices/0/finish_reason: length"], provider="openai")
    if not isinstance(content, str) or not content.strip():
        raise FormatError("the answer has no content",
                          errors=[f"choices/0/message/content: {shown(content)}"],
                          provider="openai")
    try:
        data = decode_value(content, max_bytes=_MAX_CONTENT_BYTES, max_depth=MAX_DEPTH)
    except InvalidPayload as exc:
        raise FormatError("the content is not JSON the adapter can read",
                          errors=[f"content: {exc.reason}"], provider="openai") from None
    mapping = GenericMapping(labels="labels", model_version=None,
                             schema=OPENAI_RESULT_SCHEMA_LOOSE)
    return _direct("openai", data, mapping, model if isinstance(model, str) else None)


# What is read from the content: range is checked separately (to name a 0-100 answer as
# such), so the loose schema omits it; labels may be objects or plain strings.
OPENAI_RESULT_SCHEMA_LOOSE: Mapping[str, Any] = {
    "type": "object", "required": ["condition", "confidence"],
    "properties": {"condition": {"type": "string"}, "confidence": {"type": "number"},
                   # servers that ignore strict mode may list the labels as plain strings
                   "labels": {"type": ["array", "null"],
                              "items": {"anyOf": [_NAMED, {"type": "string"}]}}},
}


def normalize(provider: str, payload: Any, *, rules: Optional[ConditionRules] = None,
              mapping: Optional[GenericMapping] = None) -> Assessment:
    """The :class:`Assessment` in a provider's successful answer (parsed JSON).

    Raises FormatError (with ``errors``) when the payload reports an error (its
    ``error_class`` says which; an error inside an HTTP 200 body never becomes an assessment),
    drifted from the expected shape, or is hostile (nested deeper than :data:`MAX_DEPTH`
    levels, a number no float holds) — for drift and hostile payloads the class is
    BAD_FORMAT — and ConfigurationError for an unknown provider.
    """
    if provider not in PROVIDERS:
        raise ConfigurationError("vision.provider", provider,
                                 f"must be one of {list(PROVIDERS)}")
    if deeper_than(payload, MAX_DEPTH):
        raise FormatError(f"{provider} answer nests deeper than {MAX_DEPTH} levels",
                          errors=[f"(root): nested deeper than {MAX_DEPTH} levels"],
                          provider=provider)
    found = detect_error(provider, 200, payload)
    if found is not None:
        error_class, message = found
        raise FormatError(f"{provider} answer reports an error: {message}",
                          errors=[f"error: {message}"], provider=provider,
                          error_class=error_class)
    rules = rules or ConditionRules()
    if provider == "azure-v4":
        return _azure(payload, rules)
    if provider == "google":
        return _google(payload, rules)
    if provider == "rekognition":
        return _rekognition(payload, rules)
    if provider == "openai":
        return _openai(payload)
    mapping = mapping or GenericMapping()   # generic
    version = _get(payload, mapping.model_version) if mapping.model_version else None
    return _direct("generic", payload, mapping, version if isinstance(version, str) else None)
