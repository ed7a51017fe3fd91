"""The PLD accountant's subsampled-Gaussian PLD (`dpcl.privacy.pld_gaussian`) against dp_accounting's own.

dp_accounting's ``from_gaussian_mechanism`` inverts the subsampled privacy loss at each point of its
grid in a Python loop (pessimistic: connect-the-dots; optimistic: privacy buckets); dpcl's builds the
same PLD through dp_accounting's code with the inversions done in one numpy pass. For each
(σ, q) at dpcl's discretisation (1e-4) and both estimates: the time of one construction each way,
their ratio, and the check that the two PMFs are equal bit for bit (asserted).

Run: ``python benchmarks/bench_pld.py [--repeat 3]``.
"""

from __future__ import annotations

import argparse

from _compare import same_pld
from _timing import median_time
from dp_accounting.pld import privacy_loss_distribution as dp_pld

from dpcl.privacy.pld import VALUE_DISCRETIZATION
from dpcl.privacy.pld_gaussian import from_gaussian_mechanism

# (σ, q): a strict DP-SGD run (ε = 1 at q = 0.01), a loose one (ε = 8 at q = 0.1), DP-AL's noise at a
# high rate, a large σ at a small rate
CASES = [(0.8, 0.01), (1.1, 0.1), (0.5, 0.37), (3.0, 0.004)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"subsampled-Gaussian PLD at discretisation {VALUE_DISCRETIZATION:g}: dpcl vs dp_accounting")
    totals = [0.0, 0.0]
    for pessimistic in (True, False):
        for sigma, q in CASES:
            kw = dict(
                standard_deviation=sigma,
                sampling_prob=q,
                pessimistic_estimate=pessimistic,
                value_discretization_interval=VALUE_DISCRETIZATION,
                use_connect_dots=pessimistic,
            )
            ours = from_gaussian_mechanism(**kw)
            theirs = dp_pld.from_gaussian_mechanism(sensitivity=1.0, **kw)
            assert same_pld(ours, theirs), (sigma, q, pessimistic)
            t_ours = median_time(lambda kw=kw: from_gaussian_mechanism(**kw), args.repeat)
            t_theirs = median_time(
                lambda kw=kw: dp_pld.from_gaussian_mechanism(sensitivity=1.0, **kw), args.repeat
            )
            totals[0] += t_ours
            totals[1] += t_theirs
            kind = "pessimistic" if pessimistic else "optimistic "
            print(
                f"  {kind} sigma {sigma:<4g} q {q:<6g}: {1e3 * t_ours:7.1f} ms vs {1e3 * t_theirs:7.1f} ms "
                f"(ratio {t_ours / t_theirs:.2f}; identical PMFs)"
            )
    print(f"all: {totals[0]:.2f} s vs {totals[1]:.2f} s (ratio {totals[0] / totals[1]:.2f})")


if __name__ == "__main__":
    main()
