"""The memory allocator of the workflow's jobs: keep the memory a job frees for its next arrays.

glibc's ``malloc`` serves every request above its mmap threshold (adjusted as a process runs, at
most 32 MiB on 64-bit systems) with a fresh ``mmap`` and hands it back to the system on ``free``.
The next array of that size is mapped again and the kernel faults in and zeroes each of its 4 KiB
pages anew. A DP-SGD step over Public Labels ×1000 (100,000-200,000 outputs) makes several such
arrays per chunk (logits, their gradients, the clipped sum, the noise), so on a CPU these faults
cost about as much as the arithmetic: a FiLM member of the miniature's ImageNet-R ×1000 run trains
in 0.7 instead of 1.4 s per task with the settings below (``benchmarks/bench_allocator.py``).

With ``MALLOC_MMAP_MAX_=0`` no request is mapped on its own and with a trim threshold beyond any
job's memory (``MALLOC_TRIM_THRESHOLD_``) the heap is never shrunk, so freed arrays are reused
in place. These are glibc's documented environment variables (``mallopt(3)``), read when a process
starts: the Snakefile sets them for its jobs (config key ``keep_freed_memory``, default on), which
inherit them, as does the warm worker (:mod:`dpcl.worker`) that a job starts. The arithmetic is the
same, so every output is the same bit for bit; a job's resident memory stays at its peak until it
exits. Other C libraries (macOS, musl) ignore the variables. A user's own setting of either
variable wins.
"""

from __future__ import annotations

import os

#: glibc's environment variables and the values that keep freed memory in the process
#: (no request mapped on its own; a trim threshold of 1 TiB, beyond any job's heap)
KEEP_FREED = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(1 << 40)}


def configure_for_workflow(keep_freed_memory: bool) -> dict[str, str]:
    """Called by the Snakefile: when the config key ``keep_freed_memory`` is true, set
    :data:`KEEP_FREED` in the environment the jobs inherit, unless the user's environment sets
    either variable already (theirs wins, both are left as they are). Returns what the jobs get
    ({} when nothing is set)."""
    if any(k in os.environ for k in KEEP_FREED):
        return {k: os.environ[k] for k in KEEP_FREED if k in os.environ}
    if not keep_freed_memory:
        return {}
    os.environ.update(KEEP_FREED)
    return dict(KEEP_FREED)
