"""[Desai2021] Lemma 2 judged (the published claim of :mod:`dpcl.learners.desai`): the verdicts under
add/remove and under [Desai2021] Def. 2 with PLD both ways, and the check that recomputes a written claim.

Only public parameters enter (σ, q, q_ref, steps, T, δ and the claimed ε); how the claim is calibrated
(:func:`dpcl.learners.desai.lemma2_noise`) and written (:func:`dpcl.learners.desai.desai_claim`) stays with
the learner. The accounting behind it is explained in the learner's module docstring.
"""

from __future__ import annotations

import functools
import math

from ..privacy.accounting import REDERIVE_TOL
from ..privacy.sgd_accounting import epsilon as sgd_epsilon
from ..privacy.verdict import Verdict, overall_verdict

#: adjacencies under which Lemma 2's claim is judged (``Verdict.adjacency``)
ADJ_ADD_REMOVE = "add/remove one individual (task-wise, [LabelSpace] App. B)"
ADJ_DEF2 = "[Desai2021] Def. 2 (a training record and its memory copy change together)"
#: finer PLD grid for the lower bounds: the optimistic PLD loses up to one grid step per composed
#: step that reads the record, so thousands of reads need a finer grid than the upper bound does
LOWER_DISCRETIZATION = 2e-5
THREAT_MODEL = (
    "the view the accounting (Lemma 2's moments accountant included) covers: every step's noisy sums "
    "g and g_ref; clipped gradients may be anything of norm <= C"
)


def reread_history(sigma: float, q_ref: float, steps: int, block: int, n_tasks: int) -> list[tuple]:
    """PLD history of block M_block's rereads (CalGref, Alg. 1 l. 20-23): at each of ``steps`` steps
    of every later task τ = block+1..T−1 one of the τ blocks is chosen uniformly, so M_block with
    probability 1/τ, and then read at rate q_ref (:mod:`dpcl.privacy.pld`, ``choice_prob``)."""
    return [(sigma, q_ref, steps, 1.0 / tau) for tau in range(block + 1, n_tasks)]


def claim_verdicts(
    sigma: float, q: float, q_ref: float, steps: int, n_tasks: int, delta: float, *, claimed: float
) -> tuple[list[Verdict], dict]:
    """Lemma 2's claim (ε = ``claimed`` at δ) judged under both adjacencies with PLD both ways.

    Add/remove one individual: an individual is in one part only (the train part of one task, or
    one block), so it has the whole training δ. The train part is (σ, q, steps); block M_0 is the
    worst block (its rereads contain every other block's): :func:`reread_history`. Upper bound:
    pessimistic PLD of the choice-revealed mixture (valid: revealing the choice adds information).
    Lower bound: optimistic PLD of the same pairs, which neighbouring data sets realise — the train
    part exactly (every other gradient zero), the rereads in the limit where the other blocks'
    gradient sums lie far from M_0's, so the chosen block can be read off the output.

    [Desai2021] Def. 2: a training sample and a memory sample change together (why Lemma 2 adds
    ε_i + ε'_i): the train part of one task composed with M_0's rereads. Its neighbours include
    those of add/remove in M_0 alone, so its lower bound is at least that one.
    Returns the two verdicts and the numbers behind them.
    """
    from ..privacy import pld

    train = [(sigma, q, steps)]
    block0 = reread_history(sigma, q_ref, steps, 0, n_tasks)

    def both(history):
        if not history:
            return 0.0, 0.0
        return pld.epsilon_upper(history, delta), pld.epsilon_lower(history, delta, LOWER_DISCRETIZATION)

    tr_up, tr_lo = both(train)
    b0_up, b0_lo = both(block0)
    d2_up, d2_lo = both(train + block0)
    upper = "pessimistic PLD (dp_accounting, connect-the-dots), block choice revealed"
    lower = f"optimistic PLD of the realised dominating pair (grid {LOWER_DISCRETIZATION:g})"
    later = n_tasks - 1
    verdicts = [
        Verdict(
            ADJ_ADD_REMOVE,
            claimed,
            delta,
            max(tr_up, b0_up),
            upper,
            max(tr_lo, b0_lo),
            lower,
            f"worst individual: {'block M_0, reread at every step of tasks 1..' + str(later) if later else 'the train part'}"
            f" (train part ε ∈ [{tr_lo:.4g}, {tr_up:.4g}], M_0 ε ∈ [{b0_lo:.4g}, {b0_up:.4g}]); full δ: each "
            f"individual is in one part only; threat model: {THREAT_MODEL}",
        ),
        Verdict(
            ADJ_DEF2,
            claimed,
            delta,
            d2_up,
            upper,
            max(d2_lo, b0_lo),
            lower,
            "a train-part sample of one task and a sample of block M_0 change together: "
            f"(σ, q, {steps} steps) composed with M_0's rereads; threat model: {THREAT_MODEL}",
        ),
    ]
    numbers = {
        "epsilon_train_part": [tr_lo, tr_up],
        "epsilon_block0": [b0_lo, b0_up],
        "epsilon_def2": [max(d2_lo, b0_lo), d2_up],
    }
    return verdicts, numbers


def verify_claim(claim: dict, tasks: dict[int, list[dict]], n_tasks: int) -> None:
    """Recompute a written Lemma 2 claim from the ledger's public parameters (the learner's check,
    :class:`dpcl.privacy.verify.LedgerSpec`): the claimed ε_i + ε'_i for the entries' σ, q, q_ref
    and steps, and both verdicts with their bounds. A stated upper bound below ours, a lower bound
    above ours or another verdict is rejected (:class:`dpcl.privacy.ledger.LedgerError`)."""
    from ..privacy.ledger import LABEL_SPACE_KINDS as LABEL_KINDS
    from ..privacy.ledger import LedgerError

    train = next((e for e in tasks.get(0, []) if e.get("part") == "train"), None)
    ref = next((e for e in tasks.get(0, []) if e.get("part") == "reference"), None)
    if train is None or train["mechanism"] != "dpsgd":
        return  # a non-private run: no claim to check
    sigma, q, steps = float(train["noise_multiplier"]), float(train["sample_rate"]), int(train["steps"])
    q_ref = float(ref["sample_rate"]) if ref is not None else q
    if ref is not None and (float(ref["noise_multiplier"]), int(ref["steps_per_task"])) != (sigma, steps):
        raise LedgerError("published_claim: Alg. 1 has one σ and the same steps per task for g and g_ref")
    delta = float(train["delta"])
    acct = claim.get("calibration_accountant")
    if acct not in ("prv", "rdp"):
        raise LedgerError(f"published_claim.calibration_accountant: {acct!r} is not prv or rdp")
    eps_i = sgd_epsilon(sigma, q, steps, delta / 2, acct)
    eps_p = eps_i if q_ref == q else sgd_epsilon(sigma, q_ref, steps, delta / 2, acct)
    stated = claim.get("claimed_epsilon")
    if (
        not isinstance(stated, int | float)
        or isinstance(stated, bool)
        or not math.isclose(float(stated), eps_i + eps_p, rel_tol=REDERIVE_TOL)
    ):
        raise LedgerError(
            f"published_claim.claimed_epsilon: the file says {stated!r}, Lemma 2 for the entries' σ, q, q_ref and "
            f"steps gives {eps_i + eps_p!r}"
        )
    claimed = eps_i + eps_p

    def close(key: str, want: float, got=None) -> None:
        got = claim.get(key) if got is None else got
        if math.isinf(want) and got in ("inf", math.inf):  # the Label Oracle's release
            return
        if not _is_number(got) or not math.isclose(got, want, rel_tol=REDERIVE_TOL):
            raise LedgerError(f"published_claim.{key}: the file says {got!r}, the parameters give {want!r}")

    close("epsilon_i", eps_i)
    close("epsilon_prime_i", eps_p)
    close("delta", delta)
    per_task = claim.get("per_task_epsilon")
    if not isinstance(per_task, list) or len(per_task) != n_tasks:
        raise LedgerError(f"published_claim.per_task_epsilon: expected {n_tasks} values")
    for t, v in enumerate(per_task):
        close(f"per_task_epsilon[{t}]", claimed, v if v is not None else "none")
    later = claim.get("block0_later_tasks")
    if isinstance(later, bool) or later != n_tasks - 1:
        raise LedgerError(
            f"published_claim.block0_later_tasks: a {n_tasks}-task run rereads M_0 in {n_tasks - 1}"
        )
    label = max(
        (float(e["epsilon"]) for es in tasks.values() for e in es if e["mechanism"] in LABEL_KINDS),
        default=0.0,
    )
    close("label_release_epsilon", label)
    verdicts, numbers = cached_claim_verdicts(sigma, q, q_ref, steps, n_tasks, delta, claimed=claimed)
    for key, (lo, up) in numbers.items():
        got = claim.get(key)
        if (
            not isinstance(got, list)
            or len(got) != 2
            or not all(_is_number(v) and v >= 0 for v in got)
            or got[0] > lo * (1 + REDERIVE_TOL)
            or got[1] < up * (1 - REDERIVE_TOL)
        ):
            raise LedgerError(
                f"published_claim.{key}: the file says {got!r}, the parameters give [{lo!r}, {up!r}]"
            )
    rows = claim.get("verdicts")
    if not isinstance(rows, list) or len(rows) != len(verdicts):
        raise LedgerError(f"published_claim.verdicts: expected {len(verdicts)} verdicts (add/remove, Def. 2)")
    for i, (row, v) in enumerate(zip(rows, verdicts, strict=True)):
        where = f"published_claim.verdicts[{i}]"
        if (
            not isinstance(row, dict)
            or row.get("adjacency") != v.adjacency
            or row.get("verdict") != v.verdict
        ):
            raise LedgerError(f"{where}: expected the verdict {v.verdict!r} under {v.adjacency!r}")
        close(f"verdicts[{i}].claimed_epsilon", claimed, row.get("claimed_epsilon"))
        close(f"verdicts[{i}].delta", delta, row.get("delta"))
        up, lo = row.get("upper_bound"), row.get("lower_bound")
        if not isinstance(up, int | float) or isinstance(up, bool) or up < v.upper_bound * (1 - REDERIVE_TOL):
            raise LedgerError(
                f"{where}.upper_bound: the file says {up!r}, the parameters give {v.upper_bound!r}"
            )
        if not isinstance(lo, int | float) or isinstance(lo, bool) or lo > v.lower_bound * (1 + REDERIVE_TOL):
            raise LedgerError(
                f"{where}.lower_bound: the file says {lo!r}, the parameters give {v.lower_bound!r}"
            )
    if claim.get("verdict") != overall_verdict(verdicts):
        raise LedgerError(f"published_claim.verdict: expected {overall_verdict(verdicts)!r}")
    if claim.get("holds") is not (overall_verdict(verdicts) == "certified"):
        raise LedgerError("published_claim.holds: true exactly when the claim is certified")
    accounted = claim.get("accounted_training_epsilon")
    if not _is_number(accounted) or accounted < verdicts[0].upper_bound * (1 - REDERIVE_TOL):
        raise LedgerError(
            f"published_claim.accounted_training_epsilon: the file says {accounted!r}, the parameters give "
            f"{verdicts[0].upper_bound!r}"
        )


def _is_number(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


@functools.lru_cache(maxsize=64)
def cached_claim_verdicts(sigma, q, q_ref, steps, n_tasks, delta, *, claimed):
    """:func:`claim_verdicts`, remembered: the claim and its verifier ask for the same numbers."""
    return claim_verdicts(sigma, q, q_ref, steps, n_tasks, delta, claimed=claimed)
