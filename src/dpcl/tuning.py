"""Hyperparameter tuning of the DP-SGD head learners (paper 000 App. D.1, Table A2).

Optuna with its Gaussian-process sampler, 20 trials per (ε, δ, seed) by default, over
the ranges of Table A2: learning rate 1e-7…1e-2 (log), expected batch size 10…tuning-set
size, clipping bound 0.2…10 (log), 40 epochs. Each trial trains on 70 % of a task-sized
tuning set with DP-SGD at the target budget and is scored on the other 30 %. The tuned
sampling rate is kept for the real runs (constant sampling ratio; batch size scales
linearly with data size) and Adam's learning rate is scaled by √(scale factor), the
scale factor being the (public) ratio of the task size to the tuning split, 1/0.7.

Privacy: the tuning set must be **public** or disjoint from every private task; the
workflow tunes on a held-out part of the training split that no run uses (the paper
instead tunes on private data without accounting for it, App. D.1 last paragraph).
Tuning uses the RDP accountant for speed; the real runs use PRV.
"""

from __future__ import annotations

import math

import numpy as np

from .dpsgd import DPSGDConfig, LinearHead, train_head
from .seeding import rng

TRAIN_FRACTION = 0.7
LR_RANGE = (1e-7, 1e-2)
CLIP_RANGE = (0.2, 10.0)
MIN_BATCH = 10


def split_tuning_set(y: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Stratified 70:30 split of the tuning set (indices), deterministic in ``seed``."""
    gen = rng(seed, "tuning", "split")
    tr, va = [], []
    for c in np.unique(y):
        idx = gen.permutation(np.flatnonzero(y == c))
        cut = int(round(TRAIN_FRACTION * len(idx)))
        tr.append(idx[:cut])
        va.append(idx[cut:])
    return np.sort(np.concatenate(tr)), np.sort(np.concatenate(va))


def tune_head(
    x: np.ndarray,
    y: np.ndarray,
    epsilon: float,
    delta: float,
    seed: int,
    n_trials: int = 20,
    epochs: float = 40.0,
    normaliser: float = 128.0,
) -> dict:
    """Tune (lr, expected batch size, clip) for a head over the labels in ``y``; returns the
    chosen DP-SGD config for real runs plus every trial."""
    import optuna

    from .privacy.sgd_accounting import noise_multiplier

    classes, yy = np.unique(np.asarray(y), return_inverse=True)
    tr, va = split_tuning_set(yy, seed)
    n_tr = len(tr)
    if n_tr < MIN_BATCH or len(va) == 0:
        raise ValueError(f"tuning set too small: {len(y)} samples")
    sigmas: dict[tuple[float, int], float] = {}

    def objective(trial: optuna.Trial) -> float:
        lr = trial.suggest_float("lr", *LR_RANGE, log=True)
        batch = trial.suggest_int("batch_size", MIN_BATCH, n_tr, log=True)
        clip = trial.suggest_float("clip", *CLIP_RANGE, log=True)
        cfg = DPSGDConfig(sample_rate=batch / n_tr, epochs=epochs, lr=lr, clip=clip, normaliser=normaliser)
        key = (cfg.sample_rate, cfg.steps)
        if key not in sigmas:
            sigmas[key] = (
                0.0 if math.isinf(epsilon) else noise_multiplier(epsilon, delta, *key, accountant="rdp")
            )
        head = LinearHead(x.shape[1], len(classes))
        train_head(head, x[tr], yy[tr], cfg, sigmas[key], rng(seed, "tuning", "trial", trial.number))
        return float(np.mean(head.logits(x[va]).argmax(1) == yy[va]))

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = optuna.samplers.GPSampler(seed=int(rng(seed, "tuning", "sampler").integers(2**31)))
    study = optuna.create_study(direction="maximize", sampler=sampler)
    study.optimize(objective, n_trials=n_trials)
    best = study.best_params
    scale = 1.0 / TRAIN_FRACTION  # public: task size / tuning-train size by construction
    return {
        "dpsgd": {
            "sample_rate": best["batch_size"] / n_tr,
            "epochs": epochs,
            "lr": best["lr"] * math.sqrt(scale),
            "clip": best["clip"],
            "normaliser": normaliser,
        },
        "best_validation_accuracy": study.best_value,
        "best_params": best,
        "tuning_set": {
            "n": int(len(y)),
            "train": int(n_tr),
            "validation": int(len(va)),
            "classes": classes.tolist(),
        },
        "trials": [{"params": t.params, "accuracy": t.value} for t in study.trials],
        "epsilon": epsilon,
        "delta": delta,
        "sampler": "optuna GPSampler",
    }
