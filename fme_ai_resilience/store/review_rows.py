"""The ledger's reads and writes for "done means analysed", for every SQL backend.

Mixed into :class:`~fme_ai_resilience.store.sqlbase.SqlStore`: the interim value a task still
owed shows on the layer (written once), the release of the photos the degradation ladder held
back, the backlog the ladder climbs on (without them), the ledger counted in the one honest
vocabulary (:class:`~fme_ai_resilience.core.ledger.PhotoCounts`) and the review queue with its
verdicts, each recorded once. The SQL is in ``sql/queries*.sql``.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..core.checks import count, finite, name
from ..core.ledger import (AssetRow, LayerStatus, LedgerState, PhotoCounts, ReviewItem,
                           ReviewState, ReviewVerdict, TaskOutcome)
from .rows import NO_LIMIT, from_json, optional, to_json

__all__ = ["ReviewRowOps", "review_state", "review_item_of", "asset_params",
           "REVIEW_WRITE_S"]

#: How long a verdict's write-back is held by the process writing it, s: longer than the
#: write-back's own time limits, so a second resolve never writes it while it is in flight.
REVIEW_WRITE_S = 120.0


def asset_params(asset: AssetRow, *, now: float) -> Dict[str, Any]:
    """The ``asset_upsert`` parameters of an ``asset_condition`` row."""
    return {"key": name("asset.task_key", asset.task_key),
            "feature_global_id": name("asset.feature_global_id", asset.feature_global_id),
            "attachment_global_id": asset.attachment_global_id,
            "asset_type": asset.asset_type, "condition": asset.condition,
            "confidence": None if asset.confidence is None else finite(
                "asset.confidence", asset.confidence, minimum=0, maximum=1),
            "outcome": asset.layer_value, "model_version": asset.model_version,
            "trace_id": asset.trace_id, "now": finite("now", now)}

def review_state(review: bool) -> Optional[str]:
    """The ``review_state`` a completion writes: OPEN for a photo a person must look at."""
    return ReviewState.OPEN.value if review else None


def review_item_of(row: Mapping[str, Any]) -> ReviewItem:
    """A row of the review queue as a :class:`ReviewItem`."""
    verdict = from_json(row.get("review_verdict"))
    return ReviewItem(
        key=row["task_key"], outcome=TaskOutcome(row["outcome"]),
        since=float(row["completed_at"] or row["updated_at"]),
        payload=from_json(row["payload"]) or {}, trace_id=row["trace_id"],
        result=from_json(row["result"]), state=ReviewState(row["review_state"]),
        verdict=None if not verdict else ReviewVerdict(
            condition=str(verdict["condition"]), reviewer=str(verdict["reviewer"]),
            resolved_at=float(verdict["resolved_at"]), note=str(verdict.get("note") or "")),
        written_at=row.get("review_written_at"))


class ReviewRowOps:
    """Layer flags, held-back photos, honest counts and the review queue.

    Mixed into a store that supplies ``_statement`` and ``_fenced``.
    """

    _statement: Any
    _fenced: Any

    # -- photos still owed ---------------------------------------------------------------------
    def flag_layer(self, key: str, token: int, flag: LayerStatus, *, now: float) -> bool:
        """Remember the interim value written on the layer for a task still owed (fenced)."""
        return self._fenced("flag_layer", key, token, now=now, idempotent=True,
                            flag=LayerStatus(flag).value)

    def put_asset(self, asset: AssetRow, *, now: float) -> None:
        """Write a task's ``asset_condition`` row without touching the task (a flag or a
        reviewer's verdict; the row is upserted, so writing it again changes nothing)."""
        self._statement("asset_upsert", asset_params(asset, now=now), idempotent=True)

    def release_held(self, *, now: float) -> int:
        """Make every photo the degradation ladder holds back due at ``now``; how many."""
        return self._statement("release_held", {"now": finite("now", now)}).rowcount

    def ladder_backlog(self, limit: Optional[int] = None) -> int:
        """In-progress tasks without those the ladder holds back, at most ``limit``."""
        cap = NO_LIMIT if limit is None else count("limit", limit)
        rows = self._statement("ladder_backlog", {"count_limit": cap}, write=False).rows
        return int(rows[0]["n"])

    def outcome_counts(self) -> PhotoCounts:
        """The ledger in the one honest vocabulary (see :class:`PhotoCounts`)."""
        got = {"ACCEPTED": 0, "REVIEW": 0, "SKIPPED": 0, "expanded": 0, "in_review": 0,
               "reviewed": 0}
        for row in self._statement("outcome_counts", write=False).rows:
            n, state = int(row["n"]), row["review_state"]
            outcome = row["outcome"]
            if outcome == TaskOutcome.SKIPPED.value and state is None:
                got["expanded"] += n      # a feature's photos registered as their own tasks
            elif outcome in got:
                got[outcome] += n
            if state == ReviewState.OPEN.value:
                got["in_review"] += n
            elif state == ReviewState.RESOLVED.value:
                got["reviewed"] += n
        # the in-progress rows through their partial index: `counts` reads the whole ledger,
        # and /metrics and check run this on every scrape
        awaiting = int(self._statement("backlog", {"count_limit": NO_LIMIT},
                                       write=False).rows[0]["n"])
        held = int(self._statement("held_back", write=False).rows[0]["n"])
        dead = {str(row["failure_class"] or "UNKNOWN"): int(row["n"])
                for row in self._statement("dead_letters", write=False).rows}
        return PhotoCounts(accepted=got["ACCEPTED"], review=got["REVIEW"],
                             skipped=got["SKIPPED"], expanded=got["expanded"],
                             awaiting=awaiting, held_back=held, in_review=got["in_review"],
                             reviewed=got["reviewed"], dead=dead)

    def ledger_state(self, *, now: float) -> LedgerState:
        """The ledger's work at ``now`` for the signals that page (see :class:`LedgerState`)."""
        now = finite("now", now)
        due = self._statement("due_stats", {"now": now}, write=False).rows[0]
        progress = self._statement("last_progress", write=False).rows[0]
        leases = self._statement("expired_leases", {"now": now}, write=False).rows[0]
        queue, oldest = self.review_stats()
        return LedgerState(
            observed_at=now, outcomes=self.outcome_counts(), due=int(due["n"]),
            oldest_due_at=optional(float, due["oldest_due"]),
            oldest_due_created_at=optional(float, due["oldest_created"]),
            last_progress_at=optional(float, progress["at"]),
            expired_leases=int(leases["n"]), oldest_expiry=optional(float, leases["oldest"]),
            review_queue=queue, review_oldest_at=oldest)

    # -- the review queue ----------------------------------------------------------------------
    def review_stats(self) -> Tuple[int, Optional[float]]:
        """The review queue's size and when its oldest photo entered it (None: empty)."""
        row = self._statement("review_stats", write=False).rows[0]
        return int(row["n"]), optional(float, row["oldest"])

    def review_items(self, state: ReviewState = ReviewState.OPEN, limit: int = 50,
                     offset: int = 0) -> List[ReviewItem]:
        """Photos of the review queue in ``state``, oldest first."""
        rows = self._statement("review_list", {
            "state": ReviewState(state).value, "limit": count("limit", limit, minimum=1),
            "offset": count("offset", offset)}, write=False).rows
        return [review_item_of(r) for r in rows]

    def review_item(self, key: str) -> Optional[ReviewItem]:
        """One photo of the review queue (open or resolved), or None."""
        rows = self._statement("get", {"key": name("key", key)}, write=False).rows
        if not rows or rows[0].get("review_state") is None:
            return None
        return review_item_of(rows[0])

    def resolve_review(self, key: str, verdict: ReviewVerdict, *, now: float,
                       write_s: float = REVIEW_WRITE_S) -> bool:
        """Record ``verdict`` on an open photo of the queue, holding its write-back for
        ``write_s``; False when it is not open (never in the queue, or resolved already: a
        verdict is recorded once)."""
        now = finite("now", now)
        return self._statement("review_resolve", {
            "key": name("key", key), "verdict": to_json(dict(verdict.as_dict()), "verdict"),
            "until": now + finite("write_s", write_s, minimum=0), "now": now}).rowcount == 1

    def claim_review_write(self, key: str, *, now: float,
                           write_s: float = REVIEW_WRITE_S) -> bool:
        """Take over the write-back of a recorded verdict not written yet for ``write_s``;
        False while another process holds it (or it was written)."""
        now = finite("now", now)
        return self._statement("review_write_claim", {
            "key": name("key", key), "until": now + finite("write_s", write_s, minimum=0),
            "now": now}).rowcount == 1

    def release_review_write(self, key: str) -> None:
        """Give up the write-back of a verdict that could not be written (the next resolve
        writes it at once)."""
        self._statement("review_write_release", {"key": name("key", key)})

    def review_written(self, key: str, *, now: float) -> bool:
        """Note that the verdict of ``key`` reached the layer; False when it had already."""
        return self._statement("review_written", {"key": name("key", key),
                                                  "now": finite("now", now)}).rowcount == 1
