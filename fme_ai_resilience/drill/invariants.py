"""What a drill holds a subject to, written once: the command, the tests and the bench use it.

:func:`checks` judges one subject's figures (the judge's, counted at the stand-ins) against
the report's bounds; :func:`targets` are the library's, and the ``drill`` command exits 1
when any is missed. Each is a count at the stand-ins, so it means the same on any machine
however loaded; each can fail, and each has a test that plants a violation:

* ``lost``: nothing lost (every fact analysed, or flagged for somebody to see);
* ``analysed``: every fact that can be analysed is analysed;
* ``duplicate_analyses``: no usable answer paid twice for the same photo's bytes (but for
  those paid again after a killed engine's call was cut, counted apart as ``cut_by_kills``);
* ``conflicting_writes``: no assessment overwritten with a different one;
* ``duplicate_rows``: no related-table row added twice;
* ``peak_concurrent_calls``: calls in flight at the Vision AI within the subject's
  concurrency bound (the library: its fleet limit's ceiling; a baseline: its engines x
  transfers per job);
* ``ai_calls_per_analysed``: at most 1.1 x 1/(1-p) (not in an outage or a drift, whose extra
  calls are judged by the probe bound);
* ``drift_ai_calls``: the calls into a drifted model within the drift's probe bound;
* ``outage_ai_calls``: the calls into the outage within the probe bound.

Speed (the drain, the time to result, the engine time per photo, the recovery lag) is
wall-clock time of one run: it is compared side by side in the same run
(:mod:`~fme_ai_resilience.drill.speed`), never a target. :func:`verdict` is the one line a
run ends with.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

from .report import DrillReport, SubjectResult

__all__ = ["Check", "checks", "targets", "missed", "verdict"]


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
           Check("duplicate_analyses", f"no photo paid for twice ({s.duplicate_analyses}"
                 + (f"; {s.cut_by_kills} again after a kill cut its call" if s.cut_by_kills
                    else "") + ")",
                 s.duplicate_analyses == 0),
           Check("conflicting_writes", f"no assessment overwritten with another "
                                       f"({s.conflicting_writes})", s.conflicting_writes == 0),
           Check("duplicate_rows", f"no row added twice ({s.duplicate_rows})",
                 s.duplicate_rows == 0),
           Check("peak_concurrent_calls", f"calls in flight {s.peak_concurrent_calls} <= "
                                          f"{s.concurrency_bound} (its concurrency bound)",
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
    return out


def targets(report: DrillReport) -> List[Check]:
    """The library's targets in this report."""
    return checks(report, report.library)


def missed(report: DrillReport) -> Dict[str, List[Check]]:
    """Per subject that ran, the targets it missed."""
    return {s.name: [c for c in checks(report, s) if not c.met]
            for s in report.subjects() if s.skipped is None}


def verdict(reports: Sequence[DrillReport]) -> str:
    """The one line a run ends with: every target of the library met, or which missed."""
    held = [(r.scenario, c) for r in reports for c in targets(r)]
    failed = [f"{scenario}: {c.name}" if len(reports) > 1 else c.name
              for scenario, c in held if not c.met]
    where = (f" in {len(reports)} scenarios" if len(reports) > 1 else "")
    if not failed:
        return (f"verdict: PASS, the library met every target ({len(held)} of "
                f"{len(held)}{where}): nothing lost, nothing paid or written twice, calls "
                "within their bounds")
    return (f"verdict: FAIL, the library missed {len(failed)} of {len(held)} targets{where}: "
            + "; ".join(failed))
