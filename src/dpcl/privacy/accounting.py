"""Privacy budgets and their split ([LabelSpace] Sec. 3, App. B); the ledger is in
:mod:`dpcl.privacy.ledger`.

Privacy model: task-wise DP under add/remove adjacency. Within a task the mechanisms
(label release, then training) compose by basic composition; across tasks every
individual is in exactly one task, so the per-task guarantees compose in parallel
(Thm B.7): the stream is (max_t ε_t, max_t δ_t)-DP.

"""

from __future__ import annotations

import math
from dataclasses import dataclass

ADJACENCY = "add/remove one individual; task-wise DP (each individual in exactly one task)"
REL_TOL = 1e-12  # float slack when comparing a composed sum with its target
#: relative slack when an accountant's ε (or a mechanism's δ) that a file states is compared with the same
#: accountant's re-derivation from the file's parameters. The PRV and PLD accountants discretise and convolve
#: (FFTs, long sums of exp and log), and the last bits of numpy's vectorised kernels differ between CPUs (AVX-512
#: and AVX2 code paths), which moves their ε by up to ~3e-9 relative: the default's ledgers written on one
#: machine re-derive 2e-11 to 2.7e-9 higher on another. A stated figure that close below its re-derivation is
#: the same figure (the accountants' own discretisation error is orders of magnitude larger); every composed
#: sum is still held to what it composes, and the total to its target, with :data:`REL_TOL`.
REDERIVE_TOL = 1e-7


class PrivacyBudgetExceeded(RuntimeError):
    """A run's composed guarantee exceeds its configured target."""


@dataclass(frozen=True)
class Budget:
    """An (ε, δ) pair; ε = inf means non-private."""

    epsilon: float
    delta: float

    @property
    def private(self) -> bool:
        return math.isfinite(self.epsilon)


def split_budget(total: Budget, fraction: float) -> tuple[Budget, Budget]:
    """Give fraction f of **both** ε and δ to label release and the rest to training."""
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"label-release budget fraction must lie in (0, 1), got {fraction!r}")
    if not total.private:
        return Budget(math.inf, 0.0), Budget(math.inf, 0.0)
    eps_l = total.epsilon * fraction
    delta_l = total.delta * fraction
    return Budget(eps_l, delta_l), Budget(total.epsilon - eps_l, total.delta - delta_l)
