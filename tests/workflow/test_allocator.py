"""The jobs' allocator settings (dpcl.allocator): set for the jobs unless the user set them, and in a
process started with them glibc reuses a freed large array instead of faulting in fresh pages."""

import os
import platform
import subprocess
import sys
import textwrap

import pytest

from dpcl import allocator, worker


@pytest.fixture
def clean_env(monkeypatch):
    for k in allocator.KEEP_FREED:
        monkeypatch.delenv(k, raising=False)
    return monkeypatch


def test_on_sets_both_variables_for_the_jobs(clean_env):
    assert allocator.configure_for_workflow(True) == allocator.KEEP_FREED
    assert {k: os.environ[k] for k in allocator.KEEP_FREED} == allocator.KEEP_FREED


def test_off_sets_nothing(clean_env):
    assert allocator.configure_for_workflow(False) == {}
    assert not any(k in os.environ for k in allocator.KEEP_FREED)


@pytest.mark.parametrize("keep", [True, False])
def test_the_users_own_setting_wins(clean_env, keep):
    clean_env.setenv("MALLOC_TRIM_THRESHOLD_", "131072")
    assert allocator.configure_for_workflow(keep) == {"MALLOC_TRIM_THRESHOLD_": "131072"}
    assert "MALLOC_MMAP_MAX_" not in os.environ and os.environ["MALLOC_TRIM_THRESHOLD_"] == "131072"


def test_the_warm_process_is_named_after_the_settings(clean_env):
    """A warm process forks its children with its own allocator state: another setting gets another one."""
    plain = worker._library_key()
    allocator.configure_for_workflow(True)
    assert worker._library_key() != plain


FAULTS = textwrap.dedent("""
    import resource, numpy as np
    n = 64 << 20  # bytes: twice glibc's largest mmap threshold
    def faults_of_a_fresh_array():
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        a = np.empty(n, dtype=np.uint8)
        a.fill(1)  # touches every page
        after = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        del a
        return after - before
    faults_of_a_fresh_array()  # the first one faults in any case
    print(faults_of_a_fresh_array(), n // resource.getpagesize())
""")


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc variables")
@pytest.mark.parametrize("keep", [True, False])
def test_a_freed_large_array_is_reused_only_with_the_settings(keep):
    env = {k: v for k, v in os.environ.items() if k not in allocator.KEEP_FREED}
    if keep:
        env.update(allocator.KEEP_FREED)
    res = subprocess.run(
        [sys.executable, "-c", FAULTS], env=env, capture_output=True, text=True, timeout=60, check=True
    )
    faults, pages = map(int, res.stdout.split())
    # a fresh mapping faults at least once per 2 MiB (512 pages), huge pages or not
    if keep:  # the second array lies where the first was: its pages are resident already
        assert faults < pages // 512, (faults, pages)
    else:  # glibc maps it anew and unmaps it on free
        assert faults >= pages // 512, (faults, pages)
