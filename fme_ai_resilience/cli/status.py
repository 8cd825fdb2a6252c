"""``fme-ai-resilience status --db URL [--json]``: the ledger's water level and dead letters.

The seed's ``SELECT status, count(*) ... GROUP BY status`` with every status listed, the photos
in the one honest vocabulary (analysed, awaiting analysis and held back by the ladder, in
review, skipped by policy, dead by cause: the same figures ``check`` and ``/metrics`` show), how many tasks engines finished in the last hour (the measured drain), and
the deliveries intake refused without storing them (counted by reason), and what it could not
keep (refusals past their bound, invalid bodies past the dead-letter bounds).
"""
from __future__ import annotations

import argparse
from typing import Any, Dict, List, Optional

from ..core.clock import Clock, SystemClock
from ..core.ledger import INVALID_NOT_KEPT, REFUSALS_NOT_RECORDED, Status
from ..core.observe.alerts import human_age as _age
from ..services.observe.signals import read_signals
from ..store import SqlStore, display_url
from ..core.config.settings import Settings
from .common import (EXIT_OK, add_db_option, command, exit_codes, json_text, open_from_args,
                     settings_for)

__all__ = ["add_parser", "ledger_status", "render"]

DRAIN_WINDOW_S = 3600.0


def ledger_status(*, store: SqlStore, clock: Clock,
                  settings: Optional[Settings] = None) -> Dict[str, Any]:
    """The numbers ``status`` shows, as one JSON-ready dict (with the golden signals)."""
    counts = store.counts()
    counters = store.intake_counters()
    signals = read_signals(settings or Settings(), store=store, now=clock.now())
    return {
        "signals": signals.as_dict(),
        "schema_version": store.schema_version(),
        "ledger": counts,
        "total": sum(counts.values()),
        "in_progress": sum(n for s, n in counts.items() if Status(s).in_progress),
        "dead_letters": store.dead_letters(),
        "completed_last_hour": store.completed_since(clock.now() - DRAIN_WINDOW_S),
        "intake": {"refusals": store.refusal_counts(),
                   "refusals_not_recorded": counters[REFUSALS_NOT_RECORDED],
                   "invalid_not_kept": counters[INVALID_NOT_KEPT]},
    }


def render(where: str, report: Dict[str, Any]) -> str:
    """``report`` as the text table ``status`` prints."""
    lines = [f"Ledger {where} (schema version {report['schema_version']})"]
    lines += [f"  {status:<16}{n:>10}" for status, n in report["ledger"].items()]
    lines.append(f"  {'total':<16}{report['total']:>10}   in progress {report['in_progress']}, "
                 f"finished in the last hour {report['completed_last_hour']}")
    lines += _render_photos(report["signals"]["ledger"])
    lines.append("Dead letters by cause")
    lines += [f"  {cause:<16}{n:>10}" for cause, n in report["dead_letters"].items()]
    intake = report["intake"]
    lines.append("Intake: deliveries refused 429/503 with photos not stored (refusal records "
                 "for reconciliation)")
    for reason, n in sorted(intake["refusals"].items()):
        lines.append(f"  refused {reason:<22}{n['bodies']:>8} bodies, {n['deliveries']} "
                     f"deliveries")
    if not intake["refusals"]:
        lines.append(f"  {'refused':<30}{0:>8}")
    lines.append(f"  {'refusals not recorded':<30}{intake['refusals_not_recorded']:>8}   (past "
                 f"intake.max_refusal_records: only in the log)")
    lines.append(f"  {'invalid bodies not kept':<30}{intake['invalid_not_kept']:>8}   (answered "
                 f"400, past intake.max_invalid_per_minute or max_invalid_total)")
    lines += _render_signals(report["signals"])
    return "\n".join(lines)


def _render_photos(f: Dict[str, Any]) -> List[str]:
    """Where the photos stand: only ACCEPTED and REVIEW count as analysed."""
    return ["Photos (done means analysed)",
            f"  {'analysed':<22}{f['analysed']:>10}   ACCEPTED {f['accepted']}, REVIEW "
            f"{f['review']}",
            f"  {'awaiting analysis':<22}{f['awaiting_analysis']:>10}   of them held back by "
            f"the degradation ladder {f['held_back']}",
            f"  {'in review':<22}{f['in_review']:>10}   oldest waiting "
            f"{_age(f['review_oldest_age_s'])} (review list); resolved {f['reviewed']}",
            f"  {'skipped by policy':<22}{f['skipped_by_policy']:>10}   never analysed "
            f"(degrade.non_critical_types, when_degraded=skip)",
            f"  {'dead letters':<22}{sum(f['dead_by_cause'].values()):>10}   " + (", ".join(
                f"{k} {v}" for k, v in sorted(f["dead_by_cause"].items())) or "none"),
            f"  {'due now':<22}{f['due']:>10}   oldest due task {_age(f['oldest_due_age_s'])}"
            f" old, last task finished {_age(f['last_progress_age_s'])} ago",
            f"  {'leases not renewed':<22}{f['expired_leases']:>10}"]





def _render_signals(s: Dict[str, Any]) -> List[str]:
    def sec(value: Optional[float]) -> str:
        return "n/a" if value is None else f"{value:.2f} s"

    latency, traffic, sat = s["latency_p95_s"], s["traffic"], s["saturation"]
    lines = [f"Golden signals, last {s['window_s']:g} s: {s['level']}",
             f"  latency P95         intake {sec(latency['intake'])}, AI call "
             f"{sec(latency['ai_call'])}, end to end {sec(latency['end_to_end'])}",
             f"  traffic             {traffic['webhooks_per_min']:.1f} webhooks/min, "
             f"{traffic['ai_calls_per_min']:.1f} AI calls/min, "
             f"{traffic['reused_analyses']} analyses reused",
             "  errors              AI calls " + (", ".join(
                 f"{k} {v}" for k, v in s["errors"]["by_class"].items()) or "none")
             + "; dead letters " + (", ".join(
                 f"{k} {v}" for k, v in s["errors"]["dead_by_cause"].items()) or "none"),
             f"  finished            {traffic['analysed']} analysed, "
             f"{traffic['skipped_by_policy']} skipped by policy, "
             f"{sum(s['errors']['dead_by_cause'].values())} dead letters",
             f"  saturation          backlog {sat['backlog']} of watermark {sat['watermark']} "
             f"({sat['backlog_ratio']:.0%})",
             f"  format anomalies    {s['format_anomalies']['count']} "
             f"({s['format_anomalies']['rate']:.0%} of AI calls)",
             f"  AI spend            {s['spend']['amount']:.2f} {s['spend']['currency']}"]
    lines += [f"  ! {a['level']}: {a['message']}" for a in s["alerts"]]
    if s.get("totals"):
        lines += _render_totals(s["totals"])
    return lines


def _render_totals(t: Dict[str, Any]) -> List[str]:
    """The ledger's monotonic counts and histograms, the figures ``/metrics`` exports."""
    lines = ["Totals since the ledger was created (what /metrics exports)"]
    for name, rows in t["counters"].items():
        for row in rows:
            labels = ", ".join(f"{k}={v}" for k, v in sorted(row["labels"].items()))
            lines.append(f"  {name:<22}{row['value']:>10}   {labels}".rstrip())
    for name, rows in t["histograms"].items():
        for row in rows:
            labels = ", ".join(f"{k}={v}" for k, v in sorted(row["labels"].items()))
            mean = row["sum"] / row["count"] if row["count"] else None
            lines.append(f"  {name:<30}{row['count']:>8} observed, mean "
                         f"{'n/a' if mean is None else f'{mean:.2f} s'}   {labels}".rstrip())
    return lines


@command
def _status(args: argparse.Namespace) -> int:
    with open_from_args(args) as store:
        report = ledger_status(store=store, clock=SystemClock(),
                               settings=settings_for(store=store))
    if args.json:
        print(json_text(report))
    else:
        print(render(display_url(args.db), report))
    return EXIT_OK


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "status", help="the ledger by status, dead letters by cause",
        description="The ledger's water level: tasks by status, dead letters by cause, the "
                    "tasks finished in the last hour and the golden signals. Never creates a "
                    "SQLite file.",
        epilog=exit_codes())
    add_db_option(parser)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(func=_status)
