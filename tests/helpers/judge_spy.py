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
