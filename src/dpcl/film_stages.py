"""Workflow stages of the FiLM learners (paper 000 Alg. 2 with FiLM, App. F.1 baselines).

The PEFT ensemble's members are independent given the released label spaces, so each
(run, task) member is its own job (:func:`film_member_stage`, parallel on a cluster, one
GPU each) and one evaluation job per run (:func:`film_eval_stage`) aggregates them. The
Naive and Non-CL baselines are sequential / single models: one job per run
(:func:`film_baseline_stage`). Members are stored as FiLM values + head only
(:class:`dpcl.film.FilmMember`), never as backbone copies.

Privacy bookkeeping is the head learners': the run's ledger starts from the label file's
release entries, gets one DP-SGD record per task (noise multiplier from the training budget
that label release left, via the PRV accountant), and is verified when written.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np

from .data.label_space import evaluation_labels, remap_task_data
from .data.scenarios import Scenario
from .io import read_json, write_json, write_npz
from .seeding import rng


def _log(msg: str) -> None:
    import sys

    print(msg, file=sys.stderr, flush=True)


def film_dpsgd_config(config: dict) -> dict:
    """The FiLM learners' DP-SGD hyperparameters: the ``dpsgd`` block overridden by ``film.dpsgd``."""
    return {**config["dpsgd"], **(config.get("film", {}).get("dpsgd") or {})}


def load_film_backbone(backbone_cfg: dict):
    """(backbone, preprocessing) for FiLM: the feature extractor built as for feature caching."""
    from .backbones import backbone_from_config

    return backbone_from_config(backbone_cfg)


def _task_images(dataset: str, root, dataset_cfg: dict, scenario: Scenario):
    """Per task (images, labels) of the scenario's training samples (original dataset indices)."""
    from .stages import dataset_subset

    ds, _ = dataset_subset(dataset, root, "train", dataset_cfg)
    return ds, [(ds.images[np.asarray(idx)], ds.labels[np.asarray(idx)]) for idx in scenario.train_indices]


def _test_sets(dataset: str, root, dataset_cfg: dict, scenario: Scenario, labels: dict):
    """Per task (test images, evaluation labels) of that task's classes (remapped as the label file says)."""
    from .stages import dataset_subset

    ds, idx = dataset_subset(dataset, root, "test", dataset_cfg)
    y = ds.labels[idx]
    eval_y = evaluation_labels(y, labels)
    out = []
    for cs in scenario.task_classes:
        m = np.isin(y, cs)
        out.append((ds.images[idx[m]], eval_y[m]))
    return out


def _noise(labels: dict, cfg):
    from .learners.peft import dpsgd_noise

    tb = labels["training_budget"]
    eps = math.inf if tb["epsilon"] == "inf" else float(tb["epsilon"])
    return dpsgd_noise(eps, float(tb["delta"]), cfg)


def _rng_for(learner: str, labels: dict, seed: int):
    return lambda t: rng(seed, learner, labels["epsilon_tag"], labels["method"], "task", t, "dpsgd")


def film_member_stage(
    dataset: str, root: str | Path, dataset_cfg: dict, backbone_cfg: dict, scenario_path: str | Path,
    labels_path: str | Path, task: int, dpsgd_cfg: dict, physical_batch: int, device: str,
    out_member: str | Path, out_record: str | Path,
) -> None:  # fmt: skip
    """Train PEFT-ensemble member ``task`` of one run (FiLM + head over O_t) with DP-SGD."""
    from .dpsgd import DPSGDConfig
    from .film import train_film

    sc = Scenario.from_dict(read_json(scenario_path))
    labels = read_json(labels_path)
    if not 0 <= task < len(sc.train_indices):
        raise ValueError(f"task {task} outside the scenario's {len(sc.train_indices)} tasks")
    cfg = DPSGDConfig(**dpsgd_cfg)
    noise = _noise(labels, cfg)
    backbone, pre = load_film_backbone(backbone_cfg)
    _, tasks = _task_images(dataset, root, dataset_cfg, sc)
    x, y = tasks[task]
    o_t = sorted(labels["tasks"][task]["labels"])
    keep, y_kept = remap_task_data(y, o_t, labels.get("remap"))  # R_t^task(D_t), Eq. 8
    rows = np.searchsorted(np.asarray(o_t, dtype=np.int64), y_kept)
    t0 = time.perf_counter()
    member, info = train_film(backbone, x[keep], rows, len(o_t), cfg, float(noise["noise_multiplier"]),
                              _rng_for("peft_film", labels, int(sc.seed))(task), pre,
                              physical_batch=physical_batch, device=device, progress=True)  # fmt: skip
    record = {**noise, **info, "data": f"images of R_task(D_{task}) ({int(keep.sum())} kept)",
              "labels": o_t, "seconds": round(time.perf_counter() - t0, 1)}  # fmt: skip
    _log(f"peft_film seed {sc.seed} eps {labels['epsilon_tag']} {labels['method']} task {task}: "
         f"{int(keep.sum())} images, {info['steps']} steps, σ = {noise['noise_multiplier']:.4g} "
         f"({record['seconds']} s)")  # fmt: skip
    write_npz(out_member, **member.to_arrays())
    write_json(out_record, record)


def _finish(learner: str, labels: dict, seed: int, preds, records, test_y, extra: dict) -> tuple[dict, dict]:
    """(metrics, verified privacy ledger) of one run from its predictions and per-task records."""
    from .metrics import accuracy_matrix, average_accuracy, average_forgetting
    from .stages import _ledger_from_labels

    ledger = _ledger_from_labels(labels)
    for t, rec in enumerate(records):
        ledger.add(t, {k: v for k, v in rec.items() if k not in ("labels", "seconds")})
    acc = accuracy_matrix(preds, test_y)
    with np.errstate(invalid="ignore"):
        aa, af = average_accuracy(acc), average_forgetting(acc)
    privacy = ledger.to_dict()  # raises PrivacyBudgetExceeded if the target is exceeded
    target = ledger.target
    metrics = {
        "learner": learner, "label_method": labels["method"], "epsilon": target.epsilon, "delta": target.delta,
        "seed": seed, "acc": acc, "average_accuracy": aa, "average_forgetting": af,
        "final_accuracy": float(np.nanmean(acc[-1])), "final_forgetting": float(af[-1]),
        "released_labels": [len(t["labels"]) for t in labels["tasks"]], **extra,
    }  # fmt: skip
    return metrics, privacy


def film_eval_stage(
    dataset: str, root: str | Path, dataset_cfg: dict, backbone_cfg: dict, scenario_path: str | Path,
    labels_path: str | Path, member_paths: list[str | Path], record_paths: list[str | Path],
    dpsgd_cfg: dict, aggregation: str, device: str, out_metrics: str | Path, out_privacy: str | Path,
) -> None:  # fmt: skip
    """Evaluate a PEFT FiLM ensemble after every task with every aggregation rule (Eq. 11, App. D.2)."""
    from .film import FilmMember, film_logits
    from .learners.aggregation import RULES, aggregate
    from .metrics import accuracy_matrix

    sc = Scenario.from_dict(read_json(scenario_path))
    labels = read_json(labels_path)
    n_tasks = len(sc.train_indices)
    if len(member_paths) != n_tasks or len(record_paths) != n_tasks:
        raise ValueError(
            f"expected {n_tasks} members and records, got {len(member_paths)} and {len(record_paths)}"
        )
    records = [read_json(p) for p in record_paths]
    for t, rec in enumerate(records):
        if sorted(rec["labels"]) != sorted(labels["tasks"][t]["labels"]):
            raise ValueError(f"member {t} was trained over another label space than the run's label file")
    backbone, pre = load_film_backbone(backbone_cfg)
    members = []
    for p in member_paths:
        with np.load(p) as z:
            members.append(FilmMember.from_arrays({k: z[k] for k in z.files}))
    spaces = [np.asarray(sorted(t["labels"]), dtype=np.int64) for t in labels["tasks"]]
    tests = _test_sets(dataset, root, dataset_cfg, sc, labels)
    logits = {}  # (member, test set) -> logits; every member is final once trained
    by_rule: dict[str, list[list[np.ndarray]]] = {rule: [] for rule in RULES}
    for t in range(n_tasks):
        for rule in RULES:
            by_rule[rule].append([])
        for i, (xt, _) in enumerate(tests[: t + 1]):
            for m in range(t + 1):
                if (m, i) not in logits:
                    logits[(m, i)] = film_logits(backbone, members[m], xt, pre, device=device)
            zs = [logits[(m, i)] for m in range(t + 1)]
            for rule in RULES:
                by_rule[rule][t].append(aggregate(zs, spaces[: t + 1], rule))
    test_y = [y for _, y in tests]
    accs = {rule: accuracy_matrix(p, test_y) for rule, p in by_rule.items()}
    extra = {"noise_multiplier": records[0]["noise_multiplier"], "dpsgd": dpsgd_cfg, "aggregation": aggregation,
             "acc_by_aggregation": accs,
             "final_accuracy_by_aggregation": {r: float(np.nanmean(a[-1])) for r, a in accs.items()},
             "trainable_parameters": [r["trainable_parameters"] for r in records]}  # fmt: skip
    metrics, privacy = _finish(
        "peft_film", labels, int(sc.seed), by_rule[aggregation], records, test_y, extra
    )
    _log(f"peft_film seed {sc.seed} eps {labels['epsilon_tag']} {labels['method']}: final acc "
         f"{100 * metrics['final_accuracy']:.1f} % ({aggregation})")  # fmt: skip
    write_json(out_privacy, privacy)
    write_json(out_metrics, metrics)


def film_baseline_stage(
    learner: str, dataset: str, root: str | Path, dataset_cfg: dict, backbone_cfg: dict,
    scenario_path: str | Path, labels_path: str | Path, dpsgd_cfg: dict, physical_batch: int, device: str,
    out_metrics: str | Path, out_privacy: str | Path, out_model: str | Path,
) -> None:  # fmt: skip
    """One Naive or Non-CL FiLM run (App. F.1): a single model through (or over) all tasks."""
    from .dpsgd import DPSGDConfig
    from .film import run_film_learner

    if learner not in ("naive_film", "noncl_film"):
        raise ValueError(f"film_baseline_stage runs naive_film or noncl_film, not {learner!r}")
    sc = Scenario.from_dict(read_json(scenario_path))
    labels = read_json(labels_path)
    cfg = DPSGDConfig(**dpsgd_cfg)
    noise = _noise(labels, cfg)
    backbone, pre = load_film_backbone(backbone_cfg)
    _, tasks = _task_images(dataset, root, dataset_cfg, sc)
    spaces = [sorted(t["labels"]) for t in labels["tasks"]]
    task_data = []
    for (x, y), o_t in zip(tasks, spaces, strict=True):
        keep, y_kept = remap_task_data(y, o_t, labels.get("remap"))
        task_data.append((x[keep], y_kept))
    tests = _test_sets(dataset, root, dataset_cfg, sc, labels)
    t0 = time.perf_counter()
    preds, records, members = run_film_learner(
        learner, task_data, tests, spaces, int(labels["label_universe"]), backbone, pre, cfg, noise,
        _rng_for(learner, labels, int(sc.seed)), physical_batch=physical_batch, device=device, progress=True,
    )  # fmt: skip
    extra = {"noise_multiplier": noise["noise_multiplier"], "dpsgd": dpsgd_cfg,
             "seconds": round(time.perf_counter() - t0, 1)}  # fmt: skip
    metrics, privacy = _finish(learner, labels, int(sc.seed), preds, records, [y for _, y in tests], extra)
    _log(f"{learner} seed {sc.seed} eps {labels['epsilon_tag']} {labels['method']}: final acc "
         f"{100 * metrics['final_accuracy']:.1f} % ({extra['seconds']} s)")  # fmt: skip
    model, ids = members[0]
    write_npz(out_model, label_ids=ids, **model.to_arrays())
    write_json(out_privacy, privacy)
    write_json(out_metrics, metrics)
