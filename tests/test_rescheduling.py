"""Snakemake's re-scheduling timers coalesced (dpcl.rescheduling): a request while a timer is pending
adds no round, an earlier one still gets its own, and a real Snakemake run of short jobs that wait
for cores schedules about one round per job instead of piling up timers."""

import subprocess
import sys
import textwrap
import threading
import time

import pytest
from snakemake import __version__ as SNAKEMAKE

from dpcl import rescheduling

JobScheduler = rescheduling._job_scheduler()
if getattr(JobScheduler, rescheduling.METHOD, None) is None:
    pytest.skip(f"Snakemake {SNAKEMAKE} schedules otherwise: nothing to coalesce", allow_module_level=True)


@pytest.fixture
def coalesced():
    was = getattr(getattr(JobScheduler, rescheduling.METHOD), "_dpcl_coalesced", False)
    assert rescheduling.coalesce_for_workflow(True)
    yield getattr(JobScheduler, rescheduling.METHOD)
    if not was:
        rescheduling.restore()


class Scheduler:
    """What the method uses of Snakemake's JobScheduler: the semaphore a round waits on."""

    def __init__(self):
        self._open_jobs = threading.Semaphore(0)


def test_off_leaves_snakemakes_method():
    if getattr(getattr(JobScheduler, rescheduling.METHOD), "_dpcl_coalesced", False):
        pytest.skip("coalesced in this process already")
    own = getattr(JobScheduler, rescheduling.METHOD)
    assert rescheduling.coalesce_for_workflow(False) is False
    assert getattr(JobScheduler, rescheduling.METHOD) is own


def test_requests_while_a_timer_is_pending_add_no_round(coalesced):
    s = Scheduler()
    for _ in range(20):
        coalesced(s, 0.05)
    assert s._open_jobs.acquire(timeout=30)  # one round
    assert not s._open_jobs.acquire(timeout=0.5)  # and no other: the 19 later requests were dropped


def test_an_earlier_request_gets_its_own_timer(coalesced):
    s = Scheduler()
    coalesced(s, 3600)
    coalesced(s, 0.05)
    assert s._open_jobs.acquire(timeout=30)  # long before the pending hour


def test_a_request_after_the_timer_fired_starts_a_new_one(coalesced):
    s = Scheduler()
    for _ in range(3):
        coalesced(s, 0.01)
        assert s._open_jobs.acquire(timeout=30)


def test_it_is_idempotent_and_the_timers_are_daemons(coalesced):
    assert rescheduling.coalesce_for_workflow(True)
    assert getattr(JobScheduler, rescheduling.METHOD) is coalesced  # not wrapped twice
    before = set(threading.enumerate())
    coalesced(Scheduler(), 3600)
    (timer,) = set(threading.enumerate()) - before
    assert timer.daemon  # a run does not wait for it at its exit


WORKFLOW = textwrap.dedent("""
    from dpcl.rescheduling import coalesce_for_workflow, count_rounds

    coalesce_for_workflow(config["coalesce"])
    count_rounds("rounds.json")

    rule all:
        input: expand("out/{i}.txt", i=range(JOBS))

    rule job:
        output: "out/{i}.txt"
        shell: "sleep 0.2; touch {output}"
""")


@pytest.mark.parametrize("coalesce", [True, False])
def test_a_run_of_waiting_jobs_schedules_about_one_round_per_job(tmp_path, coalesce):
    """60 jobs of 0.2 s on 2 cores: with Snakemake's own timers every finished job adds a one-second
    chain of rounds (several hundred rounds in all); coalesced, a round per finished job and at most
    one per second besides."""
    jobs = 60
    (tmp_path / "Snakefile").write_text(f"JOBS = {jobs}\n" + WORKFLOW)
    start = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "2", "--config", f"coalesce={coalesce}", "-q"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    elapsed = time.monotonic() - start
    assert len(list((tmp_path / "out").iterdir())) == jobs
    rounds = int((tmp_path / "rounds.json").read_text())
    bound = jobs + 2 * elapsed + 10  # a round per job, a timer's round per second, the start and end
    if coalesce:
        assert rounds <= bound, (rounds, elapsed)
    elif rounds <= bound:  # what the coalescing is for, shown: Snakemake's own timers pile up
        pytest.skip(
            f"Snakemake {SNAKEMAKE} no longer piles up its timers ({rounds} rounds): nothing to coalesce"
        )
