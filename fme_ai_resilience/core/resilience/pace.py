"""The pace of a rate-limited service: how far apart the fleet's calls go after a 429; pure.

A service that answers 429 allows fewer calls than the engines make. Retrying each refused call
after its own Retry-After keeps the fleet knocking at the rate it has engines, not at the rate
the service allows: most calls are refused, each refusal spends an attempt, and tasks run out
of attempts. So a 429 sets a *pace* for the service, shared by every engine through the ledger:
no call before its Retry-After (when to come back, not how often), then calls one
:func:`slower` interval apart (:data:`FIRST_INTERVAL_S` at first, twice the interval in force
when the service refuses again at that pace), each success shortening the interval by
:data:`RELAX_FACTOR`; below :data:`FLOOR_S` the pace is off. Backing off by doubling and
probing down by small steps, the fleet settles just under the rate the service allows.
"""
from __future__ import annotations

from ..checks import finite

__all__ = ["slower", "RELAX_FACTOR", "FLOOR_S", "FIRST_INTERVAL_S"]

#: Each call that goes through shortens a paced service's interval by this factor.
RELAX_FACTOR = 0.97
#: Below this interval (100 calls a second) a service is not paced at all.
FLOOR_S = 0.01
#: The interval a 429 sets on a service not yet paced (ten calls a second; doubling finds a
#: slower service's rate in a few refusals).
FIRST_INTERVAL_S = 0.1


def slower(current_s: float) -> float:
    """The interval after a 429: :data:`FIRST_INTERVAL_S` on a service not paced yet, twice
    the interval in force when it was (the service still refuses at that pace)."""
    return max(2.0 * finite("current_s", current_s, minimum=0), FIRST_INTERVAL_S)
