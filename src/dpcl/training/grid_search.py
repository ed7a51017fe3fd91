"""Exhaustive grid search, the study of a learner tuned on a fixed grid (FM-A-GEM,
:func:`dpcl.learners.fm_agem.tune_fm_agem`): every point scored once, in grid order; the best is the
first point of the highest score, so a tie goes to the earlier point and the result does not depend
on floating-point noise in the comparison of equals. The learner supplies only the scoring callable
(its own loop on the tuning set), as it does for the Optuna search (:func:`dpcl.training.tuning.tune_dpsgd`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence


def grid_search(points: Sequence[dict], score: Callable[[dict], float]) -> tuple[dict, list[dict]]:
    """(best point, every point) of a grid: each point of ``points`` (in order) with its ``score`` under
    the key ``accuracy``; the best is the first of the highest scores."""
    if not points:
        raise ValueError("the grid has no point to search")
    trials: list[dict] = []
    best: dict | None = None
    for point in points:
        trial = {**point, "accuracy": float(score(point))}
        trials.append(trial)
        if best is None or trial["accuracy"] > best["accuracy"]:
            best = trial
    return best, trials
