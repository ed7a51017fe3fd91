"""Three-valued verdicts on a published privacy claim, under a named adjacency.

A claim "(ε_claim, δ)-DP" is judged with the tightest bounds we have, never with whichever
bound was at hand:

- ``certified``: a valid **upper** bound (pessimistic PLD, PRV with its error bound added,
  or RDP) is within the claim;
- ``violated``: a valid **lower** bound exceeds the claim — the optimistic PLD of a dominating
  pair that some neighbouring data sets realise, or an empirical audit's Clopper-Pearson bound;
- ``not_certified``: neither: our upper bound exceeds the claim but no lower bound does.

``guarantee_holds`` in a ledger keeps meaning "certified". Every verdict names the adjacency
under which it was computed: a method can be certified under one and violated under another.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

CERTIFIED, VIOLATED, NOT_CERTIFIED = "certified", "violated", "not_certified"
VERDICTS = (CERTIFIED, VIOLATED, NOT_CERTIFIED)
REL_TOL = 1e-9  # float slack when comparing a bound with the claim


def classify(claim: float, upper: float | None, lower: float | None) -> str:
    """The verdict of a claim given an upper bound (certifies) and a lower bound (refutes).

    ``None`` means no such bound is available. A non-finite claim (ε = ∞) is trivially certified.
    """
    for name, v in (("claim", claim), ("upper", upper), ("lower", lower)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float) or math.isnan(v)):
            raise ValueError(f"{name} must be a number (or None for no bound), got {v!r}")
    if math.isinf(claim):
        return CERTIFIED
    if lower is not None and upper is not None and lower > upper * (1 + REL_TOL):
        raise ValueError(f"lower bound {lower} exceeds upper bound {upper}: the bounds are inconsistent")
    if upper is not None and upper <= claim * (1 + REL_TOL):
        return CERTIFIED
    if lower is not None and lower > claim * (1 + REL_TOL):
        return VIOLATED
    return NOT_CERTIFIED


@dataclass(frozen=True)
class Verdict:
    """One verdict on a claimed ε at δ under a named adjacency, with the bounds that decide it."""

    adjacency: str
    claimed_epsilon: float
    delta: float
    upper_bound: float | None
    upper_method: str | None
    lower_bound: float | None = None
    lower_method: str | None = None
    note: str = ""

    @property
    def verdict(self) -> str:
        return classify(self.claimed_epsilon, self.upper_bound, self.lower_bound)

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, **asdict(self)}


def overall_verdict(verdicts: list[Verdict]) -> str:
    """The verdict on a claim judged under several adjacencies: ``violated`` if any adjacency the
    claim is stated for violates it, else ``certified`` only if every one certifies it."""
    got = [v.verdict for v in verdicts]
    if not got:
        raise ValueError("no verdicts to combine")
    if VIOLATED in got:
        return VIOLATED
    return CERTIFIED if all(g == CERTIFIED for g in got) else NOT_CERTIFIED


def claim_summary(claim: dict) -> dict:
    """A published claim's verdicts for a run's metrics: overall, and per adjacency."""
    return {
        "source": claim["source"],
        "claimed_epsilon": claim["claimed_epsilon"],
        "verdict": claim["verdict"],
        "verdicts": {v["adjacency"]: v["verdict"] for v in claim["verdicts"]},
    }
