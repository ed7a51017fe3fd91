"""Snakemake's re-scheduling timers: at most one pending, so that they do not pile up.

Snakemake (9.x, local and cluster runs alike) limits job submissions with a rate limiter
(``--max-jobs-per-timespan``, default ``100/1s``). With the limiter on, every scheduling round that
finds ready jobs ends by starting a one-second timer that wakes the scheduler for another round
(``JobScheduler._schedule_reevalutation``), whether or not a timer is already pending. A round
started by a timer starts the next one, so the timers form chains, and every job that finishes
while other jobs wait for a core adds a chain: after k such jobs the scheduler runs about k rounds
a second, each of which stats every input of every ready job. On 2 cores the miniature paper run
(483 jobs, hundreds of them waiting at a time) spent 394 CPU-seconds of its 14 minutes in
Snakemake's main process, 47 with the timers coalesced (and finished in 11 minutes); a workflow of
150 CPU-bound jobs of 0.3 s ran 1,005 scheduling rounds instead of 185
(``benchmarks/bench_rescheduling.py``). The timers are also ordinary threads, so a run waits for
the last one (up to a second) before it exits.

:func:`coalesce_for_workflow` (called by the Snakefile when the config key
``coalesce_rescheduling`` is true, the default) replaces that method for the run's Snakemake
process: a round's request for another round is dropped when a timer already pending fires no
later than the new one would, since the round that timer starts considers every ready job; a
request for an earlier round (a shorter delay) still starts its own timer. The timers are daemon
threads, so they do not hold the process at its exit. Which jobs run, and their outputs, are
unchanged; only the number of idle rounds falls. Should Snakemake rename the method or its
scheduler's semaphore, nothing is replaced and the run schedules as before.
"""

from __future__ import annotations

import atexit
import json
import threading
import time
from pathlib import Path

#: the replaced method's name in snakemake.scheduling.job_scheduler.JobScheduler (sic)
METHOD = "_schedule_reevalutation"
_MARK = "_dpcl_coalesced"
_DUE = "_dpcl_reevaluation_due"
_lock = threading.Lock()


def _job_scheduler():
    """Snakemake's JobScheduler class (its module moved in 9.0), or None."""
    import importlib

    for module in ("snakemake.scheduling.job_scheduler", "snakemake.scheduler"):
        try:
            return importlib.import_module(module).JobScheduler
        except (ImportError, AttributeError):
            continue
    return None


def coalesce_for_workflow(enabled: bool) -> bool:
    """Called by the Snakefile: when ``enabled`` (config key ``coalesce_rescheduling``), make this
    process's Snakemake keep at most one pending re-scheduling timer (see the module's text).
    Idempotent. Returns whether the coalescing method is in place."""
    cls = _job_scheduler()
    original = getattr(cls, METHOD, None) if cls is not None else None
    if original is None:
        return False
    if getattr(original, _MARK, False):
        return True
    if not enabled:
        return False

    def schedule_reevaluation(self, delay):
        semaphore = getattr(self, "_open_jobs", None)
        if not hasattr(semaphore, "release"):  # a Snakemake whose scheduler is built otherwise
            return original(self, delay)
        due = time.monotonic() + delay
        with _lock:
            pending = getattr(self, _DUE, None)
            if pending is not None and pending <= due:
                return  # the pending timer starts a round no later than this one would
            setattr(self, _DUE, due)

        def wake():
            with _lock:
                if getattr(self, _DUE, None) == due:
                    setattr(self, _DUE, None)
            semaphore.release()

        timer = threading.Timer(delay, wake)
        timer.daemon = True
        timer.start()

    setattr(schedule_reevaluation, _MARK, True)
    schedule_reevaluation.__wrapped__ = original
    setattr(cls, METHOD, schedule_reevaluation)
    return True


def count_rounds(path: str | Path) -> bool:
    """Diagnostics: count this process's Snakemake scheduling rounds (calls of its job selector) and
    write the count to ``path`` (JSON) when the process exits (the benchmark and the tests use it).
    Returns whether Snakemake's job selector was found."""
    cls = _job_scheduler()
    select = getattr(cls, "job_selector", None) if cls is not None else None
    if select is None:
        return False
    rounds, target = [0], Path(path).resolve()  # the folder it is called from, whatever the exit's

    def counted(self, jobs):
        rounds[0] += 1
        return select(self, jobs)

    cls.job_selector = counted
    atexit.register(lambda: target.write_text(json.dumps(rounds[0])))
    return True


def restore() -> None:
    """Put Snakemake's own method back (tests)."""
    cls = _job_scheduler()
    current = getattr(cls, METHOD, None) if cls is not None else None
    if current is not None and getattr(current, _MARK, False):
        setattr(cls, METHOD, current.__wrapped__)
