"""The task-ledger verifier's check of the block that summarises a published method's claim for its
reader (``published_claim``, with its three-valued verdicts). Each stated figure is recomputed from
the ledger's entries; one that states less than they spend is rejected. A learner's own summary
block is checked by the function its ``LedgerSpec`` names (``summary_check``)."""

from __future__ import annotations

from typing import Any

from .accounting import Budget
from .ledger import LABEL_SPACE_KINDS, Ledger, LedgerError
from .ledger_fields import at_least, mapping, number, string
from .verdict import VERDICTS, Verdict, classify, overall_verdict


def training_total(ledger: Ledger) -> float:
    """ε of the training mechanisms alone (label-space entries left out), worst task."""
    worst = 0.0
    for entries in ledger.tasks.values():
        train = [e for e in entries if e["mechanism"] not in LABEL_SPACE_KINDS]
        shared = sum(float(e["epsilon"]) for e in train if e.get("part") is None)
        parts: dict[str, float] = {}
        for e in train:
            if e.get("part") is not None:
                parts[e["part"]] = parts.get(e["part"], 0.0) + float(e["epsilon"])
        worst = max(worst, shared + max(parts.values(), default=0.0))
    return worst


def check_claim(claim: Any, total: Budget, ledger: Ledger) -> None:
    """A published claim: its stated accounted figures must not understate the ledger's (the
    per-individual worst case ``accounted_epsilon`` includes the label release; the training
    mechanisms alone are ``accounted_training_epsilon``), and its verdicts must follow their bounds."""
    claim = mapping(claim, "published_claim")
    if "claimed_epsilon" in claim:
        number(claim["claimed_epsilon"], "published_claim.claimed_epsilon", allow_inf=True)
    if "accounted_epsilon" in claim:
        stated = number(claim["accounted_epsilon"], "published_claim.accounted_epsilon", allow_inf=True)
        at_least(stated, total.epsilon, "published_claim.accounted_epsilon (the per-individual worst case)")
    if "accounted_training_epsilon" in claim:
        stated = number(
            claim["accounted_training_epsilon"], "published_claim.accounted_training_epsilon", allow_inf=True
        )
        at_least(stated, training_total(ledger), "published_claim.accounted_training_epsilon")
    if "verdict" not in claim:
        return
    verdict = claim["verdict"]
    if verdict not in VERDICTS:
        raise LedgerError(f"published_claim.verdict: {verdict!r} is not one of {list(VERDICTS)}")
    rows = claim.get("verdicts")
    if not isinstance(rows, list) or not rows:
        raise LedgerError("published_claim.verdicts: a verdict needs its per-adjacency verdicts")
    parsed = []
    for i, row in enumerate(rows):
        row = mapping(row, f"published_claim.verdicts[{i}]")
        where = f"published_claim.verdicts[{i}]"
        string(row.get("adjacency"), f"{where}.adjacency")
        c = number(row.get("claimed_epsilon"), f"{where}.claimed_epsilon", allow_inf=True)
        up = row.get("upper_bound")
        lo = row.get("lower_bound")
        up = None if up is None else number(up, f"{where}.upper_bound", allow_inf=True)
        lo = None if lo is None else number(lo, f"{where}.lower_bound", allow_inf=True)
        number(row.get("delta"), f"{where}.delta")
        try:
            derived = classify(c, up, lo)
        except ValueError as e:
            raise LedgerError(f"{where}: {e}") from None
        if row.get("verdict") != derived:
            raise LedgerError(
                f"{where}.verdict: the file says {row.get('verdict')!r}, its bounds say {derived!r}"
            )
        parsed.append(Verdict(row["adjacency"], c, float(row["delta"]), up, row.get("upper_method"), lo))
    if overall_verdict(parsed) != verdict:
        raise LedgerError(
            f"published_claim.verdict: the file says {verdict!r}, its verdicts say {overall_verdict(parsed)!r}"
        )
