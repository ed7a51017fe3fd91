"""The jobs' allocator settings (the Snakefile's ``KEEP_FREED_MEMORY``, config key ``keep_freed_memory``):
in a process started with them glibc reuses a freed large array instead of faulting in fresh pages."""

import ast
import os
import platform
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SNAKEFILE = Path(__file__).resolve().parents[2] / "Snakefile"


def _keep_freed() -> dict[str, str]:
    """The Snakefile's ``KEEP_FREED_MEMORY``, read from its text (the Snakefile is not Python)."""
    for line in SNAKEFILE.read_text().splitlines():
        if line.startswith("KEEP_FREED_MEMORY = "):
            node = ast.parse(line).body[0].value
            return {
                ast.literal_eval(k): str(eval(compile(ast.Expression(v), "<v>", "eval")))
                for k, v in zip(node.keys, node.values, strict=True)
            }
    raise AssertionError("the Snakefile no longer sets KEEP_FREED_MEMORY")


def test_the_settings_are_glibcs_documented_variables():
    keep = _keep_freed()
    assert keep == {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(1 << 40)}


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
    keep_freed = _keep_freed()
    env = {k: v for k, v in os.environ.items() if k not in keep_freed}
    if keep:
        env.update(keep_freed)
    res = subprocess.run(
        [sys.executable, "-c", FAULTS], env=env, capture_output=True, text=True, timeout=60, check=True
    )
    faults, pages = map(int, res.stdout.split())
    # a fresh mapping faults at least once per 2 MiB (512 pages), huge pages or not
    if keep:  # the second array lies where the first was: its pages are resident already
        assert faults < pages // 512, (faults, pages)
    else:  # glibc maps it anew and unmaps it on free
        assert faults >= pages // 512, (faults, pages)
