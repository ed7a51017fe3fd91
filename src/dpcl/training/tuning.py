"""Hyperparameter tuning of the DP-SGD learners, head-only and FiLM ([LabelSpace] App. D.1, Table A2).

Optuna with its Gaussian-process sampler, 20 trials per (ε, δ, seed) by default, over
the ranges of Table A2: learning rate 1e-7…1e-2 (log), expected batch size 10…tuning-set
size, clipping bound 0.2…10 (log), 40 epochs. Each trial trains on 70 % of a task-sized
tuning set with DP-SGD at the target budget and is scored on the other 30 %. The result is
the best configuration as tuned; :mod:`dpcl.training.tuning_protocol` chooses the tuning set
(public holdout or, as the paper, private training data) and scales the result to each run
(sampling rate kept, Adam's lr × √(final size / tuning-train size), nominal sizes).
Tuning trials take their noise multiplier from the RDP accountant's fast search over its integer
orders to 1 % (:func:`dpcl.privacy.sgd_accounting.coarse_noise_multiplier`, a σ that is valid for
(ε, δ) and at most about 2 % above the smallest); the real runs calibrate theirs exactly with PRV.

One search loop (:func:`tune_dpsgd`) serves every learner: it owns the split, the search
space, the noise multipliers and the scaling; a learner supplies only a "train at this
config on these indices and score on those" callable (:func:`tune_head` on cached
features, :func:`tune_film` on images through the shared backbone).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..seeding import rng
from .heads import DPSGDConfig, LinearHead, train_head
from .tuning_protocol import TRAIN_FRACTION

# (train indices, validation indices, label rows 0..n_classes-1, *, n_classes=, cfg= (config),
#  sigma= (noise multiplier), gen= (the trial's generator), checkpoint= (see below)
#  [, buffer_sample_rate=]) -> validation accuracy
TrainAndScore = Callable[..., float]
# checkpoint(percent, accuracy): a trial's validation accuracy with ``percent`` of its steps done; it
# raises (and the trial stops, scored by that accuracy) when the study's pruner says so
Checkpoint = Callable[[int, float], None]

LR_RANGE = (1e-7, 1e-2)
CLIP_RANGE = (0.2, 10.0)
MIN_BATCH = 10
# Early stopping of trials (Optuna's median rule): at these fractions of its steps a trial reports
# its validation accuracy, and once PRUNE_STARTUP_TRIALS trials have finished, a trial below the
# median of the earlier trials' accuracies at the same fraction stops there, scored by that accuracy
# (a finished trial with that score, so that the GP sampler, which ignores pruned trials, learns
# from it).
PRUNE_AT = (0.25, 0.5, 0.75)
PRUNE_STARTUP_TRIALS = 5


class _Stopped(Exception):
    """A trial stopped early by the pruner, with its accuracy at that point."""

    def __init__(self, percent: int, accuracy: float):
        super().__init__(percent, accuracy)
        self.percent, self.accuracy = percent, accuracy


def checkpoints(
    total_steps: int, score: Callable[[], float], checkpoint: Checkpoint
) -> Callable[[int], None]:
    """An ``after_step(step)`` for a trial of ``total_steps`` steps (:func:`dpcl.training.heads.train_head`'s
    hook): at each fraction of :data:`PRUNE_AT` of them it hands ``score()`` (the validation
    accuracy now) to ``checkpoint``, which may stop the trial."""
    at = {max(1, round(f * total_steps)): round(100 * f) for f in PRUNE_AT}

    def after_step(step: int) -> None:
        if step in at:
            checkpoint(at[step], score())

    return after_step


def split_tuning_set(y: np.ndarray, seed: int, *keys: object) -> tuple[np.ndarray, np.ndarray]:
    """Stratified 70:30 split of the tuning set (indices), deterministic in ``seed`` (and ``keys``)."""
    gen = rng(seed, "tuning", *keys, "split")
    tr, va = [], []
    for c in np.unique(y):
        idx = gen.permutation(np.flatnonzero(y == c))
        cut = int(round(TRAIN_FRACTION * len(idx)))
        tr.append(idx[:cut])
        va.append(idx[cut:])
    return np.sort(np.concatenate(tr)), np.sort(np.concatenate(va))


def tune_dpsgd(
    y: np.ndarray,
    epsilon: float,
    delta: float,
    seed: int,
    train_and_score: TrainAndScore,
    *,
    n_trials: int = 20,
    epochs: float = 40.0,
    normaliser: float = 128.0,
    keys: tuple = (),
    log: Callable[[str], None] | None = None,
    buffer_rate: bool = False,
    journal: str | Path | None = None,
    prune: bool = False,
) -> dict:
    """Optuna GP search of (lr, expected batch size, clip) over Table A2's ranges (App. D.1).

    The tuning set (labels ``y``) is split 70:30; each trial trains on the 70 % with
    ``train_and_score`` at the trial's config and the noise multiplier of (ε, δ) for its
    (q, steps), and is scored on the 30 %; ``train_and_score`` hands its intermediate scores to its
    ``checkpoint`` argument (:func:`checkpoints`); with ``prune`` a trial below the earlier trials'
    median there stops (:data:`PRUNE_AT`), without it every trial runs to the end. Returns the best
    config as tuned (``best``, not yet scaled to a run:
    :func:`dpcl.training.tuning_protocol.scaled_dpsgd`) plus every trial.
    ``keys`` name the learner's random streams (empty for the head learners); ``log`` gets one
    line per finished trial. ``buffer_rate`` also searches a memory buffer's Poisson rate
    (DP-A-GEM) over [10 / tuning-train size, 1] (log), passed to ``train_and_score`` as
    ``buffer_sample_rate`` and returned as ``best_buffer_sample_rate``.

    Resumable: with ``journal`` (a file path) every finished trial is kept in an Optuna journal
    file, and a rerun of the same search (a SLURM retry or requeue) continues after the last
    finished trial instead of starting over; a trial cut off mid-way is redone. Trial k's
    sampler and training noise are seeded by (seed, keys, k), so a resumed search gives exactly
    the result of an uninterrupted one. The journal is removed once the search is complete.
    """
    import optuna

    from ..privacy.sgd_accounting import coarse_noise_multiplier

    classes, yy = np.unique(np.asarray(y), return_inverse=True)
    tr, va = split_tuning_set(yy, seed, *keys)
    n_tr = len(tr)
    if n_tr < MIN_BATCH or len(va) == 0:
        raise ValueError(
            f"tuning set too small: {len(y)} samples ({n_tr} for training, {len(va)} for validation); "
            f"the search needs at least {MIN_BATCH} training samples (raise tune_per_class)"
        )
    sigmas: dict[tuple[float, int], float] = {}

    def objective(trial: optuna.Trial, k: int) -> float:
        lr = trial.suggest_float("lr", *LR_RANGE, log=True)
        batch = trial.suggest_int("batch_size", MIN_BATCH, n_tr, log=True)
        clip = trial.suggest_float("clip", *CLIP_RANGE, log=True)
        extra = (
            {"buffer_sample_rate": trial.suggest_float("buffer_sample_rate", MIN_BATCH / n_tr, 1.0, log=True)}
            if buffer_rate
            else {}
        )
        cfg = DPSGDConfig(sample_rate=batch / n_tr, epochs=epochs, lr=lr, clip=clip, normaliser=normaliser)
        key = (cfg.sample_rate, cfg.steps)
        if key not in sigmas:
            sigmas[key] = 0.0 if math.isinf(epsilon) else coarse_noise_multiplier(epsilon, delta, *key)
        gen = rng(seed, "tuning", *keys, "trial", k)

        def checkpoint(percent: int, accuracy: float) -> None:
            trial.report(float(accuracy), percent)
            if trial.should_prune():
                raise _Stopped(percent, float(accuracy))

        stopped = None
        try:
            acc = float(
                train_and_score(
                    tr,
                    va,
                    yy,
                    n_classes=len(classes),
                    cfg=cfg,
                    sigma=sigmas[key],
                    gen=gen,
                    checkpoint=checkpoint,
                    **extra,
                )
            )
        except _Stopped as stop:
            acc, stopped = stop.accuracy, stop.percent
        trial.set_user_attr("stopped_at_percent", stopped)
        if log is not None:
            log(
                f"trial {k + 1}/{n_trials}: lr {lr:.3g}, batch {batch} of {n_tr}, "
                f"clip {clip:.3g}, steps {cfg.steps}, σ {sigmas[key]:.3g}"
                + "".join(f", {k} {v:.3g}" for k, v in extra.items())
                + f" -> accuracy {100 * acc:.1f} %"
                + ("" if stopped is None else f" (stopped at {stopped} % of its steps)")
            )
        return acc

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    fingerprint = repr(
        (
            float(epsilon),
            float(delta),
            int(seed),
            keys,
            n_tr,
            len(va),
            classes.tolist(),
            float(epochs),
            float(normaliser),
            bool(buffer_rate),
            LR_RANGE,
            CLIP_RANGE,
            MIN_BATCH,
            (PRUNE_AT, PRUNE_STARTUP_TRIALS) if prune else None,
        )
    )
    study = _study(journal, fingerprint, prune)
    base = int(rng(seed, "tuning", *keys, "sampler").integers(2**31))
    while (k := len(_finished(study))) < n_trials:
        study.sampler = gp_sampler((base + 7919 * k) % 2**31)  # trial k's own seed
        study.optimize(lambda t, _k=k: objective(t, _k), n_trials=1)
    trials = _finished(study)[:n_trials]
    best_trial = max(trials, key=lambda t: t.value)  # the first of equals, as Optuna's best_trial
    best = best_trial.params
    result = {
        "best": {
            "sample_rate": best["batch_size"] / n_tr,
            "epochs": epochs,
            "lr": best["lr"],
            "clip": best["clip"],
            "normaliser": normaliser,
        },
        **({"best_buffer_sample_rate": best["buffer_sample_rate"]} if buffer_rate else {}),
        "best_validation_accuracy": best_trial.value,
        "best_params": best,
        "tuning_set": {
            "n": int(len(y)),
            "train": int(n_tr),
            "validation": int(len(va)),
            "classes": classes.tolist(),
        },
        "trials": [
            {
                "params": t.params,
                "accuracy": t.value,
                "stopped_at_percent": t.user_attrs.get("stopped_at_percent"),
            }
            for t in trials
        ],
        "epsilon": epsilon,
        "delta": delta,
        "sampler": "optuna GPSampler",
        "pruner": (
            f"median rule at {[round(100 * f) for f in PRUNE_AT]} % of a trial's steps "
            f"after {PRUNE_STARTUP_TRIALS} trials"
            if prune
            else None
        ),
    }
    if journal is not None:
        Path(journal).unlink(missing_ok=True)  # complete: a later rerun (e.g. new code) starts afresh
    return result


def gp_sampler(seed: int):
    """Optuna's GP sampler with this trial's seed (a fresh sampler per trial: trial k's suggestion is a
    function of the seed and the trials before it, so a resumed study suggests what an unbroken one
    would)."""
    import optuna

    return optuna.samplers.GPSampler(seed=seed)


def _finished(study) -> list:
    """The study's completed trials in order."""
    import optuna

    return sorted(
        study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)), key=lambda t: t.number
    )


def _study(journal: str | Path | None, fingerprint: str, prune: bool):
    """A maximising study, in memory or resumed from ``journal`` when that holds the same search
    (``fingerprint``); trials a killed job left running are marked failed (they are redone). With
    ``prune``, Optuna's median rule after :data:`PRUNE_STARTUP_TRIALS` finished trials."""
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    pruner = (
        optuna.pruners.MedianPruner(n_startup_trials=PRUNE_STARTUP_TRIALS, n_warmup_steps=0)
        if prune
        else optuna.pruners.NopPruner()
    )
    if journal is None:
        return optuna.create_study(direction="maximize", pruner=pruner)
    journal = Path(journal)
    journal.parent.mkdir(parents=True, exist_ok=True)
    for attempt in range(2):
        storage = JournalStorage(JournalFileBackend(str(journal)))
        study = optuna.create_study(
            direction="maximize", storage=storage, study_name="dpcl", load_if_exists=True, pruner=pruner
        )
        if study.user_attrs.get("fingerprint") in (None, fingerprint) or attempt:
            break
        journal.unlink()  # another search's journal (other data, budget or ranges): start over
    study.set_user_attr("fingerprint", fingerprint)
    study_id = storage.get_study_id_from_name("dpcl")
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        trial_id = storage.get_trial_id_from_study_id_trial_number(study_id, t.number)
        storage.set_trial_state_values(trial_id, optuna.trial.TrialState.FAIL)
    return study


def tune_head(
    x: np.ndarray,
    y: np.ndarray,
    epsilon: float,
    delta: float,
    seed: int,
    *,
    n_trials: int = 20,
    epochs: float = 40.0,
    normaliser: float = 128.0,
    journal: str | Path | None = None,
    prune: bool = True,
) -> dict:
    """Tune (lr, expected batch size, clip) for a head over the labels in ``y``; returns the
    chosen DP-SGD config for real runs plus every trial (``journal``, ``prune``: see
    :func:`tune_dpsgd`; a trial's checkpoints cost one validation pass each)."""

    def train_and_score(tr, va, yy, *, n_classes, cfg, sigma, gen, checkpoint) -> float:
        head = LinearHead(x.shape[1], n_classes)

        def score() -> float:
            return float(np.mean(head.logits(x[va]).argmax(1) == yy[va]))

        train_head(head, x[tr], yy[tr], cfg, sigma, gen, after_step=checkpoints(cfg.steps, score, checkpoint))
        return score()

    return tune_dpsgd(
        y,
        epsilon,
        delta,
        seed,
        train_and_score,
        n_trials=n_trials,
        epochs=epochs,
        normaliser=normaliser,
        journal=journal,
        prune=prune,
    )


def tune_film(
    backbone,
    images: np.ndarray,
    y: np.ndarray,
    epsilon: float,
    delta: float,
    seed: int,
    *,
    pre,
    n_trials: int = 20,
    epochs: float = 40.0,
    normaliser: float = 128.0,
    physical_batch: int = 32,
    device: str = "auto",
    precision: str = "fp32",
    log: Callable[[str], None] | None = None,
    journal: str | Path | None = None,
) -> dict:
    """Tune (lr, expected batch size, clip) for a FiLM member (normalisation affines + head over
    the labels in ``y``) on uint8 ``images`` through the shared ``backbone`` (App. D.1).

    Each trial trains a member from the pre-trained FiLM values with :func:`dpcl.training.film.train_film`
    (``physical_batch`` images per chunk on ``device``, the backbone's passes at ``precision``) and scores it with
    :func:`dpcl.training.film_inference.film_logits`; the search, noise and scaling are :func:`tune_dpsgd`'s.
    """
    from .film import train_film
    from .film_inference import film_logits

    images = np.asarray(images)
    if len(images) != len(y):
        raise ValueError(f"{len(images)} tuning images but {len(y)} labels")

    def train_and_score(tr, va, yy, *, n_classes, cfg, sigma, gen, checkpoint) -> float:
        # no checkpoints (never pruned): an intermediate score would cost a backbone pass over the
        # validation images
        member, _ = train_film(
            backbone,
            images[tr],
            yy[tr],
            n_classes,
            cfg,
            noise_multiplier=sigma,
            rng=gen,
            pre=pre,
            physical_batch=physical_batch,
            device=device,
            precision=precision,
        )
        z = film_logits(backbone, member, images[va], pre, device=device)
        return float(np.mean(z.argmax(1) == yy[va]))

    res = tune_dpsgd(
        y,
        epsilon,
        delta,
        seed,
        train_and_score,
        n_trials=n_trials,
        epochs=epochs,
        normaliser=normaliser,
        keys=("film",),
        log=log,
        journal=journal,
    )
    res["learner"] = "film"
    return res
