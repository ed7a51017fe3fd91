"""Update integrity of a head's training: the parameters each release was computed at, and the parameters
training ends with, are the learner's optimiser applied to the reported releases, in order.

A statistical audit reads what the mechanism primitives report (:mod:`dpcl.privacy.releases`). A training
function could report a correctly noised release and then move its parameters by something else (the
un-noised sum, or the release plus a term the audit never sees); the model would leak while every report
looked right. The check closes that gap for the linear heads: from the zero initialisation, Adam with the
run's public DP-SGD config (:class:`dpcl.training.adam.Adam`, the optimiser :func:`~dpcl.training.heads.train_head`
steps with) is replayed over the reported values; each release's ``state`` (the head it was computed at)
and the trained head must equal the replay bit for bit (the replay does the same float64 arithmetic).
The memory-buffer learners (DP-A-GEM, Desai et al.) step Adam, fresh at every task, on g projected on
g_ref (:func:`dpcl.training.projection.project_parts_`); :func:`memory_replay_mismatch` replays that.
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


def memory_replay_mismatch(releases, final: tuple[np.ndarray, ...], cfg, *, n_tasks: int) -> str | None:
    """:func:`adam_replay_mismatch` for a memory-buffer learner's head (DP-A-GEM, Desai et al.): from zeros,
    per task a fresh Adam (``cfg``'s lr, betas, eps and normaliser) and ``cfg.steps`` steps; at task 0 each
    step releases g, at every later task g then g_ref, both at the same parameters, and g is projected on
    g_ref when they disagree (Eq. A102) before Adam's step. ``final`` is the trained head's parts (weight,
    bias), whose shapes split a flat release into the parts the learner projects. None when every release's
    state and the trained head equal the replay; else what differs first."""
    from ..training.adam import Adam
    from ..training.projection import project_parts_

    shapes = [np.shape(a) for a in final]
    cuts = np.cumsum([int(np.prod(s)) for s in shapes])[:-1]

    def parts(flat: np.ndarray) -> list[np.ndarray]:
        return [a.reshape(s) for a, s in zip(np.split(flat, cuts), shapes, strict=True)]

    theta = np.zeros(int(sum(int(np.prod(s)) for s in shapes)), dtype=np.float64)
    expected = cfg.steps * (1 + 2 * (n_tasks - 1))
    if len(releases) != expected:
        return f"{len(releases)} releases where the public schedule has {expected}"
    it = iter(releases)
    for t in range(n_tasks):
        adam = Adam([theta], lr=cfg.lr, betas=cfg.betas, eps=cfg.adam_eps, normaliser=cfg.normaliser)
        for _ in range(cfg.steps):
            step = [next(it) for _ in range(1 if t == 0 else 2)]
            for r in step:
                if r.value is None or r.state is None:
                    raise ValueError("update integrity needs releases recorded with their values and states")
                if r.state.shape != theta.shape or not np.array_equal(r.state, theta):
                    return f"a release of task {t} was computed at parameters that are not the optimiser's replay"
            g = np.array(step[0].value, dtype=np.float64, copy=True)
            if t > 0:
                project_parts_(parts(g), parts(np.array(step[1].value, dtype=np.float64, copy=True)))
            adam.step([g])
    if not np.array_equal(np.concatenate([np.ravel(a) for a in final]).astype(np.float64), theta):
        return "the trained parameters are not the optimiser applied to the reported releases"
    return None
