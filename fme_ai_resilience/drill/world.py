"""One subject's outside world: the stand-ins, seeded, and the plan of deliveries made on them.

Every subject of a drill gets a fresh :class:`World` from the same scenario and seed: the
feature layer creates the same features (its GlobalIDs come from the seed), the photo host
and the Vision AI answer alike, so the library and each baseline meet the same run.

``photos_per_feature`` is the form's photo repeat: with more than one photo a feature, every
subject writes each photo's assessment as one row of the layer's related table (table 1,
:attr:`World.table_url`), and the judge reads each photo's row; with one, the feature's own
fields hold it.

In a scenario with :class:`~fme_ai_resilience.drill.scenarios.LayerHooks` the layer tracks
changes as that scenario says (its first ``extractChanges`` jobs failing), and each feature
takes its server generation when it reaches the layer at its plan time, after the run began
(:meth:`World.begin`), so the layer's webhook notifies it then.
"""
from __future__ import annotations

import hashlib
import random
import time
from typing import Any, Dict, List, Optional, Set

from ..core.checks import count
from ..core.intake.keys import compose_key, normalise_global_id
from .judge import LOST, Observed, replay
from .scenarios import Plan, Scenario, plan_deliveries
from .standins import (FeatureLayerStandIn, FeatureRecord, NotificationStandIn, PhotoHost,
                       Survey123Sender, VisionStandIn)

__all__ = ["World", "WRITEBACK_FIELDS", "photo_keys"]

#: The fields a write-back sets on a feature (the library's defaults; baselines write them too).
WRITEBACK_FIELDS = ("ai_condition", "ai_confidence", "ai_status", "ai_model", "ai_trace_id",
                    "ai_assessed_at")


def _gid(global_id: str) -> str:
    return normalise_global_id(global_id, "globalId")


def _keys(feature: FeatureRecord) -> Dict[str, str]:
    """The task key of each of a feature's photos, with the photo's SHA-256."""
    gid = normalise_global_id(feature.global_id, "globalId")
    return {compose_key(gid, normalise_global_id(p.global_id, "globalId")): p.sha256
            for p in feature.attachments}


def photo_keys(body: dict) -> List[str]:
    """The task keys of a webhook body's photos, as intake makes them."""
    feature = body["feature"]
    gid = normalise_global_id(feature["result"]["globalId"], "globalId")
    photos = [p for group in (feature.get("attachments") or {}).values() for p in group]
    return [compose_key(gid, normalise_global_id(p["globalId"], "globalId")) for p in photos]


class World:
    """The stand-ins of one subject (start with ``with``), and :meth:`plan` on them."""

    def __init__(self, scenario: Scenario, *, seed: int, time_scale: float,
                 photos_per_feature: int = 1) -> None:
        self.scenario = scenario
        self.photos_per_feature = count("photos_per_feature", photos_per_feature, minimum=1)
        self.seed = seed
        self.time_scale = time_scale
        hooks = scenario.layer_hooks
        self.layer = FeatureLayerStandIn(
            seed=seed, fields=WRITEBACK_FIELDS, time_scale=time_scale,
            edit_refusals=scenario.edit_refusals,
            changes_failures=hooks.changes_failures if hooks else 0,
            changes_polls_pending=hooks.polls_pending if hooks else 2)
        self.photos = PhotoHost(seed=seed)
        self.vision = VisionStandIn(scenario.faults, seed=seed, time_scale=time_scale,
                                    retry_after_ms=True)
        self.mailbox = NotificationStandIn()
        self.last_plan: Optional[Plan] = None
        #: When an engine process died in the run (monotonic s): the chaos kills, as seen.
        self.deaths: List[float] = []
        #: The server generation before the plan's features (a layer webhook's start), and
        #: when each feature reaches the layer (GlobalID -> production s).
        self.base_gen = 1
        self.arrivals: Dict[str, float] = {}

    def __enter__(self) -> "World":
        for server in (self.layer, self.photos, self.vision):
            server.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        for server in (self.vision, self.photos, self.layer):
            server.stop()

    def begin(self) -> float:
        """The run begins now: the Vision AI's counters and schedule and the layer's schedule
        start from zero (the layer keeps its features and writes). The start, monotonic s."""
        self.vision.reset()
        self.layer.restart_schedule()
        if self.scenario.layer_hooks is not None:
            # Features the layer showed before the run began (its schedule ran meanwhile)
            # take their generation again when they arrive, as in the run they do.
            for gid, at_s in self.arrivals.items():
                self.layer.hide_until(gid, at_s)
        self.deaths = []
        return time.monotonic()

    @property
    def last_arrival_s(self) -> float:
        """When the plan's last feature reaches the layer (production s; 0: no plan)."""
        return max(self.arrivals.values(), default=0.0)

    @property
    def photo_host(self) -> str:
        """``127.0.0.1:<port>`` of the photo host, for the download allow-list."""
        return self.photos.url.split("//", 1)[1]

    def reach(self) -> Dict[str, str]:
        """The settings that point the pipeline at these stand-ins: the Vision AI, the
        layer's feature service (the one intake serves), the photo host on loopback."""
        return {"vision.endpoint": self.vision.endpoint,
                "intake.feature_services": self.layer.service_url,
                "download.allowed_hosts": self.photo_host,
                "download.allow_http_hosts": "127.0.0.1",
                "download.allow_private_hosts": "127.0.0.1"}

    @property
    def table_url(self) -> str:
        """The related table each photo's row is written to, or "" when the feature's own
        fields hold its assessment (one photo a feature)."""
        return f"{self.layer.service_url}/1" if self.photos_per_feature > 1 else ""

    def histories(self) -> Dict[str, Any]:
        """Every write the layer and its related table saw, per feature or row, as
        ``(monotonic s, values)`` (what the page's photo series are drawn from)."""
        layer = self.layer.snapshot()
        rows = {f"row-{oid}": writes for oid, (_, writes) in layer["table_rows"].items()}
        return {**layer["history"], **rows}

    def plan(self, submissions: int) -> Plan:
        """Create the scenario's features on the layer and plan their deliveries."""
        s = self.scenario
        rng = random.Random(f"plan:{self.seed}:{s.name}")
        sender = Survey123Sender("http://127.0.0.1:9/unused", seed=self.seed)
        bodies: List[dict] = []
        facts: List[str] = []
        key_facts: Dict[str, str] = {}
        missing: List[str] = []
        never: List[str] = []
        never_at: Dict[str, float] = {}
        self.base_gen = self.layer.changes.current()
        for i in range(submissions):
            feature = self.layer.add_feature(photos=self.photos_per_feature)
            facts.extend(p.sha256 for p in feature.attachments)
            key_facts.update(_keys(feature))
            body = sender.body_for(feature)
            # Each photo is gone or not on its own draw (one draw a feature of one photo).
            lost = [p for p in feature.attachments if rng.random() < s.missing_photo_rate]
            if lost:
                missing.extend(self._gone(body, i, {_gid(p.global_id) for p in lost}))
                for photo in lost:
                    self.layer.lose_photo(photo.id)
            if len(never) < s.never_delivered and i % max(1, submissions // 4) == 1:
                never.append(feature.global_id)      # only the layer will ever know it
                never_at[feature.global_id] = s.submitted_at_s(i, submissions)
                continue
            bodies.append(body)
            if rng.random() < s.recreate_rate:
                again = self.layer.recreate(feature)
                key_facts.update(_keys(again))
                bodies.append(sender.body_for(again))
        deliveries = plan_deliveries(s, bodies, seed=self.seed, time_scale=self.time_scale)
        self._submit_on_time(deliveries, never_at)
        outage = None
        if s.outage is not None:
            outage = (s.outage[0] * self.time_scale, s.outage[1] * self.time_scale)
        self.last_plan = Plan(tuple(deliveries), tuple(dict.fromkeys(facts)), submissions,
                              key_facts, tuple(never), tuple(missing), outage)
        return self.last_plan

    def _submit_on_time(self, deliveries: List[Any], never_at: Dict[str, float]) -> None:
        """Each feature reaches the layer when its crew's phone sends it (production s): at
        its first delivery, or, for one whose webhook never came, when it would have come."""
        first: Dict[str, float] = dict(never_at)
        for item in deliveries:
            first.setdefault(item.body["feature"]["result"]["globalId"],
                             item.at_s / self.time_scale)
        for gid, at_s in first.items():
            self.layer.hide_until(gid, at_s)
        self.arrivals = first

    def _gone(self, body: dict, i: int, lost: Set[str]) -> List[str]:
        """Point the body's photos in ``lost`` (normalised GlobalIDs) at the photo host, which
        answers 404 for them."""
        gone = []
        for group in body["feature"]["attachments"].values():
            for photo in group:
                if _gid(photo["globalId"]) not in lost:
                    continue
                name = f"gone-{i}-{hashlib.sha256(photo['url'].encode()).hexdigest()[:8]}.jpg"
                self.photos.add(name)
                self.photos.missing(name)
                photo["url"] = self.photos.url_for(name)
                gone.append(name)
        return gone

    def observe(self, *, started: float) -> Observed:
        """What the stand-ins saw of the run that began at ``started`` (monotonic s), for
        :func:`~fme_ai_resilience.drill.judge.judge`."""
        photos = self.layer.photos()
        layer = self.layer.snapshot()
        vision = self.vision.snapshot()
        return Observed(
            photos=photos, history=layer["history"],
            answers={sha: (a[0], a[1]) for sha, a in vision["answers"].items()},
            submitted=self._submitted(started),
            vision_log=vision["log"], messages=self.mailbox.snapshot()["messages"],
            table_rows=layer["table_rows"], per_photo_rows=bool(self.table_url),
            outages=[(w["start_s"], w["end_s"], w["calls"]) for w in vision["outages"]],
            peak_in_flight=vision["peak_in_flight"], started=started,
            left=vision["left"], closed=vision["closed"], deaths=tuple(self.deaths),
            time_scale=self.time_scale)

    def nothing_owed(self, started: float) -> bool:
        """Whether the layer shows every photo it holds analysed or flagged, as the judge
        reads it: nothing is left for a safety net to find (when to stop watching a subject,
        never a figure)."""
        return LOST not in replay(self.observe(started=started)).states.values()

    def _submitted(self, started: float) -> Dict[str, float]:
        """When each fact of the last plan was first sent (monotonic s; never: not listed)."""
        plan = self.last_plan
        out: Dict[str, float] = {}
        for item in plan.deliveries if plan is not None else ():
            for key in photo_keys(item.body):
                sha = plan.key_facts.get(key)  # type: ignore[union-attr]
                if sha is not None and sha not in out:
                    out[sha] = started + item.at_s
        return out

    def snapshots(self) -> Dict[str, Any]:
        """Every stand-in's counters."""
        return {"vision": self.vision.snapshot(), "layer": self.layer.snapshot(),
                "photos": self.photos.snapshot()}
