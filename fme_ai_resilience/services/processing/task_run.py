"""One claimed task's pass through the processor's stages, with its task-wide attempt budget.

:class:`TaskRun` is what the processor runs per task: admission (ladder and breaker), the photo
list of a webhook that carried none, download, analysis (the analysis cache or one Vision AI
call, validated), and the sink's write-back and completion. Everything it works with comes in
one frozen :class:`Collaborators` value (the store, clock, routes, breakers, pacers, ladder,
retry policy, sink, downloader, token and photo lister). Each stage runs under the retry
engine; a stage that cannot finish now ends the task's work by moving its row (parked FAILED or
DEFERRED, or buried DEAD) and raising :class:`Parked`, which the processor turns into the
task's :class:`TaskResult`.
"""
from __future__ import annotations

import enum
import hashlib
import logging
from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from ...core.resilience.breaker import BreakerState, CircuitState, Permit, effective_state
from ...core.resilience.classification import CLASSIFICATION
from ...core.clock import Deadline
from ...core.resilience.degrade import Admission, Level, Model
from ...core.errors import (DownloadError, ErrorClass, FailureClass, ResilienceError, StoreError,
                            UnsafeURL)
from ...core.ledger import CallRecord, DeferCause, LayerStatus, Stage, Status, Task, TaskOutcome
from ...core.text.redact import redact_text
from ...core.resilience.retry import DecisionKind, RetryDecision, RetryHistory
from ..intake.expansion import expand_within
from ...core.vision.validate import VerdictKind, validate
from .collaborators import Collaborators, VisionRoute
from ..resilience.retry import Retrying, classify_exception
from ..resilience.breaker import CircuitBreaker
from .sinks import Conclusion
from ..vision import Photo, VisionOutcome

__all__ = ["TaskRun", "TaskResult", "Parked", "analysis_fingerprint"]

log = logging.getLogger("fme_ai_resilience.processor")


def analysis_fingerprint(photo_sha256: str, model: str) -> str:
    """The analysis-cache key: the photo's content and the model configuration."""
    return f"{photo_sha256}|{model}"


@dataclass(frozen=True)
class TaskResult:
    """What became of one claimed task in a batch (the FME adapter emits one feature each).

    ``status`` is the task's status afterwards (SUCCEEDED, FAILED, DEFERRED, DEAD, or PENDING
    for a task handed back unstarted); ``retry_at`` when a parked task is due again.
    """

    key: str
    status: Status
    trace_id: str
    outcome: Optional[TaskOutcome] = None
    condition: Optional[str] = None
    confidence: Optional[float] = None
    error_class: Optional[ErrorClass] = None
    failure_class: Optional[FailureClass] = None
    retry_at: Optional[float] = None
    reused: bool = False
    reason: str = ""

    def as_dict(self) -> Dict[str, Any]:
        """JSON-ready: enums by value, unset fields left out."""
        out: Dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if value is None or value == "":
                continue
            out[name] = value.value if isinstance(value, enum.Enum) else value
        return out


@dataclass(frozen=True)
class _Failed:
    """A failed attempt of a stage, as the retry engine reads outcomes."""

    error_class: ErrorClass
    detail: str
    retry_after_s: Optional[float] = None


class Parked(ResilienceError):
    """Ends the work on a task: its row was already moved (parked, deferred or buried)."""

    def __init__(self, result: TaskResult) -> None:
        super().__init__(result.reason)
        self.result = result


class TaskRun:
    """One task's pass through the stages, with its task-wide attempt budget."""

    def __init__(self, collaborators: Collaborators, task: Task) -> None:
        self.p = collaborators
        self.task = task
        self.failures = 0   # failed attempts in this run (inline retries included)
        self.started = collaborators.clock.now()
        self.deadline = None if collaborators.policy.deadline_s is None else Deadline(
            self.started, collaborators.policy.deadline_s)
        self.calls: Dict[str, int] = {}   # Vision AI calls this run made, per service
        self.retrying = Retrying(collaborators.policy, clock=collaborators.clock,
                                 rng=collaborators.rng, classifier=_classify,
                                 gate=collaborators.gate)

    # -- stages ----------------------------------------------------------------------------------
    def through(self) -> TaskResult:
        p, task = self.p, self.task
        payload = task.payload
        if payload.get("attachments_unknown"):
            return self._expand()
        level_model = self._admission()
        if level_model is None:
            return self._skip(f"skipped at degradation {p.ladder.level().label} by the "
                              "deployment's policy (degrade.non_critical_types, "
                              "when_degraded=skip): manual review")
        analyzed = task.checkpoint(Stage.ANALYZED)
        if analyzed is None:
            photo = self._stage("download", self._fetch)
            analyzed = self._analysis(photo, p.routes[level_model])
        return self._finish(analyzed)

    def _admission(self) -> Optional[Model]:
        """The model to call, or None to skip by the deployment's policy; holds the task back
        when the ladder does, defers it when the breaker of the model refuses."""
        p, task = self.p, self.task
        if task.done(Stage.ANALYZED):
            return Model.PRIMARY   # nothing left to ask: only the write-back remains
        ladder = p.ladder
        decision = ladder.admission(task.payload.get("asset_type"), task.key)
        if decision is Admission.SKIP:
            return None
        if decision is Admission.DEFER:
            self._hold(ladder.level())
        model = ladder.model()
        breaker = p.breakers[p.routes[model].service]
        refusal = breaker.refusal()   # claims no probe: the call itself does (_ask)
        if refusal is not None:
            self._flag_awaiting()
            self._defer(self._in_line(refusal.retry_after_s),
                        f"circuit of {breaker.service} is open")
        return model

    def _fetch(self) -> Any:
        p, task = self.p, self.task
        url = task.payload.get("attachment_url")
        if not url:
            return _Failed(ErrorClass.NOT_FOUND, "the submission names no photo URL")
        now = p.clock.now()
        token = p.token(now) if p.token else None
        started, mono = now, p.clock.monotonic()
        try:
            photo = p.download(url, token)
        except (DownloadError, UnsafeURL) as exc:
            self._log_call("photos", started, p.clock.monotonic() - mono, exc.error_class,
                           getattr(exc, "status_code", None))
            raise
        self._log_call("photos", started, p.clock.monotonic() - mono, None, 200)
        digest = hashlib.sha256(photo.content).hexdigest()
        self._checkpoint(Stage.DOWNLOADED, {"sha256": digest, "size": len(photo.content),
                                            "content_type": photo.content_type})
        return (photo, digest)

    def _checkpoint(self, stage: Stage, data: Mapping[str, Any]) -> None:
        """Record a finished stage; a lease lost meanwhile ends the work here (the task is
        another worker's now: writing back on would be a second write)."""
        p, task = self.p, self.task
        if not p.store.checkpoint(task.key, task.lease_token, stage, data, now=p.clock.now()):
            raise Parked(TaskResult(task.key, Status.PROCESSING, task.trace_id,
                                    reason=f"lease lost before the {stage.value} checkpoint"))

    def _analysis(self, fetched: Tuple[Photo, str],
                  route: VisionRoute) -> Mapping[str, Any]:
        p, task = self.p, self.task
        photo, digest = fetched
        fingerprint = analysis_fingerprint(digest, route.model)
        cached = p.store.cached_analysis(fingerprint)
        if cached is not None:
            p.store.note_analysis_reused(fingerprint, now=p.clock.now())
            assessment = cached["assessment"]
            reused = True
        else:
            try:
                outcome = self._stage("analysis",
                                      lambda: self._ask(route, photo.content, fingerprint))
            except Parked:
                p.store.release_analysis(fingerprint, task.key, token=task.lease_token)
                raise
            assessment = outcome.assessment.to_dict()
            p.store.remember_analysis(fingerprint, {"assessment": assessment,
                                                    "service": route.service},
                                      now=p.clock.now())
            reused = False
        verdict = validate(assessment, p.settings.validation, task.payload.get("asset_type"))
        analyzed = {"assessment": assessment, "verdict": verdict.kind.value,
                    "reasons": list(verdict.reasons), "fingerprint": fingerprint,
                    "sha256": digest, "reused": reused, "service": route.service}
        self._checkpoint(Stage.ANALYZED, analyzed)
        return analyzed

    def _claim(self, fingerprint: str) -> None:
        """Claim the photo's analysis for this lease, for one call: while another lease is
        asking the Vision AI about the same photo (another task with the same bytes, or an
        earlier holder of this task whose lease lapsed mid-call), wait for its answer
        instead of paying for a second one: DEFERRED for ``retry.max_inline_wait_s``, no
        attempt counted. The claim runs out when that call must have ended (the longest
        inline wait for a call slot plus the call's whole time budget)."""
        p, task = self.p, self.task
        now = p.clock.now()
        until = now + p.settings.retry.max_inline_wait_s + p.settings.timeouts.total_s
        if not p.store.claim_analysis(fingerprint, task.key, until, token=task.lease_token,
                                      now=now):
            self._defer(p.settings.retry.max_inline_wait_s, "the same photo is being "
                        "analysed under another lease: its answer will be reused",
                        error_class=None)

    def _ask(self, route: VisionRoute, image: bytes, fingerprint: str) -> Any:
        """One Vision AI call under the photo's analysis claim, the breaker and the service's
        pace: logged, judged, its anomaly recorded."""
        p, task = self.p, self.task
        self._claim(fingerprint)   # first: a refused claim must hold no pace slot or probe
        pacer = p.pacers[route.service]
        wait = pacer.wait_s(p.settings.retry.max_inline_wait_s)
        if wait > p.settings.retry.max_inline_wait_s:
            # the service's next slot is far off: park without an attempt, as behind a breaker
            return _Failed(ErrorClass.CIRCUIT_OPEN, f"{route.service} is paced after a 429: "
                           f"its next call slot is in {wait:.1f} s", wait)
        if wait > 0:
            p.clock.sleep(wait)
        breaker = p.breakers[route.service]
        permit = breaker.allow()
        if not permit:
            return self._wait_for_service(f"circuit of {route.service} is open",
                                          self._in_line(permit.retry_after_s))
        started = p.clock.now()
        outcome: VisionOutcome = route.client.analyze(image, task.trace_id)
        if outcome.error_class is ErrorClass.RATE_LIMITED:
            pacer.refused(outcome.retry_after_s)
        elif outcome.ok:
            pacer.passed()
        retry = bool(task.attempt_count or self.calls.get(route.service))
        self.calls[route.service] = self.calls.get(route.service, 0) + 1
        after = breaker.record(permit, outcome.to_call_record(route.service, started,
                                                              retry=retry, task_key=task.key))
        if outcome.error_class in _OUTAGE_CLASSES and self._says_down(breaker, permit, after):
            # A failed probe, or the failure that opened the circuit, says the service is
            # down, not that this photo is bad: the task waits for the next probe, no
            # attempt spent, so an outage of any length spends no photo's budget. Unless
            # the service's latest calls were all about this photo, or it answered others
            # after this photo failed: then it is the photo, and the attempt counts, so the
            # photos the service never answers cannot keep the circuit open for ever.
            # It waits a moment past the next probe, so that probe is another photo's.
            return self._wait_for_service(f"{route.service} is down "
                                          f"({outcome.error_class.value}): waiting for its "
                                          "next probe", breaker.retry_after_s() + _BEHIND_S)
        if outcome.error_class is ErrorClass.BAD_FORMAT:
            anomaly = outcome.format_anomaly(p.clock.now(), task.key)
            if anomaly is not None:
                p.store.record_anomaly(anomaly)
            if self._says_down(breaker, permit, after):
                # The model drifted: the photo waits for the fix, neither dead nor paid again.
                # (A photo the model alone answers out of schema spends its attempts.)
                return self._wait_for_service(f"{route.service} answers out of schema "
                                              "(model drift): waiting for the fix and the "
                                              "next probe", breaker.retry_after_s() + _BEHIND_S)
            return outcome
        if not outcome.ok:
            return outcome
        verdict = validate(outcome.assessment, p.settings.validation,
                           task.payload.get("asset_type"))
        if verdict.invalid:
            anomaly = verdict.anomaly(provider=outcome.provider, observed_at=p.clock.now(),
                                      excerpt=outcome.excerpt,
                                      model_version=outcome.model_version, task_key=task.key,
                                      trace_id=task.trace_id)
            p.store.record_anomaly(anomaly)  # type: ignore[arg-type]
            return _Failed(ErrorClass.BAD_FORMAT, "; ".join(verdict.reasons))
        return outcome

    def _says_down(self, breaker: CircuitBreaker, permit: Permit,
                   after: BreakerState) -> bool:
        """Whether this call's failure says the service (or its model) is down: a failed
        probe, or the failure that opened the circuit, unless the service's latest calls
        blame this photo (:meth:`CircuitBreaker.down_for_others`)."""
        return (permit.is_probe or effective_state(after) is CircuitState.OPEN) \
            and breaker.down_for_others(self.task.key)

    def _in_line(self, wait_s: float) -> float:
        """The wait of a photo the open circuit refused: until the next probe, at a random
        place in the line behind it (within ``_LINE_S``), so that no photo, a photo the
        service never answers least of all, stands first in every probe round."""
        return wait_s + self.p.rng.uniform(0.0, _LINE_S)

    def _wait_for_service(self, reason: str, wait_s: float) -> "_Failed":
        """The photo waits behind an open circuit (an outage, a drifted model): no attempt
        spent, and shown on the layer as awaiting analysis (written once)."""
        self._flag_awaiting()
        return _Failed(ErrorClass.CIRCUIT_OPEN, reason, wait_s)

    def _flag_awaiting(self) -> None:
        """Show the photo on the layer as awaiting analysis, once per task."""
        if self.task.layer_flag is not LayerStatus.AWAITING_ANALYSIS:
            self._flag(LayerStatus.AWAITING_ANALYSIS)

    def _finish(self, analyzed: Mapping[str, Any]) -> TaskResult:
        assessment = analyzed["assessment"]
        outcome = TaskOutcome.ACCEPTED if analyzed["verdict"] == VerdictKind.ACCEPTED.value \
            else TaskOutcome.REVIEW
        result = {"condition": assessment["condition"],
                  "confidence": assessment["confidence"], "labels": assessment.get("labels"),
                  "model_version": assessment.get("model_version"),
                  "provider": assessment.get("provider"), "verdict": analyzed["verdict"],
                  "reasons": analyzed["reasons"], "reused": analyzed["reused"],
                  "sha256": analyzed["sha256"], "outcome": outcome.value}
        return self._complete(outcome, result)

    def _skip(self, reason: str) -> TaskResult:
        return self._complete(TaskOutcome.SKIPPED, {"outcome": TaskOutcome.SKIPPED.value,
                                                    "reason": reason, "reused": False})

    def _complete(self, outcome: TaskOutcome, result: Dict[str, Any]) -> TaskResult:
        task = self.task
        conclusion = Conclusion(task, outcome, result)
        done = self._stage("write-back", lambda: self._deliver(conclusion))
        status = Status.SUCCEEDED if done else Status.PROCESSING
        return TaskResult(task.key, status, task.trace_id, outcome=outcome,
                          condition=result.get("condition"),
                          confidence=result.get("confidence"), reused=bool(result["reused"]),
                          reason="" if done else "lease lost before completion")

    def _deliver(self, conclusion: Conclusion) -> Any:
        return self.p.sink.finish(conclusion, store=self.p.store, now=self.p.clock.now())

    def _expand(self) -> TaskResult:
        """A webhook without a photo list: list the feature's photos, one task each."""
        p, task = self.p, self.task
        lister = p.lister
        if lister is None:
            return self._bury(FailureClass.BAD_REQUEST,
                              "the webhook carried no photo list and no layer lister is set")
        listed = self._stage("photo list", lambda: list(lister(task)))
        registered, left = expand_within(listed, p.settings, store=p.store, now=p.clock.now())
        reason = f"the feature's {len(registered)} photo(s) registered as their own tasks"
        if left:
            reason += (f"; {left} more left for reconciliation (intake.max_attachments, "
                       "intake.park_ceiling)")
        return self._complete(TaskOutcome.SKIPPED, {
            "outcome": TaskOutcome.SKIPPED.value, "reused": False, "reason": reason,
            "expanded": registered, "left_for_reconciliation": left})


    # -- the retry engine around a stage ---------------------------------------------------------
    def _stage(self, name: str, attempt: Callable[[], Any]) -> Any:
        """Run one stage's attempt under the policy; returns its value, or ends the task."""
        history = RetryHistory(prior_attempts=self.task.attempt_count + self.failures,
                               prior_by_class=_prior(self.task))
        run = self.retrying.run(_guarded, attempt, history=history, deadline=self.deadline)
        self.failures += sum(1 for a in run.decision.history.attempts
                             if a.error_class is not None
                             and CLASSIFICATION[a.error_class].counts_attempt)
        if run.ok:
            return run.value
        decision = run.decision
        detail = f"{name}: {getattr(run.value, 'detail', decision.reason)}"
        if decision.kind is DecisionKind.GIVE_UP:
            return self._bury(decision.failure_class or FailureClass.BUDGET, detail, decision)
        return self._park(decision, detail)

    def _park(self, decision: RetryDecision, detail: str) -> TaskResult:
        p, task = self.p, self.task
        until = decision.until if decision.until is not None else p.clock.now()
        error_class = decision.error_class or ErrorClass.SERVER_ERROR
        if CLASSIFICATION[error_class].counts_attempt and self.failures:
            p.store.fail(task.key, task.lease_token, error_class, detail, until,
                         now=p.clock.now(), attempts=self.failures)
            status = Status.FAILED
        else:
            p.store.defer(task.key, task.lease_token, until, now=p.clock.now())
            status = Status.DEFERRED
        raise Parked(TaskResult(task.key, status, task.trace_id, error_class=error_class,
                                 retry_at=until, reason=detail))

    def _hold(self, level: Level) -> None:
        """Hold the photo back for the ladder: owed, DEFERRED with cause degraded until the
        ladder steps down (which makes it due at once) or ``degrade.hold_s`` passes, and shown
        on the layer as awaiting analysis (written once, not on every deferral)."""
        p, task = self.p, self.task
        self._flag_awaiting()
        now = p.clock.now()
        until = now + p.settings.degrade.hold_s
        p.store.defer(task.key, task.lease_token, until, now=now, cause=DeferCause.DEGRADED)
        raise Parked(TaskResult(task.key, Status.DEFERRED, task.trace_id, retry_at=until,
                                reason=f"held back at degradation {level.label}: awaiting "
                                       "analysis"))

    def _flag(self, value: LayerStatus) -> None:
        """Show ``value`` on the layer through the sink and remember it; a write that fails
        is logged and tried again at the next deferral (the deferral itself goes ahead)."""
        p, task = self.p, self.task
        flag = getattr(p.sink, "flag", None)
        if flag is None:
            return
        try:
            flag(Conclusion(task, None, layer=value), store=p.store, now=p.clock.now())
        except StoreError:
            raise
        except Exception as exc:  # noqa: BLE001 - classified, re-raised when unknown
            if _classify(exc) is None:
                raise
            log.warning("task %s: the layer could not be told %s yet: %s", task.key,
                        value.value, redact_text(str(exc)))
            return
        p.store.flag_layer(task.key, task.lease_token, value, now=p.clock.now())

    def _defer(self, wait_s: float, reason: str,
               error_class: Optional[ErrorClass] = ErrorClass.CIRCUIT_OPEN) -> None:
        p, task = self.p, self.task
        until = p.clock.now() + max(0.0, wait_s)
        p.store.defer(task.key, task.lease_token, until, now=p.clock.now())
        raise Parked(TaskResult(task.key, Status.DEFERRED, task.trace_id,
                                 error_class=error_class, retry_at=until, reason=reason))

    def _bury(self, failure_class: FailureClass, detail: str,
              decision: Optional[RetryDecision] = None) -> TaskResult:
        p, task = self.p, self.task
        p.store.bury(task.key, task.lease_token, failure_class, detail, now=p.clock.now())
        raise Parked(TaskResult(task.key, Status.DEAD, task.trace_id,
                                 error_class=decision.error_class if decision else None,
                                 failure_class=failure_class, reason=detail))

    def _log_call(self, service: str, started: float, duration_s: float,
                  error_class: Optional[ErrorClass], status: Optional[int]) -> None:
        self.p.store.record_call(CallRecord(
            service=service, started_at=started, duration_s=max(0.0, duration_s),
            error_class=None if error_class is None else ErrorClass(error_class).value,
            status_code=status, retry=bool(self.task.attempt_count or self.failures),
            trace_id=self.task.trace_id, task_key=self.task.key))


#: How far behind the next probe the photos the open circuit refused line up, in random order.
_LINE_S = 1.0
#: How far behind the next probe a photo whose probe failed waits: behind that line, so the
#: next probe is another photo's, and a photo the service never answers is told from a
#: service that is down.
_BEHIND_S = 1.5

#: What a service that is down answers (the breaker counts them; a 429 sets the pace instead,
#: and an answer out of schema is the model's, not the service's availability).
_OUTAGE_CLASSES = frozenset({ErrorClass.CONNECT_TIMEOUT, ErrorClass.CONNECTION_ERROR,
                             ErrorClass.TTFB_TIMEOUT, ErrorClass.BODY_TIMEOUT,
                             ErrorClass.SERVER_ERROR})


def _guarded(attempt: Callable[[], Any]) -> Any:
    """``attempt()``, with the failures a stage can have turned into outcomes: an error that
    carries its class (a download, ArcGIS or token failure) or a transport exception. The
    ledger's own errors and anything unknown propagate."""
    try:
        return attempt()
    except StoreError:
        raise
    except Exception as exc:  # noqa: BLE001 - classified below, re-raised when unknown
        error_class = _classify(exc)
        if error_class is None:
            raise
        return _Failed(error_class, redact_text(str(exc)), getattr(exc, "retry_after_s", None))


def _prior(task: Task) -> Mapping[ErrorClass, int]:
    """What the ledger knows of earlier runs per class: the last error class, once."""
    return {task.error_class: 1} if task.error_class is not None and task.attempt_count else {}


def _classify(exc: BaseException) -> Optional[ErrorClass]:
    """The library's errors carry their class; everything else as the retry engine knows it."""
    error_class = getattr(exc, "error_class", None)
    if isinstance(exc, ResilienceError) and error_class is not None:
        return ErrorClass(error_class)
    return classify_exception(exc)
