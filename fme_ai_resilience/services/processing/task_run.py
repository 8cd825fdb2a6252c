"""One claimed task's pass through the processor's stages, with its task-wide attempt budget.

:class:`TaskRun` is what the processor runs per task: admission (ladder and breaker), the photo
list of a webhook that carried none, download, analysis (the analysis cache or one Vision AI
call under the fleet's concurrency limit, validated once) and the sink's write-back and
completion. Everything it works with comes in one frozen :class:`Collaborators` value. Each
stage runs under the retry engine and returns its value or a transition
(:mod:`~fme_ai_resilience.services.processing.task_end`: Done, Retry, Wait, Dead, Lost); one method,
:meth:`TaskRun._end`, writes the task's row for the transition and builds its
:class:`TaskResult`.

A paid answer is kept before anything else can fail: the validated assessment goes into the
analysis cache first (tried again while the ledger is away), then the call log, the breaker,
the pace and the concurrency limit hear of the call, then the ``analyzed`` checkpoint; a
holder that lost its way in between leaves the answer to be reused, never paid twice.
"""
from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, replace
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from ...core.resilience.blame import Blame, says_down
from ...core.resilience.classification import CLASSIFICATION
from ...core.clock import Deadline
from ...core.resilience.concurrency import signal_of
from ...core.resilience.degrade import Admission, Model
from ...core.errors import (DownloadError, ErrorClass, FailureClass, LeaseLost, ResilienceError,
                            StoreError, StoreUnavailable, UnsafeURL)
from ...core.ledger import CallRecord, DeferCause, LayerStatus, Stage, Status, Task, TaskOutcome
from ...core.text.redact import redact_text
from ...core.resilience.retry import DecisionKind, RetryHistory
from ...core.vision.validate import Verdict, VerdictKind, validate
from .collaborators import Collaborators, VisionRoute
from ..intake.expansion import expand_within
from .lease import Lease
from ..resilience.retry import Retrying, classify_exception
from .sinks import Conclusion
from .task_end import ENDS, Dead, Done, End, Lost, Retry, TaskResult, Wait
from ..vision import Photo, VisionOutcome

__all__ = ["TaskRun", "TaskResult", "analysis_fingerprint", "keep_s"]

log = logging.getLogger("fme_ai_resilience.processor")


def keep_s(lease_s: float) -> float:
    """How long a paid answer is tried again while the ledger is away before it is given up
    on: a third of the lease (the photo's analysis claim covers that time too, so no other
    holder pays for the photo meanwhile)."""
    return lease_s / 3.0


def analysis_fingerprint(photo_sha256: str, model: str) -> str:
    """The analysis-cache key: the photo's content and the model configuration."""
    return f"{photo_sha256}|{model}"


@dataclass(frozen=True)
class _Failed:
    """A failed attempt of a stage, as the retry engine reads outcomes."""

    error_class: ErrorClass
    detail: str
    retry_after_s: Optional[float] = None


@dataclass(frozen=True)
class _Ended:
    """A stage's attempt that ended the task's run (no outcome for the retry engine)."""

    end: End
    error_class: None = None


@dataclass(frozen=True)
class _Answer:
    """A validated answer: the assessment as stored and its verdict (validated once)."""

    assessment: Mapping[str, Any]
    verdict: Verdict


class TaskRun:
    """One task's pass through the stages, with its task-wide attempt budget."""

    def __init__(self, collaborators: Collaborators, task: Task,
                 lease: Optional[Lease] = None) -> None:
        self.p = collaborators
        self.task = task
        self.lease = lease
        self.failures = 0   # failed attempts in this run (inline retries included)
        self.started = collaborators.clock.now()
        self.deadline = None if collaborators.policy.deadline_s is None else Deadline(
            self.started, collaborators.policy.deadline_s)
        self.calls: Dict[str, int] = {}   # Vision AI calls this run made, per service
        self.photo_ttfb_s: Optional[float] = None   # after a TTFB timeout: this photo's next
        self.retrying = Retrying(collaborators.policy, clock=collaborators.clock,
                                 rng=collaborators.rng, classifier=_classify,
                                 gate=collaborators.gate)

    def through(self) -> TaskResult:
        """Take the task through its stages and write how its run ended."""
        try:
            end = self._run()
        except LeaseLost as lost:
            end = Lost(str(lost))
        return self._end(end)

    # -- the stages --------------------------------------------------------------------------------
    def _run(self) -> End:
        p, task = self.p, self.task
        submission = task.submission
        if submission is None:
            return Dead(FailureClass.BAD_REQUEST, "the stored payload is no submission")
        if submission.attachments_unknown or submission.changes_url:
            return self._expand()
        model = self._admission()
        if isinstance(model, ENDS):
            return model
        route = p.routes[model]
        analyzed = task.checkpoint(Stage.ANALYZED)
        if analyzed is None:
            analyzed = self._known_answer(route)
        if analyzed is None:
            fetched = self._stage("download", self._fetch)
            if isinstance(fetched, ENDS):
                return fetched
            analyzed = self._analysis(fetched, route)
            if isinstance(analyzed, ENDS):
                return analyzed
        return _conclusion(analyzed)

    def _admission(self) -> Any:
        """The model to call, or the run's end: skipped by the deployment's policy, held back
        by the ladder, deferred while the model's breaker refuses."""
        p, task = self.p, self.task
        if task.done(Stage.ANALYZED):
            return Model.PRIMARY   # nothing left to ask: only the write-back remains
        ladder = p.ladder
        decision = ladder.admission(task.submission.asset_type, task.key)
        if decision is Admission.SKIP:
            return Done(TaskOutcome.SKIPPED, {
                "outcome": TaskOutcome.SKIPPED.value, "reused": False,
                "reason": f"skipped at degradation {ladder.level().label} by the deployment's "
                          "policy (degrade.non_critical_types, when_degraded=skip): manual "
                          "review"})
        if decision is Admission.DEFER:
            return Wait(p.clock.now() + p.settings.degrade.hold_s,
                        f"held back at degradation {ladder.level().label}: awaiting analysis",
                        cause=None, defer_cause=DeferCause.DEGRADED, flag=True)
        model = ladder.model()
        breaker = p.breakers[p.routes[model].service]
        refusal = breaker.refusal()   # claims no probe: the call itself does (_ask)
        if refusal is not None:
            return self._behind_circuit(refusal.retry_after_s, breaker.service)
        return model

    def _fetch(self) -> Any:
        p, task = self.p, self.task
        url = task.submission.attachment_url
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
        if not self._checkpoint(Stage.DOWNLOADED, {"sha256": digest, "size": len(photo.content),
                                                   "content_type": photo.content_type}):
            return _Ended(Lost("lease lost before the downloaded checkpoint"))
        return (photo, digest)

    def _checkpoint(self, stage: Stage, data: Mapping[str, Any]) -> bool:
        """Record a finished stage; False when the lease was lost meanwhile."""
        p, task = self.p, self.task
        return p.store.checkpoint(task.key, task.lease_token, stage, data, now=p.clock.now())

    def _known_answer(self, route: VisionRoute) -> Any:
        """The answer already kept for the photo this task downloaded before (a holder that
        lost its way after paying for it): reused, neither downloaded nor asked again."""
        downloaded = self.task.checkpoint(Stage.DOWNLOADED)
        digest = downloaded.get("sha256") if isinstance(downloaded, Mapping) else None
        if not isinstance(digest, str):
            return None
        fingerprint = analysis_fingerprint(digest, route.model)
        cached = self.p.store.cached_analysis(fingerprint)
        if cached is None:
            return None
        return self._reused(fingerprint, digest, cached, route)

    def _analysis(self, fetched: Tuple[Photo, str], route: VisionRoute) -> Any:
        p, task = self.p, self.task
        photo, digest = fetched
        fingerprint = analysis_fingerprint(digest, route.model)
        cached = p.store.cached_analysis(fingerprint)
        if cached is not None:
            return self._reused(fingerprint, digest, cached, route)
        answer = self._stage("analysis", lambda: self._ask(route, photo.content, fingerprint))
        if isinstance(answer, ENDS):
            p.store.release_analysis(fingerprint, task.key, token=task.lease_token)
            return answer
        return self._analysed(fingerprint, digest, answer, route, reused=False)

    def _reused(self, fingerprint: str, digest: str, cached: Mapping[str, Any],
                route: VisionRoute) -> Any:
        p = self.p
        p.store.note_analysis_reused(fingerprint, now=p.clock.now())
        assessment = cached["assessment"]
        verdict = validate(assessment, p.settings.validation, self.task.submission.asset_type)
        return self._analysed(fingerprint, digest, _Answer(assessment, verdict), route,
                              reused=True)

    def _analysed(self, fingerprint: str, digest: str, answer: _Answer, route: VisionRoute,
                  *, reused: bool) -> Any:
        verdict = answer.verdict
        analyzed = {"assessment": dict(answer.assessment), "verdict": verdict.kind.value,
                    "reasons": list(verdict.reasons), "fingerprint": fingerprint,
                    "sha256": digest, "reused": reused, "service": route.service}
        if not self._checkpoint(Stage.ANALYZED, analyzed):
            return Lost("lease lost before the analyzed checkpoint (the answer is kept)")
        return analyzed

    def _ask(self, route: VisionRoute, image: bytes, fingerprint: str) -> Any:
        """One Vision AI call under the photo's analysis claim, the service's pace, a slot of
        the fleet's concurrency limit and the breaker, with a time-to-first-byte limit that
        follows the service: its answer kept first, then logged, judged and counted."""
        p, task = self.p, self.task
        inline = p.settings.retry.max_inline_wait_s
        timeouts = p.settings.timeouts
        limit = p.limits[route.service]
        ttfb = limit.ttfb_s(left_s=self._left_for_ttfb_s(route), photo_s=self.photo_ttfb_s)
        call_s = timeouts.connect_s + timeouts.tls_s + ttfb + timeouts.body_s
        now = p.clock.now()
        # first: a refused claim must hold no pace slot, no fleet slot and no probe
        keep = keep_s(p.settings.processing.lease_s)
        if not p.store.claim_analysis(fingerprint, task.key, now + 2 * inline + call_s + keep,
                                      token=task.lease_token, now=now):
            return _Ended(Wait(now + inline, "the same photo is being analysed under another "
                                             "lease: its answer will be reused", cause=None))
        pacer = p.pacers[route.service]
        paced = pacer.take(inline)
        if paced.wait_s > inline:
            return _Ended(self._paced(route.service, paced.wait_s))
        if paced.wait_s > 0:
            p.clock.sleep(paced.wait_s)
            off_s = pacer.slowed_since(paced)    # a 429 meanwhile would refuse this call too
            if off_s > 0:
                return _Ended(self._paced(route.service, off_s))
        slot = limit.acquire(wait_s=inline, call_s=call_s)
        if slot is None:
            return _Ended(Wait(p.clock.now() + self._in_line(limit.poll_s()),
                               f"{route.service} has the fleet's limit of calls in flight",
                               cause=None))
        if slot.waited:                          # the same, for a wait for room in the fleet
            off_s = pacer.slowed_since(paced)
            if off_s > 0:
                limit.give_back(slot)
                return _Ended(self._paced(route.service, off_s))
        breaker = p.breakers[route.service]
        permit = breaker.allow()
        if not permit:
            limit.give_back(slot)
            return _Ended(self._behind_circuit(permit.retry_after_s, route.service))
        started = p.clock.now()
        outcome: VisionOutcome = route.client.analyze(image, task.trace_id, ttfb_s=ttfb)
        answer = None
        if outcome.ok:
            assessment = outcome.assessment.to_dict()
            verdict = validate(assessment, p.settings.validation, task.submission.asset_type)
            if not verdict.invalid:
                answer = _Answer(assessment, verdict)
                self._keep(fingerprint, answer, route.service)   # before anything can fail
        limit.release(slot, signal_of(outcome.error_class, complete=answer is not None),
                      latency_s=outcome.duration_s, ttfb_used_s=ttfb)
        if outcome.error_class is ErrorClass.RATE_LIMITED:
            pacer.refused(outcome.retry_after_s, paced.interval_s)
        elif outcome.ok:
            pacer.passed()
        if outcome.error_class is ErrorClass.TTFB_TIMEOUT:
            self.photo_ttfb_s = 2.0 * ttfb   # slow is not down: this photo's next call waits
        retry = bool(task.attempt_count or self.calls.get(route.service))
        self.calls[route.service] = self.calls.get(route.service, 0) + 1
        call = replace(outcome.to_call_record(route.service, started, retry=retry,
                                              task_key=task.key),
                       down=says_down(outcome.error_class, outcome.status_code,
                                      waited_longer=ttfb > timeouts.ttfb_s * (1 + 1e-9)))
        if outcome.error_class is ErrorClass.BAD_FORMAT:
            anomaly = outcome.format_anomaly(p.clock.now(), task.key)
            if anomaly is not None:
                p.store.record_anomaly(anomaly)
        recorded = breaker.record(permit, call)
        if recorded.blame is Blame.SERVICE:
            # A failed probe, or the failure that opened the circuit, says the service (or
            # its model) is down, not that this photo is bad: the photo waits just behind
            # the next probe, no attempt spent (docs/breaker.md).
            drift = outcome.error_class is ErrorClass.BAD_FORMAT
            why = ("answers out of schema (model drift): waiting for the fix and the next "
                   "probe" if drift else f"is down ({outcome.error_class.value}): waiting "
                   "for its next probe")
            return _Ended(Wait(p.clock.now() + (recorded.wait_s or 0.0),
                               f"{route.service} {why}", flag=True))
        if not outcome.ok:
            return outcome
        if answer is None:
            anomaly = verdict.anomaly(provider=outcome.provider, observed_at=p.clock.now(),
                                      excerpt=outcome.excerpt,
                                      model_version=outcome.model_version, task_key=task.key,
                                      trace_id=task.trace_id)
            p.store.record_anomaly(anomaly)  # type: ignore[arg-type]
            return _Failed(ErrorClass.BAD_FORMAT, "; ".join(verdict.reasons))
        return answer

    def _keep(self, fingerprint: str, answer: _Answer, service: str) -> None:
        """Keep a paid answer in the analysis cache, trying again while the ledger is away
        (for up to :func:`keep_s` of the lease, which the photo's analysis claim covers)."""
        p = self.p
        until = p.clock.monotonic() + keep_s(p.settings.processing.lease_s)
        pause = 0.1
        while True:
            try:
                p.store.remember_analysis(fingerprint, {"assessment": dict(answer.assessment),
                                                        "service": service},
                                          now=p.clock.now())
                return
            except StoreUnavailable as exc:
                if p.clock.monotonic() + pause > until:
                    log.error("task %s: a paid answer could not be kept: %s", self.task.key,
                              redact_text(str(exc)))
                    raise
                log.warning("task %s: keeping a paid answer: the ledger is away (%s); "
                            "trying again", self.task.key, redact_text(str(exc)))
                p.clock.sleep(pause)
                pause = min(2 * pause, 2.0)

    def _left_for_ttfb_s(self, route: VisionRoute) -> float:
        """What the task's deadline leaves a call's wait for its first byte."""
        if self.deadline is None:
            return self.p.limits[route.service].cap_ttfb_s
        t = self.p.settings.timeouts
        return (self.deadline.remaining(now=self.p.clock.now())
                - (t.connect_s + t.tls_s + t.body_s))

    def _in_line(self, wait_s: float) -> float:
        """A wait behind the next probe (or a free slot), at a random place in the line behind
        it (within ``breaker.line_s``), so that no photo stands first in every round."""
        return wait_s + self.p.rng.uniform(0.0, self.p.settings.breaker.line_s)

    def _paced(self, service: str, off_s: float) -> Wait:
        """The service's next call slot is ``off_s`` away: park without an attempt, as behind
        a breaker."""
        return Wait(self.p.clock.now() + off_s, f"{service} is paced after a 429: its next "
                                                f"call slot is in {off_s:.1f} s",
                    cause=ErrorClass.RATE_LIMITED)

    def _behind_circuit(self, retry_after_s: float, service: str) -> Wait:
        return Wait(self.p.clock.now() + max(0.0, self._in_line(retry_after_s)),
                    f"circuit of {service} is open", flag=True)

    def _expand(self) -> End:
        """A webhook without a photo list (a layer webhook's notification, or a Survey123 body
        that listed none): list the photos, one task each."""
        p, task = self.p, self.task
        notification = self._notification
        lister = p.lister
        if lister is None:   # the processor's setup, not the webhook, lacks it
            return Dead(FailureClass.CONFIGURATION,
                        "the webhook carried no photo list and no layer lister is set")
        listed = self._stage("changes" if notification else "photo list",
                             lambda: list(lister(task)))
        if isinstance(listed, ENDS):
            return listed
        # A notification covers every feature edited in its range; a feature, one record's photos.
        limit = p.settings.intake.park_ceiling if notification else None
        registered, left = expand_within(listed, p.settings, store=p.store, now=p.clock.now(),
                                         limit=limit)
        what = "notification's" if notification else "feature's"
        reason = f"the {what} {len(registered)} photo(s) registered as their own tasks"
        if left:
            reason += (f"; {left} more left for reconciliation (intake.max_attachments, "
                       "intake.park_ceiling)")
        return Done(TaskOutcome.SKIPPED, {
            "outcome": TaskOutcome.SKIPPED.value, "reused": False, "reason": reason,
            "expanded": registered, "left_for_reconciliation": left})

    # -- the retry engine around a stage -----------------------------------------------------------
    def _stage(self, name: str, attempt: Callable[[], Any]) -> Any:
        """Run one stage's attempt under the policy: its value, or the run's end."""
        history = RetryHistory(prior_attempts=self.task.attempt_count + self.failures,
                               prior_by_class=_prior(self.task))
        run = self.retrying.run(_guarded, attempt, history=history, deadline=self.deadline)
        self.failures += sum(1 for a in run.decision.history.attempts
                             if a.error_class is not None
                             and CLASSIFICATION[a.error_class].counts_attempt)
        if run.ok:
            return run.value.end if isinstance(run.value, _Ended) else run.value
        decision = run.decision
        detail = f"{name}: {getattr(run.value, 'detail', decision.reason)}"
        if decision.kind is DecisionKind.GIVE_UP:
            return Dead(decision.failure_class or FailureClass.BUDGET, detail,
                        decision.error_class)
        until = decision.until if decision.until is not None else self.p.clock.now()
        error_class = decision.error_class or ErrorClass.SERVER_ERROR
        if CLASSIFICATION[error_class].counts_attempt and self.failures:
            return Retry(until, error_class, detail, self.failures)
        return Wait(until, detail, cause=error_class)

    # -- the one place a run's end is written ------------------------------------------------------
    def _end(self, end: End) -> TaskResult:
        """Write the task's row for ``end`` (through the sink for Done) and its result."""
        try:
            return self._write(end)
        except LeaseLost as lost:
            return self._write(Lost(str(lost)))

    def _write(self, end: End) -> TaskResult:
        p, task = self.p, self.task
        key, token, trace = task.key, task.lease_token, task.trace_id
        if isinstance(end, Done):
            return self._complete(end)
        if isinstance(end, Retry):
            ok = p.store.fail(key, token, end.cause, end.detail, end.until, now=p.clock.now(),
                              attempts=end.attempts)
            return self._written(ok, TaskResult(key, Status.FAILED, trace,
                                                error_class=end.cause, retry_at=end.until,
                                                reason=end.detail))
        if isinstance(end, Wait):
            if end.flag:
                self._flag_awaiting()
            ok = p.store.defer(key, token, end.until, now=p.clock.now(), cause=end.defer_cause)
            return self._written(ok, TaskResult(key, Status.DEFERRED, trace,
                                                error_class=end.cause, retry_at=end.until,
                                                reason=end.reason))
        if isinstance(end, Dead):
            self._flag_dead(end.failure_class)
            ok = p.store.bury(key, token, end.failure_class, end.detail, now=p.clock.now())
            return self._written(ok, TaskResult(key, Status.DEAD, trace, error_class=end.cause,
                                                failure_class=end.failure_class,
                                                reason=end.detail))
        return TaskResult(key, Status.PROCESSING, trace, reason=end.reason)

    def _written(self, ok: bool, result: TaskResult) -> TaskResult:
        """``result``, or the lease lost when the ledger refused the fenced write."""
        if ok:
            return result
        return TaskResult(self.task.key, Status.PROCESSING, self.task.trace_id,
                          reason=f"lease lost before the task was {result.status.value}")

    def _complete(self, done: Done) -> TaskResult:
        task = self.task
        conclusion = Conclusion(task, done.outcome, done.result)
        delivered = self._stage("write-back", lambda: self._deliver(conclusion))
        if isinstance(delivered, ENDS):
            return self._write(delivered)
        result = done.result
        return TaskResult(task.key, Status.SUCCEEDED if delivered else Status.PROCESSING,
                          task.trace_id, outcome=done.outcome,
                          condition=result.get("condition"),
                          confidence=result.get("confidence"), reused=bool(result["reused"]),
                          reason="" if delivered else "lease lost before completion")

    def _deliver(self, conclusion: Conclusion) -> Any:
        p = self.p
        if conclusion.result.get("expanded") is not None:
            # A photo list registered as its own tasks (a layer webhook's notification, or a
            # Survey123 body that listed no photo) is no photo: nothing of it goes to the
            # layer, where its photos' tasks write; only the ledger completes it.
            task = conclusion.task
            assert conclusion.outcome is not None, "only a finished task completes"
            return p.store.complete(task.key, task.lease_token, conclusion.outcome,
                                    dict(conclusion.result), now=p.clock.now(),
                                    review=conclusion.needs_review)
        return p.sink.finish(conclusion, store=p.store, now=p.clock.now(),
                             **self._fence_for(p.sink))

    @property
    def _notification(self) -> bool:
        """Whether the task is an ArcGIS layer webhook's notification (not a photo's)."""
        submission = self.task.submission
        return bool(submission is not None and submission.changes_url)

    def _fence_for(self, sink: Any) -> Dict[str, Any]:
        """The fence a sink that writes outside the ledger checks before each write."""
        return {"fence": self.lease.check} if getattr(sink, "fenced", False) and \
            self.lease is not None else {}

    def _flag_awaiting(self) -> None:
        """Show the photo on the layer as awaiting analysis, once per task."""
        if self.task.layer_flag is not LayerStatus.AWAITING_ANALYSIS:
            self._flag(LayerStatus.AWAITING_ANALYSIS)

    def _flag_dead(self, failure_class: FailureClass) -> None:
        """A dead letter of a photo that still exists is never silent on the layer: FAILED
        with its cause (``failed:<cause>`` in the model field), or AWAITING_ANALYSIS while the
        compensator will requeue it (an attempt budget spent, requeues left)."""
        if failure_class is FailureClass.NOT_FOUND:
            return   # the photo is gone: the compensator tells people
        requeues_left = (failure_class.requeue_automatically and self.task.requeue_count
                         < self.p.settings.compensation.requeue_budget)
        if requeues_left:
            self._flag_awaiting()
        else:
            self._flag(LayerStatus.FAILED, {"model_version": f"failed:{failure_class.value}"})

    def _flag(self, value: LayerStatus, result: Optional[Mapping[str, Any]] = None) -> None:
        """Show ``value`` on the layer through the sink and remember it; a write that fails
        is logged and tried again at the next deferral (the task's end goes ahead). A lease
        lost meanwhile raises LeaseLost: nothing is written."""
        p, task = self.p, self.task
        flag = getattr(p.sink, "flag", None)
        if flag is None or self._notification:   # a notification has no feature to flag
            return
        try:
            flag(Conclusion(task, None, result or {}, layer=value), store=p.store,
                 now=p.clock.now(), **self._fence_for(p.sink))
        except (StoreError, LeaseLost):
            raise
        except Exception as exc:  # noqa: BLE001 - classified, re-raised when unknown
            if _classify(exc) is None:
                raise
            log.warning("task %s: the layer could not be told %s yet: %s", task.key,
                        value.value, redact_text(str(exc)))
            return
        p.store.flag_layer(task.key, task.lease_token, value, now=p.clock.now())

    def _log_call(self, service: str, started: float, duration_s: float,
                  error_class: Optional[ErrorClass], status: Optional[int]) -> None:
        self.p.store.record_call(CallRecord(
            service=service, started_at=started, duration_s=max(0.0, duration_s),
            error_class=None if error_class is None else ErrorClass(error_class).value,
            status_code=status, retry=bool(self.task.attempt_count or self.failures),
            trace_id=self.task.trace_id, task_key=self.task.key))


def _conclusion(analyzed: Mapping[str, Any]) -> Done:
    """What an analysed photo concludes: ACCEPTED or REVIEW, and the result to write."""
    assessment = analyzed["assessment"]
    outcome = TaskOutcome.ACCEPTED if analyzed["verdict"] == VerdictKind.ACCEPTED.value \
        else TaskOutcome.REVIEW
    return Done(outcome, {
        "condition": assessment["condition"], "confidence": assessment["confidence"],
        "labels": assessment.get("labels"), "model_version": assessment.get("model_version"),
        "provider": assessment.get("provider"), "verdict": analyzed["verdict"],
        "reasons": analyzed["reasons"], "reused": analyzed["reused"],
        "sha256": analyzed["sha256"], "outcome": outcome.value})


def _guarded(attempt: Callable[[], Any]) -> Any:
    """``attempt()``, with the failures a stage can have turned into outcomes: an error that
    carries its class (a download, ArcGIS or token failure) or a transport exception; an End
    it returns is wrapped (the retry engine reads it as a success that ends the stage). The
    ledger's own errors, a lost lease and anything unknown propagate."""
    try:
        value = attempt()
    except (StoreError, LeaseLost):
        raise
    except Exception as exc:  # noqa: BLE001 - classified below, re-raised when unknown
        error_class = _classify(exc)
        if error_class is None:
            raise
        return _Failed(error_class, redact_text(str(exc)), getattr(exc, "retry_after_s", None))
    return _Ended(value) if isinstance(value, ENDS) else value


def _prior(task: Task) -> Mapping[ErrorClass, int]:
    """What the ledger knows of earlier runs per class: the last error class, once."""
    return {task.error_class: 1} if task.error_class is not None and task.attempt_count else {}


def _classify(exc: BaseException) -> Optional[ErrorClass]:
    """The library's errors carry their class; everything else as the retry engine knows it."""
    error_class = getattr(exc, "error_class", None)
    if isinstance(exc, ResilienceError) and error_class is not None:
        return ErrorClass(error_class)
    return classify_exception(exc)
