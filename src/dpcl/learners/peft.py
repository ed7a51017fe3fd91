"""Head-only PEFT ensemble (paper 000 Alg. 2) and the Naive / Non-CL baselines (App. F.1)
trained with DP-SGD on cached features.

- ``peft_head``: per task t a fresh zero-initialised linear head over O_t, trained on D_t;
  prediction aggregates all members seen so far (Eq. 11 or App. D.2).
- ``naive_head``: one head over the label universe, trained task after task on D_t with
  the softmax restricted to ∪_{k≤t} O_k (Alg. A1: a lower bound, no forgetting remedy).
- ``noncl_head``: one head trained once on ∪_t D_t over ∪_t O_t (Alg. A2: DP but not CL);
  only its final accuracy row is defined.

Each individual is in one task, so per-task DP-SGD runs compose in parallel; the Non-CL
run touches each individual once. The noise multiplier comes from the task's training
budget (what label release left) via the PRV accountant.
"""

from __future__ import annotations

import math

import numpy as np

from ..dpsgd import DPSGDConfig, LinearHead, train_head
from ..privacy.sgd_accounting import accountant_record, noise_multiplier_info
from .aggregation import RULES, aggregate

LEARNERS = ("peft_head", "naive_head", "noncl_head")


def dpsgd_noise(epsilon: float, delta: float, cfg: DPSGDConfig, cache: dict | None = None) -> dict:
    """Noise multiplier and ledger record for one DP-SGD run at (ε, δ); non-private if ε = inf."""
    if math.isinf(epsilon):
        return {"mechanism": "nonprivate", "noise_multiplier": 0.0, "epsilon": math.inf, "delta": 0.0,
                "sample_rate": cfg.sample_rate, "steps": cfg.steps}  # fmt: skip
    key = (epsilon, delta, cfg.sample_rate, cfg.steps)
    if cache is not None and key in cache:
        return dict(cache[key])
    info = noise_multiplier_info(epsilon, delta, cfg.sample_rate, cfg.steps)
    rec = accountant_record(info["noise_multiplier"], cfg.sample_rate, cfg.steps, delta, info["accountant"])
    rec["epsilon_target"] = epsilon
    if cache is not None:
        cache[key] = dict(rec)
    return rec


def label_rows(o_t: list[int], labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Keep-mask of samples whose label is in O_t and their row index in sorted O_t."""
    o = np.asarray(sorted(o_t), dtype=np.int64)
    keep = np.isin(labels, o)
    return keep, np.searchsorted(o, labels[keep])


def run_head_learner(
    learner: str,
    task_data: list[tuple[np.ndarray, np.ndarray]],
    test_sets: list[tuple[np.ndarray, np.ndarray]],
    label_spaces: list[list[int]],
    n_universe: int,
    cfg: DPSGDConfig,
    noise: dict,
    rng_for,
    aggregation: str = "argmax",
    by_rule: dict[str, list[list[np.ndarray]]] | None = None,
) -> tuple[list[list[np.ndarray]], list[dict]]:
    """Train ``learner`` through the tasks; return predictions[t][i] on task i's test set
    after task t, and one mechanism record per task for the ledger.

    ``rng_for(t)`` gives task t's generator (sampling and noise). For ``peft_head``, a dict
    passed as ``by_rule`` is filled with the predictions of every aggregation rule (App. D.2,
    Fig. A2): post-processing of the same members, so it costs no privacy.
    """
    if learner not in LEARNERS:
        raise ValueError(f"unknown learner {learner!r}; allowed: {list(LEARNERS)}")
    sigma = noise["noise_multiplier"]
    n_tasks = len(task_data)
    preds: list[list[np.ndarray]] = []
    records: list[dict] = []
    dim = task_data[0][0].shape[1]
    if learner == "noncl_head":
        union = sorted(set().union(*map(set, label_spaces)))
        xs, ys = zip(*task_data, strict=True)
        x, y = np.concatenate(xs), np.concatenate(ys)
        keep, rows = label_rows(union, y)
        head = LinearHead(dim, len(union))
        info = train_head(head, x[keep], rows, cfg, sigma, rng_for(0))
        rec = {**noise, **info, "data": "features of all tasks at once", "samples": int(keep.sum())}
        records = [rec] * n_tasks  # one run; each individual's task sees it once
        union_arr = np.asarray(union, dtype=np.int64)
        final = [aggregate([head.logits(xt)], [union_arr]) if len(union) else np.full(len(xt), -1)
                 for xt, _ in test_sets]  # fmt: skip
        preds = [[None] * (t + 1) for t in range(n_tasks - 1)] + [final]
        return preds, records
    if learner == "naive_head":
        head = LinearHead(dim, n_universe)
        active = np.zeros(n_universe, dtype=bool)
    members: list[tuple[LinearHead, np.ndarray]] = []
    for t, (x, y) in enumerate(task_data):
        o_t = sorted(label_spaces[t])
        if learner == "peft_head":
            keep, rows = label_rows(o_t, y)
            member = LinearHead(dim, len(o_t))
            info = train_head(member, x[keep], rows, cfg, sigma, rng_for(t))
            members.append((member, np.asarray(o_t, dtype=np.int64)))
        else:
            active[o_t] = True
            keep = np.isin(y, o_t)
            info = train_head(head, x[keep], y[keep], cfg, sigma, rng_for(t), active=active)
        records.append({**noise, **info, "data": f"features of D_{t}", "samples": int(keep.sum())})
        row = []
        for i, (xt, _) in enumerate(test_sets[: t + 1]):
            if learner == "peft_head":
                logits, spaces = [m.logits(xt) for m, _ in members], [o for _, o in members]
                row.append(aggregate(logits, spaces, aggregation))
                if by_rule is not None:
                    for rule in RULES:
                        rows = by_rule.setdefault(rule, [])
                        if i == 0:
                            rows.append([])
                        rows[t].append(row[-1] if rule == aggregation else aggregate(logits, spaces, rule))
            else:
                ids = np.flatnonzero(active)
                row.append(aggregate([head.logits(xt)[:, ids]], [ids]) if ids.size else np.full(len(xt), -1))
        preds.append(row)
    return preds, records
