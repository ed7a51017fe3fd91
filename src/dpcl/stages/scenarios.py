"""Stage of ``workflow/rules/scenarios.smk``: the task split of a benchmark's training subset."""

from __future__ import annotations

from pathlib import Path

from ..data.scenarios import Scenario, make_scenario
from ..io import write_json
from .data import dataset_subset


def build_scenario(
    dataset: str,
    root: str | Path,
    dataset_cfg: dict,
    kind: str,
    n_tasks: int,
    seed: int,
    *,
    out: str | Path,
    **params: float,
) -> Scenario:
    """Task split over the fixed training subset; indices are original dataset indices."""
    ds, idx = dataset_subset(dataset, root, "train", dataset_cfg)
    sc = make_scenario(kind, ds.labels[idx], n_tasks, seed, **params)
    sc.train_indices = [idx[i] for i in sc.train_indices]
    write_json(out, sc.to_dict())
    return sc
