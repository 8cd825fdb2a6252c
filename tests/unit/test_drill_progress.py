"""The drill's live progress line says why nothing moves; the drift's detection time is read
from the sampled circuit."""
from __future__ import annotations

from fme_ai_resilience.drill.report import Timeline
from fme_ai_resilience.drill.run import _detected_after, _live
from fme_ai_resilience.drill.sampling import SAMPLE_STEP_S

EVERY = max(1, round(1.0 / SAMPLE_STEP_S))   # samples between two lines


def timeline(*states):
    tl = Timeline(step_s=0.1)
    for i, state in enumerate(states):
        tl.t.append(round(i * 0.1, 3))
        tl.backlog.append(5)
        tl.in_flight.append(0)
        tl.breaker.append(state)
    return tl


def lines(tl, **kw):
    shown = []
    on_sample = _live("lib", shown.append, **kw)
    full = Timeline(step_s=0.1)
    for i in range(len(tl.t)):
        for name in ("t", "backlog", "in_flight", "breaker"):
            getattr(full, name).append(getattr(tl, name)[i])
        on_sample(full)
    return shown


def test_a_subject_s_state_is_shown_at_its_first_sample_then_about_once_a_second():
    """The first sample is shown at once (a run shorter than a second shows its state too),
    then one in every second's worth of samples."""
    assert len(lines(timeline("CLOSED"))) == 1
    tl = timeline(*(["CLOSED"] * (2 * EVERY + 1)))
    assert [line.split(",")[0] for line in lines(tl)] == [
        f"lib: {t:5.1f} s" for t in (tl.t[0], tl.t[EVERY], tl.t[2 * EVERY])]


def test_an_open_circuit_says_the_photos_wait_for_the_fix_or_the_next_probe():
    """While the circuit is open the line says why: before the drifted model's fix, the
    photos wait for the fix; otherwise for the next probe; a closed circuit adds nothing."""
    tl = timeline(*(["CLOSED"] * EVERY + ["OPEN"] * EVERY + ["HALF_OPEN"] * EVERY))
    shown = lines(tl, fix_at_s=tl.t[2 * EVERY - 1] + 0.01)
    assert shown[0].endswith("engines busy 0")
    assert shown[1].endswith("circuit open: the model answers out of schema, waiting for "
                             "the fix")
    assert shown[2].endswith("circuit half_open: the photos wait for the next probe")
    assert lines(tl)[1].endswith("circuit open: the photos wait for the next probe")


def test_the_drift_is_detected_at_the_first_sample_with_the_circuit_open():
    """Detection: the drift's start to the first sample after it with the circuit open."""
    tl = timeline("CLOSED", "OPEN", "CLOSED", "CLOSED", "HALF_OPEN")
    assert _detected_after(tl, (0.2, 1.0)) == 0.2
    assert _detected_after(tl, None) is None
    assert _detected_after(timeline("CLOSED", "CLOSED"), (0.0, 1.0)) is None


def test_the_operators_step_after_the_fix_requeues_the_format_dead_letters(tmp_path):
    """At the drifted model's fix the drill does what the operator does, ``dlq requeue
    --cause FORMAT``: the FORMAT dead letters are PENDING again, other causes stay dead."""
    from fme_ai_resilience.drill.library import _requeue_format
    from fme_ai_resilience.core.errors import FailureClass
    from fme_ai_resilience.core.intake.keys import trace_id_for
    from fme_ai_resilience.core.ledger import Status
    from fme_ai_resilience.store import open_store
    from fme_ai_resilience.core.intake.submission import Submission

    url = f"sqlite:///{tmp_path / 'l.db'}"
    with open_store(url, init_schema=True) as store:
        for key, cause in (("a", FailureClass.FORMAT), ("b", FailureClass.NOT_FOUND)):
            store.register(Submission(idempotency_key=key, feature_global_id=f"F-{key}",
                                      trace_id=trace_id_for(key),
                                      attachment_url=f"https://photos.test/{key}",
                                      attachment_global_id=f"A-{key}"), 100, now=1.0)
            (task,) = store.claim("e", 1, 60.0, now=2.0)
            store.bury(task.key, task.lease_token, cause, "bad", now=3.0)
    _requeue_format(url)
    with open_store(url) as store:
        assert (store.get("a").status, store.get("b").status) == (Status.PENDING, Status.DEAD)
