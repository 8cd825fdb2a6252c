"""Intake's bounded records, for every SQL backend: the dead letters of invalid bodies, the
records of refused deliveries (``intake_refusal``), and the counters of what was not kept and of
each webhook sender's deliveries and refused signatures (``intake_counter``).

Mixed into :class:`~fme_ai_resilience.store.sqlbase.SqlStore`: each operation is one
transaction through the backend's ``_transact``; the SQL is in ``sql/queries.sql``. Every bound
is checked by a count that stops at the bound (through the rows' own index), so the checks cost
the same however much has been kept; concurrent writers may pass a bound by a few rows.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping

from ..core.checks import count, finite, name
from ..core.errors import ConfigurationError, FailureClass
from ..core.ledger import (BAD_SIGNATURE, DELIVERED, INVALID_NOT_KEPT, REFUSALS_NOT_RECORDED,
                           InvalidBodyKept, Refusal, SenderCount)
from ..core.text.redact import excerpt, redact_mapping
from .rows import ERROR_LIMIT, from_json, limit_of, to_json

__all__ = ["IntakeRecordOps"]

#: The prefix of a webhook sender's counters in ``intake_counter``.
_SENDER = "sender:"


class IntakeRecordOps:
    """Dead letters of invalid bodies, refusal records and intake's counters.

    Mixed into a store that supplies ``_statement`` and ``_transact``.
    """

    _statement: Any
    _transact: Any

    def keep_invalid_body(self, key: str, payload: Mapping[str, Any], error: str, *,
                          now: float, per_minute: int, limit: int,
                          trace_id: str = "") -> InvalidBodyKept:
        """Keep the dead letter (INVALID_PAYLOAD) of a body that is no submission, within bounds.

        At most ``per_minute`` are kept in the 60 s before ``now`` and ``limit`` in all (a
        watermark: concurrent callers may pass it by a few); past either nothing is stored and
        the ``invalid_not_kept`` counter counts the body. A key already kept is left as it is.
        Counted through the dead letters' own index, never past the bounds.
        """
        now = finite("now", now)
        per_minute = limit_of("per_minute", per_minute)
        limit = limit_of("limit", limit)
        params = {"key": name("key", key),
                  "payload": to_json(redact_mapping(payload), "payload"),
                  "failure_class": FailureClass.INVALID_PAYLOAD.value,
                  "error": excerpt(error, ERROR_LIMIT), "now": now, "trace_id": trace_id,
                  "source": "survey123"}

        def work(tx: Any) -> InvalidBodyKept:
            if tx.run("existing", params).rows:
                return InvalidBodyKept.ALREADY_KEPT
            recent = tx.run("invalid_recent", {"since": now - 60.0,
                                               "count_limit": per_minute}).rows[0]["n"]
            if int(recent) >= per_minute or int(tx.run("invalid_total", {
                    "count_limit": limit}).rows[0]["n"]) >= limit:
                tx.run("bump_counter", {"name": INVALID_NOT_KEPT, "now": now})
                return InvalidBodyKept.NOT_KEPT
            kept = tx.run("insert_dead_letter", params).rowcount == 1
            return InvalidBodyKept.KEPT if kept else InvalidBodyKept.ALREADY_KEPT

        return self._transact(work)

    def record_refusal(self, refusal: Refusal, *, limit: int) -> bool:
        """Keep the record of a delivery refused 429/503 (:class:`Refusal`), at most ``limit``
        records in all; a body already recorded counts the delivery on its record. Past the
        limit nothing is stored and ``refusals_not_recorded`` counts it: returns False."""
        if not isinstance(refusal, Refusal):
            raise ConfigurationError("refusal", type(refusal).__name__, "must be a Refusal")
        limit = limit_of("limit", limit)
        now = finite("refused_at", refusal.refused_at)
        params = {"key": name("key", refusal.key), "reason": name("reason", refusal.reason),
                  "status_code": count("status_code", refusal.status_code, minimum=100,
                                       maximum=599),
                  "feature_global_id": name("feature_global_id", refusal.feature_global_id),
                  "service_url": refusal.service_url, "layer_url": refusal.layer_url,
                  "delivery_id": refusal.delivery_id, "event_type": refusal.event_type,
                  "records": to_json([list(r) for r in refusal.records], "records"),
                  "photos_refused": count("photos_refused", refusal.photos_refused),
                  "photos_stored": count("photos_stored", refusal.photos_stored), "now": now}

        def work(tx: Any) -> bool:
            if tx.run("refusal_seen_again", params).rowcount == 1:
                return True
            if int(tx.run("refusal_total", {"count_limit": limit}).rows[0]["n"]) >= limit:
                tx.run("bump_counter", {"name": REFUSALS_NOT_RECORDED, "now": now})
                return False
            tx.run("insert_refusal", params)
            return True

        return self._transact(work)

    def refusals(self, since: float, limit: int = 1000) -> List[Refusal]:
        """Refusal records whose last delivery is at or after ``since``, newest first."""
        rows = self._statement("refusals_since", {"since": finite("since", since),
                                                  "limit": limit_of("limit", limit, 1)},
                               write=False).rows
        return [Refusal(key=r["refusal_key"], reason=r["reason"],
                        status_code=int(r["status_code"]),
                        feature_global_id=r["feature_global_id"],
                        refused_at=float(r["last_refused_at"]),
                        photos_refused=int(r["photos_refused"]),
                        photos_stored=int(r["photos_stored"]), service_url=r["service_url"],
                        layer_url=r["layer_url"], delivery_id=r["delivery_id"],
                        event_type=r["event_type"],
                        records=tuple(tuple(x) for x in from_json(r["records"]) or ()),
                        refusals=int(r["refusals"]),
                        first_refused_at=float(r["first_refused_at"])) for r in rows]

    def refusal_counts(self) -> Dict[str, Dict[str, int]]:
        """``{reason: {"bodies": n, "deliveries": n}}`` over the refusal records."""
        return {r["reason"]: {"bodies": int(r["bodies"]), "deliveries": int(r["deliveries"])}
                for r in self._statement("refusal_counts", write=False).rows}

    def intake_counters(self) -> Dict[str, int]:
        """What intake could not keep, by name (``invalid_not_kept``,
        ``refusals_not_recorded``); every name this release counts is present."""
        out = {INVALID_NOT_KEPT: 0, REFUSALS_NOT_RECORDED: 0}
        for row in self._statement("intake_counters", write=False).rows:
            if not row["name"].startswith(_SENDER):
                out[row["name"]] = int(row["n"])
        return out

    def record_sender(self, sender: str, event: str, *, now: float) -> None:
        """Count one ``event`` (``DELIVERED``, ``BAD_SIGNATURE``) of a webhook sender."""
        if event not in (DELIVERED, BAD_SIGNATURE):
            raise ConfigurationError("event", event, f"must be {DELIVERED} or {BAD_SIGNATURE}")
        params = {"name": f"{_SENDER}{name('sender', sender)}:{event}", "now": finite("now", now)}
        self._transact(lambda tx: tx.run("bump_counter", params))

    def sender_counts(self) -> List[SenderCount]:
        """Every webhook sender's counts, by sender and event."""
        out = []
        for row in self._statement("intake_counters", write=False).rows:
            if row["name"].startswith(_SENDER):
                sender, _, event = row["name"][len(_SENDER):].rpartition(":")
                out.append(SenderCount(sender, event, int(row["n"]), float(row["first_at"]),
                                       float(row["last_at"])))
        return sorted(out, key=lambda c: (c.sender, c.event))
