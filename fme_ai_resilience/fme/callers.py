"""The PythonCaller classes of the three workspaces: WS-01 intake, WS-02 processor, WS-03
compensator.

Each has the PythonCaller class interface (FME makes it with no arguments, calls
``input(feature)`` per feature and ``close()`` at the end, and injects ``self.pyoutput``;
:class:`~fme_ai_resilience.fme.caller_base.CallerBase` says how settings, the ledger, the log
and the output features work). A workspace's script only subclasses one::

    from fme_ai_resilience.fme import ProcessorCaller

    class FeatureProcessor(ProcessorCaller):
        pass

* :class:`IntakeCaller` registers the webhook body it is given (the feature's ``message``
  attribute, or the ``FAIR_WEBHOOK_BODY`` published parameter; the headers from
  ``webhook.headers`` or ``FAIR_WEBHOOK_HEADERS``, a JSON object) and emits one feature per
  photo with what the ledger answered.
* :class:`ProcessorCaller` runs one processor batch per input feature (the schedule's
  Creator feature) and emits one feature per task; with ``writeback.sink=collect`` each
  carries the conclusion, for the workspace's own writers.
* :class:`CompensatorCaller` runs one compensation pass per input feature and emits its
  report, then one feature per notification (for an Emailer).

``<Rejected>`` is only for what no retry can fix: a configuration that cannot work (a bad
value, or no photo host or layer at all, checked before the first feature is handled), a body
that is invalid or names a feature service the deployment does not serve (both kept as dead
letters), and a task's dead letter whose cause the compensator never requeues by itself.
Everything retryable is parked in the ledger and leaves through the normal port with its
status. The attributes of every kind of feature are in :data:`ATTRIBUTES` and
docs/fme-flow.md. Importing this module needs neither ``fme`` nor ``fmeobjects``.
"""
from __future__ import annotations

import json
import math
import os
import socket
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..core.config.readiness import require_workable
from ..core.errors import ConfigurationError, ResilienceError, StoreError
from .caller_base import (ATTRIBUTES, CONCLUSION_ATTRIBUTES, CONFIGURATION_CODE, REJECTED_TAG,
                       CallerBase, fme_time, injected, is_null)
from ..core.intake.keys import trace_id_for
from ..core.ledger import Status
from ..core.fme.parameters import BODY_PARAMETER, COMPENSATOR, HEADERS_PARAMETER, INTAKE, PROCESSOR
from ..core.text.redact import redact_text
from ..services.intake.webhook import receive
from ..services.observe.signals import read_signals
from ..services.pipeline import build_compensator, build_processor
from ..services.processing.processor import BatchReport, Stop
from ..services.processing.sinks import CollectingSink
from ..core.config.settings import Settings
from ..store import SqlStore
from ..core.intake.survey123 import parse_webhook

__all__ = ["IntakeCaller", "ProcessorCaller", "CompensatorCaller", "ATTRIBUTES",
           "CONCLUSION_ATTRIBUTES", "REJECTED_TAG", "CONFIGURATION_CODE", "BODY_PARAMETER",
           "HEADERS_PARAMETER", "injected"]


class IntakeCaller(CallerBase):
    """WS-01: registers one webhook body per input feature; one output feature per photo.

    The body is the feature's :attr:`body_attribute` (``message``, as the Automation's
    reader gives it) or else the ``FAIR_WEBHOOK_BODY`` published parameter; the headers are
    :attr:`headers_attribute` (``webhook.headers``) or ``FAIR_WEBHOOK_HEADERS``, a JSON object.
    A body that is invalid (400) or names a feature service the deployment does not serve
    (422) leaves through ``<Rejected>``, kept in the ledger as a dead letter.
    """

    workspace = INTAKE
    body_attribute = "message"
    headers_attribute = "webhook.headers"
    _warned_token = False

    def _configure(self, settings: Settings, *, store: SqlStore) -> None:
        # a deployment that could only bury every photo registers none (docs/fme-flow.md)
        require_workable(settings, writes=False)

    def _given(self, feature: Any, attribute: str, parameter: str) -> str:
        value = feature.getAttribute(attribute)
        if value not in (None, "") and not is_null(feature, attribute):
            return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
        return self._macros.get(parameter, "")

    def _from_parameter(self, feature: Any) -> bool:
        value = feature.getAttribute(self.body_attribute)
        return value in (None, "") or is_null(feature, self.body_attribute)

    def _warn_token_in_parameter(self, feature: Any, submissions: Sequence[Any]) -> None:
        """Once per job: a body holding the submitter's portal token came in through the
        published parameter, which FME writes into the job log."""
        if self._warned_token or not any(s.portal_token for s in submissions[:1]) \
                or not self._from_parameter(feature):
            return
        self._warned_token = True
        self._log("WARN", f"the webhook body carries the submitter's portal token and came in "
                          f"through the published parameter {BODY_PARAMETER}, which FME writes "
                          f"into the job log: turn off the portal info in the Survey123 webhook "
                          f"(the library needs no submitter token) or send the webhook to the "
                          f"library's gateway (docs/fme-flow.md, Secrets)")

    def _webhook(self, feature: Any) -> Tuple[str, Dict[str, str]]:
        body = self._given(feature, self.body_attribute, BODY_PARAMETER)
        if not body.strip():
            raise ConfigurationError(BODY_PARAMETER, "", (
                f"no webhook body: map the Automation's message to {BODY_PARAMETER}, or give "
                f"the feature a {self.body_attribute!r} attribute"))
        raw = self._given(feature, self.headers_attribute, HEADERS_PARAMETER).strip()
        try:
            headers = json.loads(raw) if raw else {}
        except ValueError:
            headers = None
        if not isinstance(headers, dict):
            self._log("WARN", f"{self.headers_attribute} is not a JSON object: "
                              "the headers are ignored")
            headers = {}
        return body, {str(k): str(v[0] if isinstance(v, list) and v else v)
                      for k, v in headers.items()}

    def _handle(self, feature: Any) -> None:
        arrived = self.clock.now()   # the delivery reached the workspace: intake latency
        body, headers = self._webhook(feature)
        answer = receive(body, headers, self._settings, store=self._ledger(),
                        now=self.clock.now(), received_at=arrived)
        state = str(answer.body.get("status", ""))
        # an ArcGIS sender's refusal is answered 200 (it deactivates webhooks); "refused" says
        refused = answer.body.get("refused", answer.status_code)
        if refused in (400, 422):
            key, reason = str(answer.body.get("dead_letter")), str(answer.body.get("reason"))
            out = self._make("dead_letter", feature, fair_key=key, fair_status=Status.DEAD,
                             fair_failure_class=_FAILURES[refused],
                             fair_answer=state, fair_http_status=answer.status_code,
                             fair_trace_id=trace_id_for(key), fair_reason=reason,
                             fair_delivery_id=answer.body.get("delivery_id"))
            self._log("WARN", f"{answer.status_code} {state}: dead letter {key}: {reason}")
            self._reject(out, _FAILURES[refused], reason)
            return
        self._registered(feature, body, headers, answer.status_code, state,
                         answer.retry_after_s, answer.body.get("reason"),
                         list(answer.registrations))

    def _registered(self, feature: Any, body: str, headers: Mapping[str, str], status: int,
                    state: str, retry_after: Optional[int], reason: Any,
                    registrations: List[Any]) -> None:
        """One feature per photo of the body, with the ledger's answer (None: not stored)."""
        intake = (self._settings or Settings.from_mapping(self._macros, prefix="FAIR_")).intake
        try:
            submissions = parse_webhook(body, headers, max_bytes=intake.max_body_bytes,
                                        max_depth=intake.max_depth,
                                        max_attachments=intake.max_attachments)
        except ResilienceError:
            submissions = []
        if not submissions and registrations:
            self._notifications(feature, status, state, retry_after, reason, registrations)
            return
        self._secrets += tuple(s.portal_token for s in submissions[:1] if s.portal_token)
        self._warn_token_in_parameter(feature, submissions)
        for i, sub in enumerate(submissions):
            reg = registrations[i] if i < len(registrations) else None
            self.pyoutput(self._make(  # type: ignore[attr-defined]
                "registration", feature, fair_key=sub.idempotency_key,
                fair_status=reg.status if reg else None,
                fair_registration=reg.outcome if reg else None,
                fair_outcome=reg.task_outcome if reg else None, fair_answer=state,
                fair_http_status=status, fair_retry_after_s=retry_after,
                fair_trace_id=sub.trace_id, fair_feature_globalid=sub.feature_global_id,
                fair_attachment_globalid=sub.attachment_global_id,
                fair_asset_type=sub.asset_type, fair_event_type=sub.event_type,
                fair_delivery_id=sub.delivery_id, fair_reason=reason))
        first = submissions[0].feature_global_id if submissions else "(unreadable body)"
        line = f"{status} {state}: {len(submissions)} photo(s) of {first}" + (
            f", retry after {retry_after} s" if retry_after is not None else "")
        self._log("INFORM" if status < 300 else "ERROR" if status >= 500 else "WARN", line)

    def _notifications(self, feature: Any, status: int, state: str,
                       retry_after: Optional[int], reason: Any,
                       registrations: List[Any]) -> None:
        """An ArcGIS layer webhook's delivery: one feature per notification kept (its photos
        become tasks when WS-02 reads the layer's changes)."""
        for reg in registrations:
            self.pyoutput(self._make(  # type: ignore[attr-defined]
                "registration", feature, fair_key=reg.key, fair_status=reg.status,
                fair_registration=reg.outcome, fair_outcome=reg.task_outcome,
                fair_answer=state, fair_http_status=status, fair_retry_after_s=retry_after,
                fair_trace_id=trace_id_for(reg.key), fair_event_type="layerChanges",
                fair_reason=reason))
        self._log("INFORM" if status < 300 else "ERROR" if status >= 500 else "WARN",
                  f"{status} {state}: {len(registrations)} layer notification(s)")

    def _ledger_down(self, feature: Any, exc: StoreError) -> None:
        super()._ledger_down(feature, exc)
        try:
            body, headers = self._webhook(feature)
            mean = Settings.from_mapping(self._macros, prefix="FAIR_").intake.mean_processing_s
        except ConfigurationError as refused:
            self._refuse(feature, refused)
            return
        self._registered(feature, body, headers, 503, "unavailable", max(1, math.ceil(mean)),
                         "ledger unreachable: nothing stored", [])


class ProcessorCaller(CallerBase):
    """WS-02: one processor batch per input feature; one output feature per task.

    A task's dead letter whose cause the compensator does not requeue by itself (anything
    but an attempt budget spent) leaves through ``<Rejected>`` with its failure class as
    ``fme_rejection_code``; every other task, parked or done, through the normal port.
    """

    workspace = PROCESSOR
    uses_http = True

    def _configure(self, settings: Settings, *, store: SqlStore) -> None:
        self._sink = CollectingSink() if settings.writeback.sink == "collect" else None
        self._processor = build_processor(
            settings, store=store, sink=self._sink, job_started=self._started,
            owner=f"{self.workspace}@{socket.gethostname()}:{os.getpid()}",
            session=self._session, clock=self.clock)

    def _handle(self, feature: Any) -> None:
        try:
            report = self._processor.run_batch()
        except StoreError as exc:
            report = BatchReport((), Stop.LEDGER_DOWN, redact_text(str(exc)))
        conclusions = {c.task.key: c for c in self._sink.take()} if self._sink else {}
        now = self.clock.now()
        for result in report.results:
            extra, values = self._conclusion(conclusions.get(result.key))
            out = self._make(
                "task", feature, extra, fair_key=result.key, fair_status=result.status,
                fair_outcome=result.outcome, fair_condition=result.condition,
                fair_confidence=result.confidence, fair_error_class=result.error_class,
                fair_failure_class=result.failure_class, fair_retry_at=fme_time(
                    result.retry_at), fair_retry_after_s=None if result.retry_at is None
                else max(0, math.ceil(result.retry_at - now)), fair_trace_id=result.trace_id,
                fair_reused=result.reused, fair_reason=result.reason or None, **values)
            failure = result.failure_class
            if result.status is Status.DEAD and failure and not failure.requeue_automatically:
                self._reject(out, failure.value, result.reason)
                continue   # the processor logged the dead letter at WARNING
            self.pyoutput(out)  # type: ignore[attr-defined]
            if result.status is not Status.DEAD:
                self._log("INFORM", f"task {result.key}: {result.status.value}" + (
                    f" ({result.outcome.value})" if result.outcome else "") + (
                    f": {result.reason}" if result.reason else ""))
        self._log("ERROR" if report.stopped is Stop.LEDGER_DOWN else "INFORM",
                  f"batch: {report.summary()}")

    def _conclusion(self, conclusion: Any) -> Tuple[Sequence[str], Dict[str, Any]]:
        """The attributes a collected conclusion gives its task feature, for FME's writers."""
        if self._sink is None:
            return (), {}
        w = (self._settings or Settings()).writeback
        fields = [w.condition_field, w.confidence_field, w.outcome_field, w.model_field,
                  w.trace_field, w.assessed_at_field] + (
                      [w.parent_field, w.photo_field] if w.table_url else [])
        if conclusion is None:
            return (*CONCLUSION_ATTRIBUTES, *fields), {}
        payload, result = conclusion.payload, conclusion.result
        labels = [str(x[0]) for x in result.get("labels") or ()
                  if isinstance(x, (list, tuple)) and x]   # [name, confidence] pairs
        assessed = fme_time(self.clock.now())
        values = {"fair_feature_globalid": payload.get("feature_global_id"),
                  "fair_attachment_globalid": payload.get("attachment_global_id"),
                  "fair_layer_url": w.table_url or w.layer_url or payload.get("layer_url"),
                  "fair_asset_type": payload.get("asset_type"),
                  "fair_model_version": result.get("model_version"),
                  "fair_labels": ",".join(labels) or None, "fair_assessed_at": assessed,
                  w.condition_field: result.get("condition"),
                  w.confidence_field: result.get("confidence"),
                  w.outcome_field: conclusion.layer, w.model_field: result.get("model_version"),
                  w.trace_field: conclusion.task.trace_id, w.assessed_at_field: assessed,
                  w.parent_field: payload.get("feature_global_id"),
                  w.photo_field: payload.get("attachment_global_id")}
        return (*CONCLUSION_ATTRIBUTES, *fields), values


class CompensatorCaller(CallerBase):
    """WS-03: one compensation pass per input feature: its report feature, then one feature
    per notification (subject and body for an Emailer), each handed over once."""

    workspace = COMPENSATOR
    uses_http = True

    def _configure(self, settings: Settings, *, store: SqlStore) -> None:
        self._compensator = build_compensator(settings, store=store, session=self._session,
                                              clock=self.clock)

    def _handle(self, feature: Any) -> None:
        try:
            report = self._compensator.run()
        except (ConfigurationError, StoreError):
            raise
        except ResilienceError as exc:   # the layer to reconcile against failed: next run
            self._failed(feature, exc)
            return
        d = report.as_dict()
        signals = read_signals(self._settings or Settings(), store=self._ledger(),
                               now=self.clock.now())
        recon = report.reconciled
        self.pyoutput(self._make(  # type: ignore[attr-defined]
            "report", feature, fair_status="DONE", fair_reaped=report.reaped.requeued,
            fair_buried=report.reaped.buried, fair_requeued=sum(report.requeued.values()),
            fair_notified=report.notified, fair_breakers=",".join(
                f"{s}={v}" for s, v in d["breakers"].items()) or None,  # type: ignore[union-attr]
            fair_ladder=d["ladder"], fair_pruned_calls=report.pruned.calls,
            fair_pruned_anomalies=report.pruned.anomalies,
            fair_reconciled=None if recon is None else recon.expected,
            fair_missing=None if recon is None else len(recon.missing),
            fair_backfilled=None if recon is None else recon.backfilled,
            fair_alert_level=signals.level.name, fair_alerts=signals.summary(),
            fair_backlog=signals.backlog, fair_watermark=signals.watermark,
            fair_spend=round(signals.spend, 4), fair_currency=signals.currency))
        for line in report.summary().splitlines():
            self._log("INFORM", line)
        level = signals.level.name
        self._log({"OK": "INFORM", "WARN": "WARN"}.get(level, "ERROR"), signals.summary())
        for note in self._compensator.take_notifications():
            self.pyoutput(self._make(  # type: ignore[attr-defined]
                "notification", feature, fair_notification_id=str(note.id),
                fair_notification_kind=note.kind, fair_key=note.task_key,
                fair_subject=note.subject, fair_body=note.body,
                fair_created_at=fme_time(note.created_at)))

    def _failed(self, feature: Any, exc: BaseException) -> None:
        reason = redact_text(str(exc), self._secrets)
        error_class = getattr(exc, "error_class", None)
        self.pyoutput(self._make(  # type: ignore[attr-defined]
            "report", feature, fair_status="FAILED", fair_reason=reason,
            fair_error_class=error_class if error_class is not None else type(exc).__name__))
        self._log("ERROR", f"compensation failed, the next run tries again: {reason}")

    def _ledger_down(self, feature: Any, exc: StoreError) -> None:
        super()._ledger_down(feature, exc)
        self._failed(feature, exc)


_FAILURES = {400: "INVALID_PAYLOAD", 422: "UNKNOWN_SERVICE"}

