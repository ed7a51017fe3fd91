"""The task-ledger verifier's checks of the blocks that summarise a ledger for its reader: DP-A-GEM's
parts and worst case (``agem``) and a published method's claim with its three-valued verdicts
(``published_claim``). Each stated figure is recomputed from the ledger's entries; one that states
less than they spend is rejected."""

from __future__ import annotations

from typing import Any

from .accounting import REDERIVE_TOL, Budget
from .ledger import LABEL_SPACE_KINDS, Ledger, LedgerError
from .ledger_fields import at_least, budget, integer, mapping, number, string
from .verdict import VERDICTS, Verdict, classify, overall_verdict


def check_agem_summary(block: Any, ledger: Ledger, total: Budget) -> None:
    block = mapping(block, "agem")
    train = mapping(block.get("train_part"), "agem.train_part")
    t0 = ledger.tasks.get(0, [])
    first = next((e for e in t0 if e.get("part") == "train"), None)
    if first is None:
        raise LedgerError("agem: the ledger has no train part to summarise")
    for key in ("noise_multiplier", "sample_rate", "steps"):
        got = (integer if key == "steps" else number)(train.get(key), f"agem.train_part.{key}")
        if got != first.get(key, got if first["mechanism"] == "nonprivate" else None):
            raise LedgerError(
                f"agem.train_part.{key}: states {got!r}, task 0's train entry has {first.get(key)!r}"
            )
    buf = block.get("buffer_part")
    if buf is not None:
        buf = mapping(buf, "agem.buffer_part")
        refs = [e for es in ledger.tasks.values() for e in es if e.get("part") == "reference"]
        worst = max((float(e.get("epsilon_accounted", e["epsilon"])) for e in refs), default=0.0)
        at_least(
            number(buf.get("epsilon_worst_case"), "agem.buffer_part.epsilon_worst_case", allow_inf=True),
            worst,
            "agem.buffer_part.epsilon_worst_case",
            rel_tol=REDERIVE_TOL,  # the worst reference entry's accountant figure, re-derived here
        )
        later = integer(buf.get("worst_case_later_tasks"), "agem.buffer_part.worst_case_later_tasks")
        if ledger.n_tasks is not None and later != ledger.n_tasks - 1:
            raise LedgerError(
                f"agem.buffer_part.worst_case_later_tasks: {later}, a {ledger.n_tasks}-task run has {ledger.n_tasks - 1}"
            )
    per = budget(block.get("per_individual_total"), "agem.per_individual_total")
    at_least(per.epsilon, total.epsilon, "agem.per_individual_total.epsilon")
    at_least(per.delta, total.delta, "agem.per_individual_total.delta")


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
