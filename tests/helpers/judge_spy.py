"""Watch the drill's one judge: every ``Observed`` that ``run_drill`` hands it, in order."""
from __future__ import annotations

from typing import Any, Callable, List, Tuple

from fme_ai_resilience.drill import run as drill_run


def spy_on_judge(monkeypatch: Any) -> Tuple[List[Any], Callable[[Any], Any]]:
    """The list each judged world's ``Observed`` is appended to, and the real judge."""
    seen: List[Any] = []
    real = drill_run.judge

    def spy(observed: Any) -> Any:
        seen.append(observed)
        return real(observed)

    monkeypatch.setattr(drill_run, "judge", spy)
    return seen, real


def repeats_told(observed: Any) -> str:
    """Each photo the Vision AI answered usably more than once, on the run's clock (seconds
    from its start): when each answer was scheduled, when its client closed the connection
    after or before it, when the layer showed the photo done, and when engines died; for a
    failure message."""
    from fme_ai_resilience.drill.judge import replay

    done = replay(observed)
    start = observed.started
    usable: dict = {}
    for at, sha, outcome in observed.vision_log:
        if outcome == "ok":
            usable.setdefault(sha, []).append(round(at, 3))
    lines = []
    for sha, times in usable.items():
        if len(times) < 2:
            continue
        closed = [round(at - start, 3) for at, s, _ in observed.closed if s == sha]
        left = [round(at - start, 3) for at, s, _ in observed.left if s == sha]
        since = done.since.get(sha)
        lines.append(f"{sha[:12]}: scheduled at {times} (schedule s), its client closed the "
                     f"connection at {closed} after the answer, {left} before it, "
                     f"on the layer from {None if since is None else round(since - start, 3)}")
    deaths = [round(at - start, 3) for at in observed.deaths]
    return "; ".join(lines + [f"engines died at {deaths}"])
