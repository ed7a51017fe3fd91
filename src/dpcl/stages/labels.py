"""Stage of ``workflow/rules/labels.smk``: the output label spaces O_t of every (ε, label method)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..config import eps_tag
from ..data.label_space import output_label_spaces, parse_label_method
from ..data.registry import load_dataset
from ..data.scenarios import Scenario
from ..io import read_json, write_json
from ..privacy.accounting import Budget


def release_label_spaces(
    dataset: str,
    root: str | Path,
    scenario_path: str | Path,
    methods: list[str],
    epsilons: list[float],
    delta: float,
    *,
    seed: int,
    outputs: dict[tuple[str, str], str],
) -> None:
    """Write O_t per task for every (ε, label method); ``outputs[(eps_tag, method)]`` is the path."""
    ds = load_dataset(dataset, root, "train")
    sc = Scenario.from_dict(read_json(scenario_path))
    task_labels = [ds.labels[i] for i in sc.train_indices]
    n_base = len(ds.classes)
    needs_parent = any(parse_label_method(tag).remap == "parent" for tag in methods)
    parent = _parent_map(ds, n_base) if needs_parent else None
    for eps in epsilons:
        budget = Budget(eps, delta) if math.isfinite(eps) else Budget(math.inf, 0.0)
        for tag in methods:
            method = parse_label_method(tag)
            if method.remap == "parent" and parent is None:
                raise ValueError(
                    f"label method {tag!r} needs a class hierarchy; dataset {dataset!r} has none "
                    "(CIFAR-100 has one: fine → coarse)"
                )
            # the noise stream names the data (dataset with variant, scenario): benchmarks over the
            # same data never share label-release noise
            res = output_label_spaces(
                method,
                task_labels,
                n_base,
                budget,
                seed,
                parent=parent,
                run_key=("release", dataset, sc.name, eps_tag(eps)),
            )
            res.update(
                seed=seed,
                scenario=sc.name,
                epsilon_tag=eps_tag(eps),
                stream={"dataset": dataset, "scenario": sc.name},
            )
            write_json(outputs[(eps_tag(eps), tag)], res)


def _parent_map(ds, n_base: int) -> np.ndarray | None:
    """Parent of every base label in the dataset's published hierarchy (CIFAR-100 fine → coarse), or None."""
    coarse = getattr(ds, "coarse_labels", None)
    if coarse is None:
        return None
    parent = np.full(n_base, -1, dtype=np.int64)
    parent[np.asarray(ds.labels)] = np.asarray(coarse)
    if np.any(parent < 0) or np.any(parent[np.asarray(ds.labels)] != np.asarray(coarse)):
        raise ValueError("the class hierarchy must give every base label exactly one parent")
    return parent
