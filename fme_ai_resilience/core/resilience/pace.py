"""The pace of a rate-limited service: how far apart the fleet's calls go after a 429; pure.

A service that answers 429 allows fewer calls than the engines make. Retrying each refused call
after its own Retry-After keeps the fleet knocking at the rate it has engines, not at the rate
the service allows: most calls are refused, each refusal spends an attempt, and tasks run out
of attempts. So a 429 sets a *pace* for the service, shared by every engine through the ledger:
no call before its Retry-After (when to come back, not how often), then calls one
:func:`slower` interval apart (:data:`FIRST_INTERVAL_S` at first, twice the interval a
refused call was paced at when the service refuses again at that pace: the calls in flight at
one pace, refused together, double it once), each success shortening the interval by
:data:`RELAX_FACTOR`; below :data:`FLOOR_S` the pace is off. Backing off by doubling and
probing down by small steps, the fleet settles just under the rate the service allows.

A service that refuses again soon also shows what it allows: the calls it took since it last
refused, over the time since (:func:`after_refusal`). A quota of N calls a window takes N
calls quickly and then refuses until the window ends; doubling once per refusal would need
many windows to find one call every window/N, and relaxing on each of the N successes would
undo it, so the pace goes there at once.
"""
from __future__ import annotations

from typing import Optional

from ..checks import count, finite

__all__ = ["after_refusal", "shown_since", "slower", "RELAX_FACTOR", "FLOOR_S",
           "FIRST_INTERVAL_S", "SHOWN_RETRY_AFTERS"]

#: Each call that goes through shortens a paced service's interval by this factor.
RELAX_FACTOR = 0.97
#: Below this interval (100 calls a second) a service is not paced at all.
FLOOR_S = 0.01
#: The interval a 429 sets on a service not yet paced (ten calls a second; doubling finds a
#: slower service's rate in a few refusals).
FIRST_INTERVAL_S = 0.1


def slower(paced_s: float) -> float:
    """The interval after a 429 to a call paced at ``paced_s``: :data:`FIRST_INTERVAL_S` for
    a call made while the service was not paced (``paced_s`` 0), twice ``paced_s`` when it
    was (the service still refuses at that pace)."""
    return max(2.0 * finite("paced_s", paced_s, minimum=0), FIRST_INTERVAL_S)


#: How far back, in Retry-Afters, a service's previous 429 may be for the calls taken since to
#: show what it allows: a quota refuses again one window later, and its Retry-After is most of
#: a window; an earlier 429 was followed by a spell of whatever the fleet asked, not of what
#: the service allows.
SHOWN_RETRY_AFTERS = 2.0


def shown_since(retry_after_s: Optional[float], *, now: float) -> Optional[float]:
    """Since when a 429 at ``now`` with ``retry_after_s`` looks back for the previous one
    (None: no Retry-After, nothing to look for)."""
    if not retry_after_s:
        return None
    return now - SHOWN_RETRY_AFTERS * finite("retry_after_s", retry_after_s, minimum=0)


def after_refusal(paced_s: float, *, taken: int = 0, since_refusal_s: float = 0.0,
                  retry_after_s: Optional[float] = None) -> float:
    """The interval after a 429 to a call paced at ``paced_s``: :func:`slower` than that, and
    no shorter than what the service showed it allows when it refused before, the
    ``since_refusal_s`` seconds since that 429 over the ``taken`` calls it took meanwhile (a
    quota of N calls a window: one call every window/N), though never longer than this 429's
    Retry-After; that 429 is looked for only as far back as :func:`shown_since` (a spell
    without calls shows how few were asked, not how few are allowed). Without a Retry-After
    or a call taken, the doubling alone."""
    interval = slower(paced_s)
    taken = count("taken", taken, minimum=0)
    since = finite("since_refusal_s", since_refusal_s, minimum=0)
    if taken and retry_after_s:
        shown = min(since / taken, finite("retry_after_s", retry_after_s, minimum=0))
        interval = max(interval, shown)
    return interval

