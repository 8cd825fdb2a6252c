"""Reconciliation: what the feature layer holds against what the ledger knows.

Survey123 sends each webhook once and never retries, so a delivery refused or lost on the way
exists only on the layer. :class:`Reconciler` lists the features created in a time window
(the layer's editor-tracking date field, epoch ms) and their photos, derives the keys intake
would have registered (``<feature>/<attachment>``, or ``<feature>/attachments-unknown`` for a
feature without photos), and reports the keys the ledger lacks, grouped by day, asset type and
crew. With ``backfill`` each missing photo is registered PENDING with ``source=reconcile``, so
the processor treats it like any other.
"""
from __future__ import annotations

import datetime
import logging
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple

from ...core.text.caseless import get_ignoring_case
from ...core.resilience.degrade import priority_of
from ...core.errors import InvalidPayload
from ...core.intake.keys import compose_key, normalise_global_id, trace_id_for
from ...core.config.settings import Settings
from ...core.config.fields import MAX_COUNT
from ...store.base import Store
from ...core.intake.submission import Submission

__all__ = ["Reconciler", "ReconcileReport", "Gap", "Layer"]

log = logging.getLogger("fme_ai_resilience.reconcile")

#: Object ids per ``queryAttachments`` request.
ATTACHMENT_CHUNK = 100
SOURCE = "reconcile"


class Layer(Protocol):
    """What reconciliation needs of a feature layer (``services.arcgis.FeatureLayer``)."""

    url: str

    def query(self, where: str = "1=1", *, out_fields: Sequence[str] = ("*",),
              date_field: Optional[str] = None, since_ms: Optional[int] = None,
              until_ms: Optional[int] = None, **kwargs: Any) -> List[Mapping[str, Any]]: ...

    def query_attachments(self, *, object_ids: Optional[Sequence[int]] = None,
                          **kwargs: Any) -> List[Any]: ...


@dataclass(frozen=True)
class Gap:
    """One key the layer implies and the ledger lacks."""

    key: str
    feature_global_id: str
    object_id: Optional[int]
    attachment_global_id: Optional[str]
    day: str
    asset_type: Optional[str]
    crew: Optional[str]


@dataclass(frozen=True)
class ReconcileReport:
    """One pass over ``[since, until)`` (epoch seconds)."""

    layer_url: str
    since: float
    until: float
    features: int
    expected: int
    missing: Tuple[Gap, ...] = ()
    backfilled: int = 0
    by_day: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    by_asset_type: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    by_crew: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))

    def as_dict(self) -> Dict[str, Any]:
        """A JSON-ready form (``reconcile --json``)."""
        return {"layer": self.layer_url, "since": self.since, "until": self.until,
                "features": self.features, "expected": self.expected,
                "missing": len(self.missing), "backfilled": self.backfilled,
                "by_day": dict(self.by_day), "by_asset_type": dict(self.by_asset_type),
                "by_crew": dict(self.by_crew),
                "keys": [g.key for g in self.missing]}


class Reconciler:
    """Compares one layer's features in a window with the ledger (see the module docstring).

    ``asset_type_field`` and ``crew_field`` name the attributes gaps are grouped by; the
    date field is ``compensation.date_field``.
    """

    def __init__(self, layer: Layer, settings: Settings, *, store: Store,
                 asset_type_field: str = "asset_type") -> None:
        self.layer = layer
        self.settings = settings
        self.store = store
        self.asset_type_field = asset_type_field

    def __repr__(self) -> str:
        return f"Reconciler({self.layer.url!r})"

    def run(self, *, since: float, until: float, backfill: bool = False,
            now: float) -> ReconcileReport:
        """Report (and with ``backfill`` register) what the ledger lacks for ``[since, until)``."""
        comp = self.settings.compensation
        features = self.layer.query(
            out_fields=("*",), date_field=comp.date_field, since_ms=int(since * 1000),
            until_ms=int(until * 1000))
        expected = self._expected(features)
        # A webhook without a photo list registered ``<feature>/attachments-unknown``: the
        # processor lists that feature's photos itself, so they are not missing.
        unknown = {g.feature_global_id: compose_key(g.feature_global_id, None)
                   for g, _ in expected}
        present = self.store.existing_keys(
            sorted({g.key for g, _ in expected} | set(unknown.values())))
        missing = [(gap, sub) for gap, sub in expected
                   if gap.key not in present and unknown[gap.feature_global_id] not in present]
        backfilled = 0
        if backfill:
            for _, sub in missing:
                # Found missing after the fact: stored whatever the backlog (never refused).
                first = priority_of(self.settings.degrade, sub.asset_type)
                if self.store.register(sub, MAX_COUNT, now=now,
                                       priority=first).outcome.value == "NEW":
                    backfilled += 1
            if backfilled:
                log.warning("reconcile: %d missing photo(s) of %s registered", backfilled,
                            self.layer.url)
        gaps = tuple(g for g, _ in missing)
        return ReconcileReport(
            layer_url=self.layer.url, since=since, until=until, features=len(features),
            expected=len(expected), missing=gaps, backfilled=backfilled,
            by_day=_tally(g.day for g in gaps),
            by_asset_type=_tally(g.asset_type or "(none)" for g in gaps),
            by_crew=_tally(g.crew or "(none)" for g in gaps))

    def _expected(self, features: Sequence[Mapping[str, Any]]) -> List[Tuple[Gap, Submission]]:
        comp = self.settings.compensation
        by_oid: Dict[int, Mapping[str, Any]] = {}
        for attrs in features:
            oid = get_ignoring_case(attrs, "objectid")
            if isinstance(oid, int):
                by_oid[oid] = attrs
        photos: Dict[int, List[Any]] = {oid: [] for oid in by_oid}
        oids = sorted(by_oid)
        for i in range(0, len(oids), ATTACHMENT_CHUNK):
            for group in self.layer.query_attachments(object_ids=oids[i:i + ATTACHMENT_CHUNK]):
                photos.setdefault(group.parent_object_id, []).extend(group.attachments)
        out: List[Tuple[Gap, Submission]] = []
        for oid, attrs in by_oid.items():
            try:
                feature = normalise_global_id(get_ignoring_case(attrs, "globalid"),
                                              "globalid")
            except InvalidPayload:
                log.warning("reconcile: feature %s of %s has no usable GlobalID", oid,
                            self.layer.url)
                continue
            created = get_ignoring_case(attrs, comp.date_field)
            day = _day(created)
            asset_type = _text(get_ignoring_case(attrs, self.asset_type_field))
            crew = _text(get_ignoring_case(attrs, comp.crew_field))
            attached = photos.get(oid) or []
            listed = [info for info in attached if info.global_id is not None]
            if len(listed) < len(attached):
                # Intake keys a photo by its GlobalID: one without cannot be matched.
                log.warning("reconcile: %d photo(s) of feature %s on %s carry no GlobalID "
                            "and are left out", len(attached) - len(listed), feature,
                            self.layer.url)
            for info in listed or [None]:
                attachment = None if info is None else normalise_global_id(info.global_id,
                                                                           "globalId")
                key = compose_key(feature, attachment)
                gap = Gap(key, feature, oid, attachment, day, asset_type, crew)
                out.append((gap, Submission(
                    idempotency_key=key, feature_global_id=feature, trace_id=trace_id_for(key),
                    object_id=oid, attachment_global_id=attachment,
                    attachment_id=None if info is None else info.id,
                    attachment_url=None if info is None else info.url,
                    content_type=None if info is None else info.content_type,
                    layer_url=self.layer.url, service_url=self.layer.url.rsplit("/", 1)[0],
                    asset_type=asset_type, attributes=dict(attrs),
                    attachments_unknown=info is None, source=SOURCE)))
        return out


def _day(created_ms: Any) -> str:
    if not isinstance(created_ms, (int, float)) or isinstance(created_ms, bool):
        return "(unknown)"
    moment = datetime.datetime.fromtimestamp(created_ms / 1000.0, tz=datetime.timezone.utc)
    return moment.date().isoformat()


def _text(value: Any) -> Optional[str]:
    return value if isinstance(value, str) and value else None


def _tally(values: Any) -> Mapping[str, int]:
    out: Dict[str, int] = {}
    for value in values:
        out[value] = out.get(value, 0) + 1
    return MappingProxyType(dict(sorted(out.items())))
