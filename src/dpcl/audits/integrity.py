"""Update integrity of a head's training: the parameters each release was computed at, and the parameters
training ends with, are the heads' optimiser applied to the reported releases, in order.

A statistical audit reads what the mechanism primitives report (:mod:`dpcl.privacy.releases`). A training
function could report a correctly noised release and then move its parameters by something else (the
un-noised sum, or the release plus a term the audit never sees); the model would leak while every report
looked right. The check closes that gap for the linear heads: from the zero initialisation, Adam with the
run's public DP-SGD config (:class:`dpcl.training.adam.Adam`, the optimiser :func:`~dpcl.training.heads.train_head`
steps with) is replayed over the reported values; each release's ``state`` (the head it was computed at)
and the trained head must equal the replay bit for bit (the replay does the same float64 arithmetic).
"""

from __future__ import annotations

import numpy as np


def adam_replay_mismatch(releases, final: np.ndarray, cfg) -> str | None:
    """None when every release's state and ``final`` (the trained head's flat parameters) equal Adam
    (``cfg``'s lr, betas, eps and normaliser, from zeros) replayed over the releases' values; else what
    differs first. The releases must have been recorded with their values (``keep_values``)."""
    from ..training.adam import Adam

    theta = np.zeros_like(np.asarray(final, dtype=np.float64))
    adam = Adam([theta], lr=cfg.lr, betas=cfg.betas, eps=cfg.adam_eps, normaliser=cfg.normaliser)
    for t, r in enumerate(releases, start=1):
        if r.value is None or r.state is None:
            raise ValueError("update integrity needs releases recorded with their values and states")
        if r.state.shape != theta.shape or not np.array_equal(r.state, theta):
            return f"release {t} was computed at parameters that are not the optimiser's replay"
        adam.step([np.array(r.value, dtype=np.float64, copy=True)])
    if not np.array_equal(np.ravel(final), theta):
        return "the trained parameters are not the optimiser applied to the reported releases"
    return None
