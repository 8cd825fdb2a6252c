"""What a drill holds a subject to, written once: the command, the tests and the bench use it.

:func:`checks` judges one subject's figures (the judge's, counted at the stand-ins) against
the report's bounds; :func:`targets` are the library's, and the ``drill`` command exits 1
when any is missed. Every check can fail, and each has a test that plants a violation:

* ``lost``: nothing lost (every fact analysed, or flagged for somebody to see);
* ``analysed``: every fact that can be analysed is analysed;
* ``duplicate_analyses``: no usable answer paid twice for the same photo's bytes;
* ``conflicting_writes``: no assessment overwritten with a different one;
* ``duplicate_rows``: no related-table row added twice;
* ``peak_concurrent_calls``: calls in flight at the Vision AI within engines x per engine;
* ``ai_calls_per_analysed``: at most 1.1 x 1/(1-p) (not in an outage or a drift, whose extra
  calls are judged by the probe bound);
* ``drift_ai_calls``: the calls into a drifted model within the drift's probe bound;
* ``outage_ai_calls``: the calls into the outage within the probe bound;
* ``recovery_lag_s``: the first usable answer within one probe interval of the service's
  return;
* ``drain_s``: at most 1.15 x the Little's-law bound.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List, Optional

from .bounds import DRAIN_TOLERANCE
from .report import DrillReport, SubjectResult

__all__ = ["Check", "checks", "targets", "missed"]


@dataclass(frozen=True)
class Check:
    """One target: the figure it reads (``key``), what it says, whether it was met."""

    key: str
    name: str
    met: bool


def _within(value: Optional[float], bound: Optional[float]) -> bool:
    return (value is not None and bound is not None and math.isfinite(value)
            and value <= bound)


def checks(report: DrillReport, subject: SubjectResult) -> List[Check]:
    """Every target of the drill, judged on ``subject``'s figures."""
    s = subject
    out = [Check("lost", f"nothing lost ({s.lost} lost)", s.lost == 0),
           Check("analysed", f"every photo that can be analysed is analysed ({s.analysed} "
                             f"of {s.analysable})", s.analysed == s.analysable),
           Check("duplicate_analyses", f"no photo paid for twice ({s.duplicate_analyses})",
                 s.duplicate_analyses == 0),
           Check("conflicting_writes", f"no assessment overwritten with another "
                                       f"({s.conflicting_writes})", s.conflicting_writes == 0),
           Check("duplicate_rows", f"no row added twice ({s.duplicate_rows})",
                 s.duplicate_rows == 0),
           Check("peak_concurrent_calls", f"calls in flight {s.peak_concurrent_calls} <= "
                                          f"{s.concurrency_bound} (engines x per engine)",
                 s.peak_concurrent_calls <= s.concurrency_bound)]
    if report.drift is not None:
        out.append(Check("drift_ai_calls", f"calls into the drifted model {s.drift_ai_calls} "
                                           f"<= {report.drift_call_bound} (its probe bound)",
                         _within(s.drift_ai_calls, report.drift_call_bound)))
    elif report.outage is None:
        bound = report.calls_per_analysed_bound
        out.append(Check("ai_calls_per_analysed",
                         f"AI calls per analysed photo {s.ai_calls_per_analysed} <= "
                         f"{bound if bound is None else round(bound, 3)}",
                         _within(s.ai_calls_per_analysed, bound)))
    else:
        out.append(Check("outage_ai_calls", f"calls into the outage {s.outage_ai_calls} <= "
                                            f"probe bound {report.probe_bound}",
                         s.outage_ai_calls <= report.probe_bound))
        out.append(Check("recovery_lag_s", f"recovery lag {s.recovery_lag_s} s <= one probe "
                                           f"interval {report.probe_interval_s} s",
                         _within(s.recovery_lag_s, report.probe_interval_s)))
    drain_bound = (None if report.drain_bound_s is None
                   else DRAIN_TOLERANCE * report.drain_bound_s)
    out.append(Check("drain_s", f"drain {s.drain_s} s <= {DRAIN_TOLERANCE:g} x "
                                f"{report.drain_bound_s} s", _within(s.drain_s, drain_bound)))
    return out


def targets(report: DrillReport) -> List[Check]:
    """The library's targets in this report."""
    return checks(report, report.library)


def missed(report: DrillReport) -> Dict[str, List[Check]]:
    """Per subject that ran, the targets it missed."""
    return {s.name: [c for c in checks(report, s) if not c.met]
            for s in report.subjects() if s.skipped is None}
