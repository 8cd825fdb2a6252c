"""The drill's baselines: FME Flow without this library, on the same loopback stand-ins.

A baseline is how FME authors call a Vision AI service today, meeting the same deliveries and
faults as the library, and judged by the same function
(:func:`~fme_ai_resilience.drill.judge.judge`, at the stand-ins). Each models an FME Flow
deployment with no ledger, no deduplication, no circuit breaker and no dead-letter queue:
one job per webhook delivery on ``engines`` engines (:mod:`.pool`), each job downloading the
photos its body lists, calling the Vision AI under the baseline's retry, putting the answer
through the same Tester as the library (its validation and confidence rule), and writing it
back by GlobalID (:mod:`.job`). The ways of calling, each with the note it shows in every
report saying what it models and assumes (:mod:`.models`):

- ``naive``: three tries with a fixed 1 s wait, whatever failed, a 30 s timeout;
- ``tenacity``: ``wait_random_exponential(multiplier=1, max=60)``, stop after 5, retrying
  every ``requests.RequestException`` (``ChunkedEncodingError`` included) but a 4xx other
  than 429, and a body that is not JSON (the ``drill`` extra; skipped without it);
- ``httpcaller``: FME's HTTPCaller with its retry on, modelled from the documentation;
- ``sweep``: ``httpcaller`` plus the scheduled workspace that re-processes the features whose
  assessment is still empty (:mod:`.sweep`), on its schedule for the whole run, with its own
  job limit and HTTPCaller's parallelism: the strongest peer.

:mod:`.gauges` holds the gauges the drill's sampler reads while a run goes on.
"""
from __future__ import annotations

from .gauges import Progress
from .job import TESTER, Job, JobResult, PhotoResult, run_job
from .models import (BASELINES, TENACITY_MISSING, Baseline, BaselineError, HTTPCaller, Naive,
                     Sweep, Tenacity, baseline, tenacity_wait)
from .pool import BaselineRun, run_baseline
from .sweep import Pass, sweep_pass

__all__ = ["Progress", "Baseline", "Naive", "Tenacity", "HTTPCaller", "Sweep", "BASELINES",
           "BaselineRun", "JobResult", "PhotoResult", "BaselineError", "Job", "run_baseline",
           "run_job", "sweep_pass", "Pass", "baseline", "tenacity_wait", "TENACITY_MISSING", "TESTER"]
