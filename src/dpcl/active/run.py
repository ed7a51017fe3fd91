"""One DP active-learning run on cached features ([Schwethelm2025], Alg. 1 and 3).

Pool-based: an initial labelled set D₁, then T rounds of (train, select k records, label them)
and a final training phase, all with DP-SGD on a zero-initialised linear head over the frozen
backbone's features. Training follows a precomputed :class:`~dpcl.active.schedules.Schedule`
(per-group Poisson rates), selection one of:

- ``random``: uniform (paper mode: fixed size k; sound mode: each record with probability
  k / E|U|, E|U| the planned number of unlabelled records, public);
- ``dp``: clipped acquisition scores + Laplace(C_Sel·T/ε_Sel) (paper mode: top-k; sound mode:
  above a threshold calibrated on a public shadow pool, :mod:`dpcl.active.selection`);
- ``nondp``: exact top-k of the scores (paper mode only; the paper's upper bound, not DP).

The run's release is the final head and ``privacy.json`` (:func:`dpcl.active.group_ledger.group_ledger`,
public parameters only); realised set sizes and selection statistics go to the non-private
diagnostics.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..training.heads import DPSGDConfig, LinearHead, train_head
from . import paper_schedule
from . import selection as sel
from .acquisition import ACQUISITIONS, clip_bound, scores
from .group_ledger import group_ledger
from .schedules import Schedule

MODES = ("paper", "sound")
SELECTIONS = ("random", "dp", "nondp")


@dataclass(frozen=True)
class ActiveMethod:
    """What a run does: acquisition function, kind of selection, selection mode."""

    acquisition: str  # "random" or one of ACQUISITIONS
    selection: str  # random | dp | nondp
    mode: str  # paper | sound

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.selection not in SELECTIONS:
            raise ValueError(f"selection must be one of {SELECTIONS}, got {self.selection!r}")
        if (self.acquisition == "random") != (self.selection == "random"):
            raise ValueError(
                f"acquisition {self.acquisition!r} does not go with selection {self.selection!r}"
            )
        if self.acquisition != "random" and self.acquisition not in ACQUISITIONS:
            raise ValueError(
                f"unknown acquisition {self.acquisition!r}; choose random or one of {ACQUISITIONS}"
            )
        if self.selection == "nondp" and self.mode != "paper":
            raise ValueError("non-private selection is the paper's upper bound: run it in paper mode only")


def selection_record(method: ActiveMethod, schedule: Schedule, n_classes: int) -> dict:
    """The selection entry of the ledger (public parameters only)."""
    t = len(schedule.plan.query_sizes)
    if t == 0:
        return {"mechanism": "none"}
    if method.selection == "random":
        return {"mechanism": "random_fixed" if method.mode == "paper" else "random_poisson", "phases": t}
    c = clip_bound(method.acquisition, n_classes)
    if method.selection == "nondp":
        return {
            "mechanism": "nonprivate_topk",
            "acquisition": method.acquisition,
            "phases": t,
            "epsilon_per_phase": "inf",
        }
    eps_sel = schedule.plan.selection_epsilon
    out = {
        "mechanism": "laplace_topk" if method.mode == "paper" else "laplace_threshold",
        "acquisition": method.acquisition,
        "sensitivity": c,
        "epsilon_per_phase": eps_sel / t,
        "laplace_scale": sel.laplace_scale(c, eps_sel, t),
        "phases": t,
    }
    if method.mode == "sound":
        out["threshold"] = "calibrated on a public shadow pool run through the same selections (fresh noise)"
    return out


def run_active(
    pool: tuple[np.ndarray, np.ndarray],
    test: tuple[np.ndarray, np.ndarray],
    public_x: np.ndarray,
    n_classes: int,
    pool_size: int,
    method: ActiveMethod,
    *,
    schedule: Schedule,
    lr: float,
    clip: float,
    stream: Callable[..., np.random.Generator],
    mc_passes: int = 20,
    dropout: float = 0.3,
    claim: dict | None = None,
) -> tuple[dict, dict, dict, LinearHead]:
    """One run: (metrics, privacy ledger, non-private diagnostics, final head).

    ``pool_size`` is the pool's planned (public) size, used for the sound mode's rates;
    ``stream(*keys)`` gives an independent generator per mechanism and phase.
    """
    plan = schedule.plan
    if method.selection == "dp" and not plan.selection_epsilon > 0:
        raise ValueError("a DP selection needs selection_epsilon > 0 (ε_Sel = 0 is random selection)")
    if method.selection != "dp" and plan.selection_epsilon != 0:
        raise ValueError(
            f"a {method.selection} selection charges no selection ε; the schedule charges "
            f"{plan.selection_epsilon}"
        )
    x, y = (np.asarray(a) for a in pool)
    n = len(y)
    t = len(plan.query_sizes)
    groups = np.full(n, -1, dtype=np.int64)
    rng0 = stream("initial")
    first = (
        sel.random_fixed(n, plan.initial_size, rng0)
        if method.mode == "paper"
        else sel.random_poisson(n, plan.initial_size / pool_size, rng0)
    )
    groups[first] = 0
    shadow = np.arange(len(public_x))  # public records not yet "selected" (sound mode's calibration)
    head = LinearHead(x.shape[1], n_classes)
    phase_acc, chosen_scores, pool_scores = [], [], []
    for p in range(plan.phases):
        lab = np.flatnonzero(groups >= 0)
        for s, seg in enumerate(seg for seg in schedule.segments if seg.phase == p):
            rates = np.asarray(seg.rates)[groups[lab]]
            cfg = DPSGDConfig(sample_rate=1.0, epochs=1.0, lr=lr, clip=clip, normaliser=plan.batch_size)
            train_head(
                head,
                x[lab],
                y[lab],
                cfg,
                seg.noise_multiplier,
                stream("train", p, s),
                record_rates=rates,
                steps=seg.steps,
            )
        phase_acc.append(float(np.mean(np.argmax(head.logits(test[0]), axis=1) == test[1])))
        if p == t:
            break
        unl = np.flatnonzero(groups < 0)
        k = plan.query_sizes[p]
        r = stream("select", p + 1)
        if method.selection == "random":
            pick = (
                sel.random_fixed(len(unl), k, r)
                if method.mode == "paper"
                else sel.random_poisson(len(unl), k / max(pool_size - plan.labelled(p), 1), r)
            )
        else:
            sc = scores(method.acquisition, head.w, head.b, x[unl], r, mc_passes=mc_passes, dropout=dropout)
            pool_scores.append(float(sc.mean()))
            scale = (
                0.0
                if method.selection == "nondp"
                else sel.laplace_scale(clip_bound(method.acquisition, n_classes), plan.selection_epsilon, t)
            )
            c_sel = clip_bound(method.acquisition, n_classes)
            if method.mode == "paper":
                pick = sel.top_k(sel.noisy(sc, scale, r, rows=x, take=unl, sensitivity=c_sel), k, r)
            else:
                pub = scores(
                    method.acquisition,
                    head.w,
                    head.b,
                    public_x[shadow],
                    r,
                    mc_passes=mc_passes,
                    dropout=dropout,
                )
                pub_noisy = sel.noisy(pub, scale, r, rows=public_x, take=shadow, sensitivity=c_sel)
                frac = k / max(pool_size - plan.labelled(p), 1)
                tau = sel.calibrate_threshold(pub_noisy, frac)
                shadow = shadow[pub_noisy <= tau]
                pick = sel.above(sel.noisy(sc, scale, r, rows=x, take=unl, sensitivity=c_sel), tau)
            chosen_scores.append(float(sc[pick].mean()) if len(pick) else float("nan"))
        groups[unl[pick]] = p + 1
    if claim is None and schedule.kind == paper_schedule.KIND:
        claim = paper_schedule.published_claim(schedule)
    privacy = group_ledger(
        schedule,
        selection_record(method, schedule, n_classes),
        "fixed_size" if method.mode == "paper" else "poisson",
        claim,
        pool_size=pool_size,
        n_classes=n_classes,
    )
    metrics = {
        "acquisition": method.acquisition,
        "selection": method.selection,
        "mode": method.mode,
        "schedule": schedule.kind,
        "epsilon": plan.epsilon,
        "selection_epsilon": plan.selection_epsilon,
        "final_accuracy": phase_acc[-1],
        "phase_accuracy": phase_acc,
        "guarantee_holds": privacy["guarantee_holds"],
    }
    sizes = [int(np.sum(groups == g)) for g in range(plan.phases)]
    diagnostics = {
        "group_sizes": sizes,
        "planned_group_sizes": plan.group_sizes,
        "labelled": int(np.sum(groups >= 0)),
        "class_counts_labelled": np.bincount(y[groups >= 0], minlength=n_classes).tolist(),
        "mean_score_pool": pool_scores,
        "mean_score_selected": chosen_scores,
    }
    return metrics, privacy, diagnostics, head
