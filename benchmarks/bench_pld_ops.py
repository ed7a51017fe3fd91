"""The PLD bounds' composition and ε(δ) (`dpcl.privacy.pld_ops`) against dp_accounting's own methods.

dp_accounting's ``DensePLDPmf.compose`` truncates the convolution's tails, and its
``get_epsilon_for_delta`` walks the losses down from the largest, one element at a time in Python;
dpcl's does the same operations in numpy blocks. On histories shaped as dpcl composes them
(:func:`dpcl.learners.desai_verdicts.claim_verdicts`: a DP-SGD part, then rereads of block M_0 chosen
with probability 1/τ by each later task; the upper bound on dpcl's 1e-4 grid, the lower bound on
2e-5), from segment PLDs built once: the time to compose each history and to take its ε at δ = 1e-5,
each way, their ratios, and the check that the composed PMFs and the ε are equal bit for bit (asserted).

Run: ``python benchmarks/bench_pld_ops.py [--repeat 3]``.
"""

from __future__ import annotations

import argparse

import numpy as np
from _compare import same_pld
from _timing import median_time

from dpcl.learners.desai_verdicts import LOWER_DISCRETIZATION, reread_history
from dpcl.privacy import pld, pld_ops

DELTA = 1e-5
# (σ, q, q_ref, steps per task) of a Desai et al. run with 5 tasks: a strict and a loose budget
CASES = [(1.6, 0.04, 0.1, 250), (0.9, 0.1, 0.3, 100)]
N_TASKS = 5


def _compose(history, pessimistic, discretization, compose):
    out = None
    for s, q, n, p in history:
        seg = pld._segment_pld(s, q, n, pessimistic, discretization, p)
        out = seg if out is None else compose(out, seg)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"PLD composition and epsilon(delta = {DELTA:g}): dpcl vs dp_accounting")
    totals = np.zeros(4)
    for sigma, q, q_ref, steps in CASES:
        history = ((sigma, q, steps, 1.0), *reread_history(sigma, q_ref, steps, 0, N_TASKS))
        for pessimistic, grid in ((True, pld.VALUE_DISCRETIZATION), (False, LOWER_DISCRETIZATION)):
            ours = _compose(history, pessimistic, grid, pld_ops.compose)  # also builds the segments once
            theirs = _compose(history, pessimistic, grid, lambda a, b: a.compose(b))
            assert same_pld(ours, theirs), (sigma, q, pessimistic)
            eps_ours, eps_theirs = pld_ops.epsilon_for_delta(ours, DELTA), theirs.get_epsilon_for_delta(DELTA)
            assert eps_ours == eps_theirs, (eps_ours, eps_theirs)
            times = [
                median_time(
                    lambda h=history, p=pessimistic, g=grid: _compose(h, p, g, pld_ops.compose), args.repeat
                ),
                median_time(
                    lambda h=history, p=pessimistic, g=grid: _compose(h, p, g, lambda a, b: a.compose(b)),
                    args.repeat,
                ),
                median_time(lambda o=ours: pld_ops.epsilon_for_delta(o, DELTA), args.repeat),
                median_time(lambda t=theirs: t.get_epsilon_for_delta(DELTA), args.repeat),
            ]
            totals += times
            kind = "upper (pessimistic)" if pessimistic else "lower (optimistic) "
            print(
                f"  sigma {sigma:<4g} q {q:<5g} q_ref {q_ref:<4g} {kind} grid {grid:g}, "
                f"{len(ours._pmf_remove._probs):,} points: compose {times[0]:.3f} s vs {times[1]:.3f} s "
                f"({times[0] / times[1]:.2f}), epsilon {times[2]:.3f} s vs {times[3]:.3f} s "
                f"({times[2] / times[3]:.2f}); eps {eps_ours:.6g}, identical"
            )
    print(
        f"all: compose {totals[0]:.2f} s vs {totals[1]:.2f} s (ratio {totals[0] / totals[1]:.2f}), "
        f"epsilon {totals[2]:.2f} s vs {totals[3]:.2f} s (ratio {totals[2] / totals[3]:.2f}), "
        f"both {totals[0] + totals[2]:.2f} s vs {totals[1] + totals[3]:.2f} s "
        f"(ratio {(totals[0] + totals[2]) / (totals[1] + totals[3]):.2f})"
    )


if __name__ == "__main__":
    main()
