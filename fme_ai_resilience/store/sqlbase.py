"""The backend-independent half of the ledger: argument checks, decisions, shared operations.

:class:`SqlStore` implements every :class:`~fme_ai_resilience.store.base.Store` operation on top
of a few primitives a backend supplies (``_transact`` running a function inside one transaction,
``_register_row`` and ``_claim_rows`` for the two operations whose atomicity each dialect gets
its own way). Driver exceptions never leave a backend: :func:`translate` turns them into
:class:`StoreError` / :class:`StoreUnavailable` once, at that edge. Every parameter is cleaned
before the driver sees it (:mod:`.text`: NUL and lone surrogates become U+FFFD on every backend;
:meth:`Tx.execute` and the PostgreSQL prepared statements do it), and the ValueError /
UnicodeError / OverflowError a driver raises for a value it cannot bind becomes
:class:`StoreError`. A bad argument (a NaN ``now``, a negative limit) raises
:class:`~fme_ai_resilience.core.errors.ConfigurationError` before anything is sent.
"""
from __future__ import annotations

import abc
import re
from typing import (
    Any, Callable, Dict, Iterable, List, Mapping, NamedTuple, Optional, Tuple, Type, TypeVar,
)

from ..core.checks import count, finite, name
from ..core.errors import (SCHEMA_MISSING, ConfigurationError, ErrorClass, FailureClass,
                           SchemaMissing, StoreError, StoreUnavailable)
from ..core.ledger import (AssetRow, CallRecord, CallWindow, DeferCause, FormatAnomaly,
                           OverloadMode, ReapResult, RegisterOutcome, Registration, Stage, Status,
                           Task, TaskOutcome, TaskRecord)
from ..core.config.pipeline_settings import SECRET_SETTINGS
from ..core.text.redact import REDACTED, excerpt, redact_mapping, redact_text
from ..core.intake.submission import Submission
from . import sqlfiles
from .breaker_ladder import BreakerLadderOps
from .call_limits import CallLimitOps
from .intake_records import IntakeRecordOps
from .metric_rows import MetricRowOps
from .pipeline_rows import PipelineRowOps
from .review_rows import ReviewRowOps, asset_params, review_state as _review
from .rows import (
    ERROR_LIMIT, NO_LIMIT, from_json, limit_of, optional, record_of, task_of, to_json,
)
from .text import clean_params

__all__ = ["SqlStore", "Tx", "Result", "translate", "status_of_new_task", "ERROR_LIMIT",
           "EXCERPT_LIMIT"]

T = TypeVar("T")

#: Longest raw excerpt kept in ``format_anomaly.excerpt``.
EXCERPT_LIMIT = 8192
#: SQLSTATE undefined_table: a query named a table the database does not have.
_UNDEFINED_TABLE = "42P01"


class Result(NamedTuple):
    """Rows (as dicts) and the affected row count of one statement."""

    rows: List[Dict[str, Any]]
    rowcount: int


class Tx:
    """One open transaction: runs named queries on a DB-API cursor."""

    def __init__(self, cursor: Any, queries: Mapping[str, str]) -> None:
        self.cursor = cursor
        self.queries = queries

    def run(self, name: str, params: Optional[Mapping[str, Any]] = None) -> Result:
        """Execute the named query; SELECTs and RETURNING give their rows."""
        return self.execute(self.queries[name], params)

    def execute(self, sql: str, params: Optional[Mapping[str, Any]] = None) -> Result:
        """Execute SQL text from the ``.sql`` files (or derived from them).

        Text parameters are cleaned first; raises StoreError for a value the driver cannot
        bind (an integer past the column's range, say).
        """
        return self.fetch(sql, clean_params(params))

    def fetch(self, sql: str, params: Any) -> Result:
        """Execute with parameters already cleaned (a mapping, or a sequence for ``%s``)."""
        cur = self.cursor
        try:
            cur.execute(sql, params)
            rows: List[Dict[str, Any]] = []
            if cur.description is not None:
                names = [d[0] for d in cur.description]
                rows = [dict(zip(names, row)) for row in cur.fetchall()]
        except (ValueError, OverflowError) as exc:  # UnicodeError is a ValueError
            raise translate(exc, {}, lambda _: False) from exc
        return Result(rows, cur.rowcount)

    def script(self, statements: Iterable[str]) -> None:
        """Execute DDL statements, in order, without parameters."""
        for statement in statements:
            self.cursor.execute(statement)


#: The most characters of a driver's error message kept (in exceptions, logs, a command's
#: error line): a hostile or broken server may send megabytes.
MAX_DETAIL = 2000
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def translate(exc: BaseException, table: Mapping[type, Type[StoreError]],
              unavailable: Callable[[BaseException], bool],
              describe: Optional[Callable[[BaseException], str]] = None) -> StoreError:
    """The library exception for a driver exception (most specific mapped class wins).

    ``describe(exc)`` words it (default: its class name and first line).
    ``unavailable(exc)`` upgrades a mapped :class:`StoreError` to :class:`StoreUnavailable`
    when the driver says the database cannot be reached (connection lost, file locked). A
    query on a table the database does not have is :class:`SchemaMissing`.
    """
    target: Type[StoreError] = StoreError
    for klass in type(exc).__mro__:
        if klass in table:
            target = table[klass]
            break
    if target is StoreError and unavailable(exc):
        target = StoreUnavailable
    first = (str(exc)[:2 * MAX_DETAIL].strip().splitlines() or [""])[0]
    detail = describe(exc) if describe else f"{type(exc).__name__}: {first}"
    # a server's message is the server's to size: cut before it is scrubbed, and after
    detail = _CONTROL.sub("?", redact_text(detail[:2 * MAX_DETAIL]))   # no terminal escapes
    if len(detail) > MAX_DETAIL:
        detail = detail[:MAX_DETAIL - 1] + "…"
    if getattr(exc, "pgcode", None) == _UNDEFINED_TABLE or "no such table" in first.lower():
        return SchemaMissing(f"{SCHEMA_MISSING} (`fme-ai-resilience db init --db URL`): {detail}")
    return target(detail)


class _Stale(StoreError):
    """A fenced write inside a transaction found no row: roll the transaction back."""


def status_of_new_task(backlog: int, ceiling: int, park: bool,
                       park_ceiling: int) -> Optional[Status]:
    """The status a new registration gets at ``backlog``, or None when it is refused."""
    if backlog < ceiling:
        return Status.PENDING
    if park and backlog < park_ceiling:
        return Status.DEFERRED
    return None


class SqlStore(BreakerLadderOps, CallLimitOps, IntakeRecordOps, MetricRowOps, PipelineRowOps,
               ReviewRowOps, abc.ABC):
    """Every ledger operation, for any backend that supplies the primitives below."""

    dialect: str = ""

    def __init__(self) -> None:
        self._queries = sqlfiles.queries(self.dialect)

    # -- primitives a backend supplies ---------------------------------------------------------
    @abc.abstractmethod
    def _transact(self, fn: Callable[[Tx], T], write: bool = True) -> T:
        """Run ``fn`` inside one transaction and commit; driver errors come out translated."""

    @abc.abstractmethod
    def _register_row(self, params: Dict[str, Any]) -> Dict[str, Any]:
        """Atomically insert-or-find; ``{inserted, backlog, status, outcome}`` (see register)."""

    @abc.abstractmethod
    def _claim_rows(self, params: Dict[str, Any]) -> List[Dict[str, Any]]:
        """Atomically lease due rows; the rows after the update, each with ``due`` added."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the connection (a later operation opens a new one)."""

    @abc.abstractmethod
    def describe(self) -> str:
        """Which database this is, for messages: never a password."""

    def __enter__(self) -> "SqlStore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _statement(self, name: str, params: Optional[Mapping[str, Any]] = None,
                   write: bool = True, idempotent: bool = False) -> Result:
        """One named statement as its own transaction (a backend may do it more cheaply, and
        run an ``idempotent`` one again after a lost connection)."""
        return self._transact(lambda tx: tx.run(name, params), write=write)

    # -- schema ------------------------------------------------------------------------------
    def init_schema(self, *, now: float) -> List[int]:
        """Create or upgrade the tables (idempotent); returns the migrations it applied.

        ``now`` (epoch seconds) is recorded as each migration's ``applied_at``.
        """
        now = finite("now", now)
        bootstrap, migrations = sqlfiles.schema(self.dialect)

        def work(tx: Tx) -> List[int]:
            if "migration_limits" in self._queries:
                tx.run("migration_limits")
            if "schema_lock" in self._queries:
                tx.run("schema_lock")
            tx.script(sqlfiles.split_statements(bootstrap))
            done = {int(r["version"]) for r in tx.run("schema_versions").rows}
            applied = []
            for version, ddl in migrations:
                if version not in done:
                    tx.script(sqlfiles.split_statements(ddl))
                    tx.run("record_schema_version", {"version": version, "now": now})
                    applied.append(version)
            return applied

        return self._transact(work)

    def schema_version(self) -> int:
        """The highest applied migration, 0 for a database never initialised."""
        def work(tx: Tx) -> int:
            if not tx.run("has_schema_version").rows[0]["n"]:
                return 0
            versions = [int(r["version"]) for r in tx.run("schema_versions").rows]
            return max(versions, default=0)
        return self._transact(work, write=False)

    def clear(self) -> None:
        """Delete every row of every ledger table (tests and drills; cannot be undone)."""
        self._transact(lambda tx: tx.script(sqlfiles.split_statements(self._queries["clear"])))

    @staticmethod
    def latest_schema_version(dialect: str) -> int:
        """The version ``init_schema`` brings a database to."""
        return max(v for v, _ in sqlfiles.schema(dialect)[1])

    # -- intake ------------------------------------------------------------------------------
    def register(self, submission: Submission, backlog_ceiling: int,
                 overload_mode: OverloadMode = OverloadMode.PARK,
                 park_ceiling: Optional[int] = None, due_at: Optional[float] = None, *,
                 now: float, received_at: Optional[float] = None,
                 priority: int = 0) -> Registration:
        """:meth:`Store.register <fme_ai_resilience.store.base.Store.register>`, in one round
        trip. The ceiling is a watermark: concurrent registrations may pass it by a few rows."""
        if not isinstance(submission, Submission):
            raise ConfigurationError("submission", type(submission).__name__,
                                     "must be a Submission")
        now = finite("now", now)
        ceiling = limit_of("backlog_ceiling", backlog_ceiling, 0)
        park = OverloadMode(overload_mode) is OverloadMode.PARK
        if park_ceiling is not None and count("park_ceiling", park_ceiling) < ceiling:
            raise ConfigurationError("park_ceiling", park_ceiling, "must be >= backlog_ceiling")
        limit = min(park_ceiling, NO_LIMIT) if (park and park_ceiling is not None) else ceiling
        payload = submission.to_payload()
        row = self._register_row({
            "key": submission.idempotency_key, "source": submission.source,
            "trace_id": submission.trace_id, "feature_global_id": submission.feature_global_id,
            "attachment_global_id": submission.attachment_global_id,
            "event_type": submission.event_type, "payload": to_json(payload, "payload"),
            "now": now, "due_at": now if due_at is None else finite("due_at", due_at),
            "received_at": None if received_at is None else finite("received_at", received_at),
            "ceiling": ceiling, "park": park, "count_limit": limit + 1,
            "park_ceiling": NO_LIMIT if park_ceiling is None else min(park_ceiling, NO_LIMIT),
            "priority": count("priority", priority),
        })
        backlog = int(row["backlog"])
        key = submission.idempotency_key
        if row["inserted"] is not None:
            status = Status(row["inserted"])
            outcome = RegisterOutcome.NEW if status is Status.PENDING else RegisterOutcome.PARKED
            return Registration(key, outcome, status, backlog=backlog)
        if row["status"] is not None:
            status = Status(row["status"])
            outcome = (RegisterOutcome.DUPLICATE_IN_PROGRESS if status.in_progress
                       else RegisterOutcome.DUPLICATE_DONE)
            return Registration(key, outcome, status, optional(TaskOutcome, row["outcome"]),
                                backlog=backlog)
        return Registration(key, RegisterOutcome.OVER_BACKLOG, None, backlog=backlog)

    def record_dead_letter(self, key: str, payload: Mapping[str, Any],
                           failure_class: FailureClass, error: str, *, now: float,
                           trace_id: str = "", source: str = "survey123") -> bool:
        """Store a DEAD row for something that never became a task (e.g. an invalid body).

        The payload is stored with secret-named values redacted. Returns False when ``key``
        already exists (the evidence is kept once).
        """
        params = {"key": name("key", key), "payload": to_json(redact_mapping(payload), "payload"),
                  "failure_class": FailureClass(failure_class).value,
                  "error": excerpt(error, ERROR_LIMIT), "now": finite("now", now),
                  "trace_id": trace_id, "source": source}
        return self._statement("insert_dead_letter", params).rowcount == 1

    # -- processing --------------------------------------------------------------------------
    def claim(self, owner: str, limit: int, lease_s: float, *, now: float) -> List[Task]:
        """Lease up to ``limit`` due tasks (PENDING, or FAILED/DEFERRED whose time has come).

        Each comes with a fresh ``lease_token``; the lease runs until ``now + lease_s``, which
        also becomes the row's ``next_attempt_at`` (when it is due again if the holder
        vanishes). Tasks are returned in claim order: priority (critical asset types first),
        then due time, then registration time.
        """
        now = finite("now", now)
        lease_s = finite("lease_s", lease_s, above=0)
        rows = self._claim_rows({"owner": name("owner", owner),
                                 "limit": limit_of("limit", limit, 1),
                                 "now": now, "expires_at": now + lease_s})
        rows.sort(key=lambda r: (-int(r.get("priority") or 0), r["due"], r["created_at"],
                                 r["task_key"]))
        return [task_of(r) for r in rows]

    def _fenced(self, query: str, key: str, token: int, *, now: float,
                idempotent: bool = False, **params: Any) -> bool:
        params.update(key=key, token=count("token", token), now=finite("now", now))
        return self._statement(query, params, idempotent=idempotent).rowcount == 1

    def checkpoint(self, key: str, token: int, stage: Stage, data: Any, *, now: float) -> bool:
        """Record that ``stage`` finished, with its data (JSON-ready; None is stored as True)."""
        stage = Stage(stage)
        # Idempotent: the same data under the same token, so a write whose connection was lost
        # is sent again rather than leaving the stage to be redone (a second paid call).
        return self._fenced(f"checkpoint_{stage.value}", key, token, now=now, idempotent=True,
                            data=to_json(True if data is None else data, stage.value))

    def complete(self, key: str, token: int, outcome: TaskOutcome,
                 result: Optional[Mapping[str, Any]], *, now: float,
                 review: bool = False) -> bool:
        """PROCESSING -> SUCCEEDED with the outcome and result; ``review`` puts the task in the
        review queue (skipped by policy, or analysed under the confidence threshold)."""
        return self._fenced("complete", key, token, now=now, outcome=TaskOutcome(outcome).value,
                            result=to_json(result, "result"), review_state=_review(review))

    def fail(self, key: str, token: int, error_class: ErrorClass, error: str,
             retry_at: float, *, now: float, attempts: int = 1) -> bool:
        """PROCESSING -> FAILED, due again at ``retry_at``; ``attempts`` (the failed attempts
        of this run, inline retries included) are added to the task's attempt count."""
        return self._fenced("fail", key, token, now=now,
                            error_class=ErrorClass(error_class).value,
                            error=excerpt(error, ERROR_LIMIT),
                            retry_at=finite("retry_at", retry_at),
                            attempts=count("attempts", attempts, minimum=1))

    def defer(self, key: str, token: int, until: float, *, now: float,
              cause: Optional[DeferCause] = None) -> bool:
        """PROCESSING -> DEFERRED until ``until`` without counting an attempt; ``cause``
        DEGRADED marks a photo the degradation ladder holds back."""
        return self._fenced("defer", key, token, now=now, until=finite("until", until),
                            cause=None if cause is None else DeferCause(cause).value)

    def bury(self, key: str, token: int, failure_class: FailureClass, error: str, *,
             now: float) -> bool:
        """PROCESSING -> DEAD with a failure class (a dead letter)."""
        return self._fenced("bury", key, token, now=now,
                            failure_class=FailureClass(failure_class).value,
                            error=excerpt(error, ERROR_LIMIT))

    def renew(self, key: str, token: int, lease_s: float, *, now: float) -> bool:
        """Extend a live lease to ``now + lease_s`` (fenced: False when the lease was lost)."""
        now = finite("now", now)
        return self._fenced("renew", key, token, now=now, idempotent=True,
                            expires_at=now + finite("lease_s", lease_s, above=0))

    def complete_with_asset(self, key: str, token: int, outcome: TaskOutcome,
                            result: Optional[Mapping[str, Any]], asset: AssetRow, *,
                            now: float, review: bool = False) -> bool:
        """:meth:`complete` and the task's ``asset_condition`` row in one transaction.

        Either both are written or neither: a stale token (the lease was lost) writes no asset
        row, and a failure between the two statements rolls both back. Returns whether the
        task was completed.
        """
        params = {"key": key, "token": count("token", token), "now": finite("now", now),
                  "outcome": TaskOutcome(outcome).value, "result": to_json(result, "result"),
                  "review_state": _review(review)}
        row = asset_params(asset, now=params["now"])

        def work(tx: Tx) -> bool:
            tx.run("asset_upsert", row)
            if tx.run("complete", params).rowcount == 1:
                return True
            raise _Stale()

        try:
            return self._transact(work)
        except _Stale:
            return False

    # -- compensation ------------------------------------------------------------------------
    def reap_expired(self, max_attempts: int, *, now: float) -> ReapResult:
        """Return expired leases to PENDING, counting the lost attempt.

        A task whose attempt count reaches ``max_attempts`` with that attempt goes DEAD with
        failure class BUDGET instead.
        """
        params = {"now": finite("now", now),
                  "max_attempts": limit_of("max_attempts", max_attempts, 1)}

        def work(tx: Tx) -> ReapResult:
            # the burial last: its metric counts (triggers) are the last locks the
            # transaction takes, so it waits on no task row while holding a count
            requeued = tx.run("reap_requeue", params).rowcount
            return ReapResult(requeued=requeued, buried=tx.run("reap_bury", params).rowcount)

        return self._transact(work)

    def requeue(self, keys: Optional[Iterable[str]] = None,
                failure_class: Optional[FailureClass] = None, force: bool = False, *,
                now: float) -> int:
        """DEAD -> PENDING for the given keys or failure class (both: keys of that class).

        A requeued task starts a fresh life: attempts reset, the previous error (class and
        text), lease holder and lease expiry cleared; checkpoints are kept (it does not redo
        finished stages). Evidence (INVALID_PAYLOAD and UNKNOWN_SERVICE: a body that never
        became a submission) is skipped unless ``force=True``. Returns how many rows moved.
        Raises ConfigurationError when neither keys nor a class is given, or for an evidence
        class unforced.
        """
        now = finite("now", now)
        klass = None if failure_class is None else FailureClass(failure_class).value
        force = bool(force)
        if klass is not None and FailureClass(klass).evidence and not force:
            raise ConfigurationError("failure_class", klass, f"{klass} dead letters are "
                                     "evidence, not tasks: requeue them only with force=True")
        if keys is None:
            if klass is None:
                raise ConfigurationError("keys", None, "requeue needs keys or a failure_class")
            return self._statement("requeue_class", {"now": now, "failure_class": klass,
                                                     "force": force}).rowcount
        wanted = [name("keys[]", k) for k in ([keys] if isinstance(keys, str) else keys)]

        def work(tx: Tx) -> int:
            return sum(tx.run("requeue_key", {"now": now, "key": k, "failure_class": klass,
                                              "any_class": klass is None,
                                              "force": force}).rowcount
                       for k in dict.fromkeys(wanted))

        return self._transact(work)

    # -- reading -----------------------------------------------------------------------------
    def get(self, key: str) -> Optional[TaskRecord]:
        """One row, or None."""
        rows = self._statement("get", {"key": key}, write=False).rows
        return record_of(rows[0]) if rows else None

    def counts(self) -> Dict[str, int]:
        """``{status: n}`` with all six statuses present."""
        out = {s.value: 0 for s in Status}
        for row in self._statement("counts", write=False).rows:
            out[row["status"]] = int(row["n"])
        return out

    def backlog(self, limit: Optional[int] = None) -> int:
        """Tasks in progress (PENDING, PROCESSING, FAILED, DEFERRED), at most ``limit``.

        Counted through the in-progress index alone, never past ``limit`` entries (None: all);
        cheap at any table size, unlike :meth:`counts`. Raises ConfigurationError for a negative
        limit.
        """
        cap = NO_LIMIT if limit is None else limit_of("limit", limit, 0)
        rows = self._statement("backlog", {"count_limit": cap}, write=False).rows
        return int(rows[0]["n"])

    def dead_letters(self) -> Dict[str, int]:
        """``{failure_class: n}`` over DEAD rows, every failure class present."""
        out = {f.value: 0 for f in FailureClass}
        for row in self._statement("dead_letters", write=False).rows:
            out[row["failure_class"] or "UNKNOWN"] = int(row["n"])
        return out

    def completed_since(self, since: float) -> int:
        """Tasks an engine took to SUCCEEDED or DEAD at or after ``since`` (the measured
        drain); the dead letter of a body that never became a task is no drained work."""
        rows = self._statement("completed_since", {"since": finite("since", since)},
                               write=False).rows
        return int(rows[0]["n"])

    # -- call log, anomalies, config -----------------------------------------------------------
    def record_call(self, call: CallRecord) -> None:
        """Append one outbound call to ``ai_call_log``.

        Sent again on a new connection when its own was lost: the call was made (and a paid
        answer waits on this row to be kept), so a row twice in the rare case where the lost
        connection had committed it is the lesser harm."""
        phases = {str(k): finite(f"phases[{k}]", v) for k, v in call.phases.items()}
        self._statement("record_call", {
            "service": name("service", call.service),
            "started_at": finite("started_at", call.started_at),
            "duration_s": finite("duration_s", call.duration_s),
            "error_class": None if call.error_class is None else str(
                getattr(call.error_class, "value", call.error_class)),
            "status_code": call.status_code, "retry": bool(call.retry),
            "trace_id": call.trace_id, "task_key": call.task_key,
            "connect_s": phases.get("connect"), "ttfb_s": phases.get("ttfb"),
            "body_s": phases.get("body"), "phases": to_json(phases or None, "phases"),
            "down": bool(call.down)},
            idempotent=True)

    def call_window(self, service: str, since: float, slow_s: float) -> CallWindow:
        """Calls, failures, slow calls (duration >= ``slow_s``) and retries since ``since``."""
        row = self._statement("call_window", {
            "service": service, "since": finite("since", since),
            "slow_s": finite("slow_s", slow_s)}, write=False).rows[0]
        return CallWindow(calls=int(row["calls"]), failures=int(row["failures"]),
                          slow=int(row["slow"]), retries=int(row["retries"]))

    def record_anomaly(self, anomaly: FormatAnomaly) -> None:
        """Append one ``format_anomaly`` row (the excerpt redacted and truncated again)."""
        self._statement("record_anomaly", {
            "provider": name("provider", anomaly.provider),
            "observed_at": finite("observed_at", anomaly.observed_at),
            "errors": to_json([redact_text(e) for e in anomaly.errors], "errors"),
            "excerpt": excerpt(anomaly.excerpt, EXCERPT_LIMIT),
            "model_version": anomaly.model_version, "task_key": anomaly.task_key,
            "trace_id": anomaly.trace_id})

    def recent_anomalies(self, since: float, limit: int = 100) -> List[FormatAnomaly]:
        """Format anomalies observed at or after ``since``, newest first, at most ``limit``."""
        rows = self._statement("recent_anomalies", {"since": finite("since", since),
                                                    "limit": limit_of("limit", limit, 1)},
                               write=False).rows
        return [FormatAnomaly(provider=r["provider"], observed_at=float(r["observed_at"]),
                              errors=tuple(from_json(r["errors"])), excerpt=r["excerpt"],
                              model_version=r["model_version"], task_key=r["task_key"],
                              trace_id=r["trace_id"]) for r in rows]

    def get_config(self) -> Dict[str, str]:
        """The ``resilience_config`` table as ``{name: value}`` (strings, as stored)."""
        return {r["name"]: r["value"] for r in self._statement("get_config", write=False).rows}

    def set_config(self, values: Mapping[str, str], *, now: float) -> None:
        """Upsert settings into ``resilience_config`` (all or none). A secret setting
        (``vision.key``, ``arcgis.client_secret``...) is refused: secrets never reach the
        ledger."""
        now = finite("now", now)
        items: List[Tuple[str, str]] = [(name("name", k), str(v)) for k, v in values.items()]
        for setting, _ in items:
            if setting.strip().lower() in SECRET_SETTINGS:
                raise ConfigurationError(setting, REDACTED, "is a secret and is never stored in "
                                         "the ledger: give it as a FAIR_* variable or a "
                                         "published parameter")

        def work(tx: Tx) -> None:
            for setting, value in items:
                tx.run("set_config", {"name": setting, "value": value, "now": now})

        self._transact(work)
