"""The fixed subsets of a data set that every run reads (one layer: indices from labels and the
public configuration; loading the data is the stage's business, :mod:`dpcl.stages.data`).

Four splits: ``test`` (a per-class subset of the test split), ``train`` (a per-class subset of the
training split, after an optional public holdout), ``tune`` (held out of the training split,
disjoint from ``train``: hyperparameter tuning touches no private task data) and ``pool`` (DP
active learning, [Schwethelm2025]: training images neither ``train`` nor ``tune`` uses).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .datasets import select_per_class

SPLITS = ("train", "test", "tune", "pool")


@dataclass(frozen=True)
class SubsetParams:
    """The config keys of a ``datasets`` block that fix its subsets (schema defaults)."""

    seed: int = 0
    train_per_class: int | None = None
    test_per_class: int | None = None
    tune_per_class: int | None = 300
    pool_per_class: int | None = 1000
    holdout_fraction: float = 0.0

    @classmethod
    def from_config(cls, cfg: dict) -> SubsetParams:
        return cls(
            seed=int(cfg.get("subset_seed", 0)),
            train_per_class=cfg.get("train_per_class"),
            test_per_class=cfg.get("test_per_class"),
            tune_per_class=cfg.get("tune_per_class", 300),
            pool_per_class=cfg.get("pool_per_class", 1000),
            holdout_fraction=float(cfg.get("holdout_fraction") or 0.0),
        )


def source_split(split: str) -> str:
    """The data set split a subset is drawn from: ``tune`` and ``pool`` come from ``train``."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    return "train" if split in ("tune", "pool") else split


def holdout_per_class(labels: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """Sorted indices of round(fraction × n_c) images of every class c (seeded), the public tuning share."""
    if not 0 < fraction < 1:
        raise ValueError(f"holdout_fraction must lie in (0, 1), got {fraction}")
    gen = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, 0x70E5])))
    out = []
    for c in np.unique(labels):
        idx = np.flatnonzero(labels == c)
        out.append(gen.permutation(idx)[: int(round(fraction * len(idx)))])
    return np.sort(np.concatenate(out))


def subset_indices(labels: np.ndarray, split: str, params: SubsetParams, name: str = "") -> np.ndarray:
    """Sorted original indices of ``split``'s fixed subset; ``labels`` are those of
    :func:`source_split` (``name`` only names the data set in errors)."""
    labels = np.asarray(labels)
    seed = params.seed
    if source_split(split) == "test":
        return select_per_class(labels, params.test_per_class, seed)
    everything = np.arange(len(labels))
    pool = everything
    held = None
    if params.holdout_fraction > 0:  # a fixed public tuning share of every class, before the train subset
        held = holdout_per_class(labels, params.holdout_fraction, seed)
        pool = np.setdiff1d(pool, held)
    train_idx = pool[select_per_class(labels[pool], params.train_per_class, seed)]
    if split == "train":
        return train_idx
    if held is not None:
        tune_idx = held[select_per_class(labels[held], params.tune_per_class, seed + 1)]
    else:
        rest = np.setdiff1d(everything, train_idx)
        if rest.size == 0:
            raise ValueError(
                f"dataset {name}: no training images left for a tuning split; lower train_per_class"
            )
        tune_idx = rest[select_per_class(labels[rest], params.tune_per_class, seed + 1)]
    if split == "tune":
        return tune_idx
    rest = np.setdiff1d(everything, np.union1d(train_idx, tune_idx))  # split == "pool"
    if rest.size == 0:
        raise ValueError(f"dataset {name}: no training images left for an active-learning pool")
    return rest[select_per_class(labels[rest], params.pool_per_class, seed + 2)]
