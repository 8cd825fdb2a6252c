"""One time scale for every subject of a drill: production seconds to real seconds.

A drill runs compressed: ``factor`` real seconds per production second (0.1: a 90 s outage
lasts 9 s). :meth:`TimeScale.real` is the one function that turns a production time into a
real one, for the library's settings (:func:`scaled_settings`: every wait, window and timeout
of the defaults) and for every baseline's waits and timeouts alike, so no subject meets the
weather at another scale than the others.

A wait (a backoff, a cooldown, a lease) is honoured at any length: it is only multiplied. A
timeout is a race between the client and a loopback server on a shared machine, which cannot
answer faster than it is scheduled: a timeout below :data:`TIMEOUT_FLOOR_S` real seconds is
raised to it, for every subject the same, and :meth:`TimeScale.floored` says which ones were,
so the report can say so (docs/drill.md, "One time scale").

The ledger's own database timeouts (``database.*``) guard the database the drill really runs
on, in real time: they are the machine's, not the modelled world's, and are left as they are.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Dict, Iterable, List, Mapping, Tuple

from ..core.checks import finite
from ..core.config.settings import Settings

__all__ = ["TimeScale", "TIMEOUT_FLOOR_S", "scaled_settings", "setting_times", "NOT_SCALED"]

#: The shortest real timeout any subject gets: what a loaded 2-core machine answers within on
#: loopback, whatever the time scale.
TIMEOUT_FLOOR_S = 0.5
#: Setting groups whose times are the machine's, not the modelled world's.
NOT_SCALED = ("database",)
#: Times of the settings that are timeouts (races against an answer), beyond the ``timeouts``
#: group and every name holding ``timeout``: the slow-call threshold is compared with the
#: same durations as the time-to-first-byte timeout, so it is floored alike.
_ALSO_TIMEOUTS = ("breaker.slow_call_s",)


@dataclass(frozen=True)
class TimeScale:
    """``factor`` real seconds per production second; timeouts never below ``floor_s``."""

    factor: float
    floor_s: float = TIMEOUT_FLOOR_S

    def __post_init__(self) -> None:
        finite("time_scale", self.factor, above=0)
        finite("floor_s", self.floor_s, minimum=0)

    def real(self, production_s: float, *, timeout: bool = False) -> float:
        """The real seconds of ``production_s``: a wait multiplied by the factor; a timeout
        too, and then at least :attr:`floor_s` (zero, "no limit", stays zero)."""
        seconds = production_s * self.factor
        if timeout and production_s > 0:
            return max(seconds, self.floor_s)
        return seconds

    def rate(self, per_production_s: float) -> float:
        """A per-second rate in real seconds: as many events per scaled window."""
        return per_production_s / self.factor

    def production(self, real_s: float) -> float:
        """The production seconds of ``real_s`` real seconds."""
        return real_s / self.factor

    def floored(self, timeouts: Iterable[Tuple[str, float]]) -> List[str]:
        """Which of ``(name, production s)`` a machine cannot honour at this scale, each as
        ``"name 3 s (0.3 s real) raised to 0.5 s real = 5 s"``."""
        out = []
        for label, production_s in timeouts:
            if production_s > 0 and production_s * self.factor < self.floor_s:
                out.append(f"{label} {production_s:g} s ({production_s * self.factor:g} s "
                           f"real) raised to {self.floor_s:g} s real = "
                           f"{self.production(self.floor_s):g} s")
        return out


def setting_times(settings: Settings = Settings()) -> Dict[str, Tuple[float, str]]:
    """Every time of ``settings`` the drill scales, by dotted name: ``(production value,
    kind)`` with kind ``timeout``, ``wait`` or ``rate`` (a per-second rate). Every field named
    ``*_s`` or ``*_per_s`` of every group but :data:`NOT_SCALED` is one."""
    out: Dict[str, Tuple[float, str]] = {}
    for group in dataclasses.fields(settings):
        values = getattr(settings, group.name)
        if group.name in NOT_SCALED or not dataclasses.is_dataclass(values):
            continue
        for item in dataclasses.fields(values):
            value = getattr(values, item.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            name = f"{group.name}.{item.name}"
            if item.name.endswith("_per_s"):
                out[name] = (float(value), "rate")
            elif item.name.endswith("_s"):
                timeout = (group.name == "timeouts" or "timeout" in item.name
                           or name in _ALSO_TIMEOUTS)
                out[name] = (float(value), "timeout" if timeout else "wait")
    return out


def scaled_settings(scale: TimeScale, production: Mapping[str, float] = {}
                    ) -> Dict[str, str]:
    """Every time of the defaults (:func:`setting_times`), each through ``scale`` (times in
    ``production`` replace the defaults' production values), as ``resilience_config``
    values."""
    out: Dict[str, str] = {}
    for name, (value, kind) in setting_times().items():
        value = production.get(name, value)
        real = (scale.rate(value) if kind == "rate"
                else scale.real(value, timeout=kind == "timeout"))
        out[name] = f"{real:g}"
    return out
