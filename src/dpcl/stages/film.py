"""Stages of ``workflow/rules/film.smk``: the FiLM learners ([LabelSpace] Alg. 2 with FiLM, App. F.1 baselines).

Every FiLM learner implements the learner contract (:mod:`dpcl.learners.api`) on images: one job per
run (:func:`film_run_stage`) loads the backbone, its preprocessing and the tasks' images once, hands them
to the learner's ``run`` (:class:`FilmJob`, :func:`film_inputs`) and writes what it returns. The PEFT
ensemble's members are independent given the released label spaces; its job trains them one after the
other and then aggregates them (the paper grid's 1,160 runs keep a cluster busy). The Naive, Non-CL and
DP-A-GEM baselines are sequential / single models. Members are stored as FiLM values + head only
(:class:`dpcl.training.film.FilmMember`), never as backbone copies.

Privacy bookkeeping is the head learners': the run's ledger starts from the label file's
release entries, gets one DP-SGD record per task (noise multiplier from the training budget
that label release left, via the PRV accountant), and is verified when written.

Hyperparameters (App. D.1): with ``tuning.enabled`` one job per seed
(:func:`tune_film_stage`) tunes (lr, sampling rate, clip) per ε on the tuning set of
``tuning.protocol`` (the PUBLIC tuning split, or as the paper private training data,
:mod:`dpcl.training.tuning_protocol`) and every FiLM job of that (ε, seed) reads the result
scaled to its learner's training set (:func:`dpcl.stages.common.resolve_dpsgd`); otherwise the
``dpsgd`` block overridden by ``film.dpsgd`` is used as is. metrics.json says which (``dpsgd``,
``tuned``); privacy.json's ``hyperparameters`` says on what data.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..config import eps_tag
from ..data.label_space import evaluation_labels, remap_task_data
from ..data.scenarios import Scenario
from ..devices import device_record, nondeterministic_error, resolve_device, use_deterministic
from ..io import log, read_json, write_json, write_npz
from .common import (
    NON_PRIVATE,
    config_target,
    resolve_dpsgd,
    write_run,
)


def film_dpsgd_config(config: dict) -> dict:
    """The FiLM learners' DP-SGD hyperparameters: the ``dpsgd`` block overridden by ``film.dpsgd``."""
    return {**config["dpsgd"], **(config.get("film", {}).get("dpsgd") or {})}


def load_film_backbone(backbone_cfg: dict):
    """(backbone, preprocessing) for FiLM: the feature extractor built as for feature caching,
    its BatchNorms (if any: EfficientNet-Lite0) frozen to their running statistics
    (:func:`dpcl.training.film.freeze_batchnorm`), which leaves its eval-mode outputs unchanged
    and lets FiLM DP-SGD train their scales and shifts per sample."""
    from ..backbones import backbone_from_config
    from ..training.film_model import freeze_batchnorm

    backbone, pre = backbone_from_config(backbone_cfg)
    freeze_batchnorm(backbone)
    return backbone, pre


def _task_images(dataset: str, root, dataset_cfg: dict, scenario: Scenario):
    """Per task (images, labels) of the scenario's training samples (original dataset indices)."""
    from .data import dataset_subset

    ds, _ = dataset_subset(dataset, root, "train", dataset_cfg)
    return ds, [(ds.images[np.asarray(idx)], ds.labels[np.asarray(idx)]) for idx in scenario.train_indices]


def _test_sets(dataset: str, root, dataset_cfg: dict, scenario: Scenario, labels: dict):
    """Per task (test images, evaluation labels) of that task's classes (remapped as the label file says)."""
    from .data import dataset_subset

    ds, idx = dataset_subset(dataset, root, "test", dataset_cfg)
    y = ds.labels[idx]
    eval_y = evaluation_labels(y, labels)
    out = []
    for cs in scenario.task_classes:
        m = np.isin(y, cs)
        out.append((ds.images[idx[m]], eval_y[m]))
    return out


def _refuse_permuted(sc: Scenario) -> None:
    """FiLM trains on images; the 'permuted' scenario permutes cached feature dimensions."""
    if sc.feature_permutation:
        raise ValueError(
            f"scenario {sc.name!r} permutes cached feature dimensions (domain-incremental); the FiLM "
            "learners train on images: run it with cached-feature learners only "
            "(benchmarks.<name>.learners)"
        )


def _backbone_key(backbone_name: str | None, backbone_cfg: dict) -> str:
    """The backbone's part of the noise stream's key: its config name, else its canonical config."""
    import json

    return backbone_name or json.dumps(backbone_cfg, sort_keys=True, default=str)


@dataclass(frozen=True, kw_only=True)
class FilmJob:
    """What a FiLM job gives its learner's run (:attr:`dpcl.learners.api.RunInputs.job`): the backbone with
    its normalisation statistics frozen (:func:`load_film_backbone`) and its preprocessing, the run's
    DP-SGD config (the tuning result scaled to the learner's training set, App. D.1, or the ``dpsgd``
    block overridden by ``film.dpsgd``), the tuning protocol (None: untuned), the ensemble's aggregation
    rule, the config's ``agem`` block (for a learner that declares it), the physical batch and the
    device."""

    backbone: Any
    pre: Any  #: the backbone's :class:`dpcl.backbones.Preprocessing`
    dpsgd_cfg: dict
    protocol: str | None = None
    aggregation: str = "argmax"
    agem_cfg: dict = field(default_factory=dict)
    physical_batch: int = 32
    device: str = "auto"
    progress: bool = False  #: per-step progress in the job's log
    precision: str = "fp32"  #: the backbone's passes' (:mod:`dpcl.training.precision`)


def film_inputs(
    learner: str,
    *,
    dataset: str,
    root: str | Path,
    dataset_cfg: dict,
    scenario: Scenario,
    labels: dict,
    backbone_key: str,
    job: FilmJob,
    options: dict | None = None,
):
    """The :class:`~dpcl.learners.api.RunInputs` of one FiLM run (:func:`dpcl.stages.learner.contract_inputs`):
    per task the images of R_t^task(D_t) (as the data set stores them) with their labels and sample ids,
    the test sets' images with their evaluation labels, and the run's noise streams keyed by
    ``backbone_key``."""
    from .learner import contract_inputs

    _, tasks = _task_images(dataset, root, dataset_cfg, scenario)
    spaces = [sorted(t["labels"]) for t in labels["tasks"]]
    task_data = []
    for (x, y), o_t, ids in zip(tasks, spaces, scenario.train_indices, strict=True):
        keep, y_kept = remap_task_data(y, o_t, labels.get("remap"))  # R_t^task(D_t), Eq. 8
        task_data.append((x[keep], y_kept, np.asarray(ids, dtype=np.int64)[keep]))
    return contract_inputs(
        learner,
        task_data=task_data,
        spaces=spaces,
        test_sets=_test_sets(dataset, root, dataset_cfg, scenario, labels),
        scenario=scenario,
        labels=labels,
        options=options,
        backbone=backbone_key,
        job=job,
    )


def film_run_stage(
    learner: str,
    dataset: str,
    root: str | Path,
    dataset_cfg: dict,
    backbone_cfg: dict,
    *,
    scenario_path: str | Path,
    labels_path: str | Path,
    dpsgd_cfg: dict,
    physical_batch: int,
    device: str,
    out_metrics: str | Path,
    deterministic: bool = True,
    precision: str = "fp32",
    out_privacy: str | Path,
    out_diagnostics: str | Path | None = None,
    out_model: str | Path | None = None,
    out_members: str | Path | None = None,
    tuned_path: str | Path | None = None,
    agem_cfg: dict | None = None,
    aggregation: str = "argmax",
    targets: dict | None = None,
    backbone_name: str | None = None,
) -> None:
    """One run of a FiLM learner (jobs ``film_peft`` and ``film_baseline``) through its ``run`` function
    (the learner contract, :func:`dpcl.stages.learner.run_contract`; hyperparameters from ``tuned_path``
    when given, see :func:`dpcl.stages.common.resolve_dpsgd`; ``agem_cfg`` is the config's ``agem``
    block, for a learner that declares it). Writes the run's metrics, privacy ledger (verified) and
    diagnostics; an ensemble's members to ``out_members`` (``task{t}.npz``: FiLM values + head, and
    ``task{t}.json``: its raw training record, marked non-private), a single model to ``out_model``."""
    from ..learners import registry
    from ..training.precision import check_precision
    from .learner import run_contract

    spec = registry.get(learner)
    if spec.job not in registry.FILM_JOBS:
        raise ValueError(f"learner {learner!r} is run by the {spec.job!r} job, not by a FiLM job")
    dev = resolve_device(device)  # a job asked for a GPU it cannot see fails here, before any work
    use_deterministic(dev, deterministic)
    check_precision(precision, dev, key="film.precision")
    sc = Scenario.from_dict(read_json(scenario_path))
    _refuse_permuted(sc)
    labels = read_json(labels_path)
    dpsgd_cfg, protocol = resolve_dpsgd(dpsgd_cfg, tuned_path, labels["epsilon_tag"], learner)
    backbone, pre = load_film_backbone(backbone_cfg)
    job = FilmJob(
        backbone=backbone,
        pre=pre,
        dpsgd_cfg=dpsgd_cfg,
        protocol=protocol,
        aggregation=aggregation,
        agem_cfg=dict(agem_cfg or {}) if "agem" in spec.config_blocks else {},
        physical_batch=physical_batch,
        device=str(dev),
        progress=True,
        precision=precision,
    )
    inputs = film_inputs(
        learner,
        dataset=dataset,
        root=root,
        dataset_cfg=dataset_cfg,
        scenario=sc,
        labels=labels,
        backbone_key=_backbone_key(backbone_name, backbone_cfg),
        job=job,
    )
    t0 = time.perf_counter()
    try:
        metrics, privacy, diag, result = run_contract(
            inputs, labels=labels, target=config_target(labels, targets), job_name=spec.job
        )
    except RuntimeError as err:
        raise (nondeterministic_error(err) or err) from err
    if result.members:
        if out_members is None:
            raise ValueError(f"learner {learner!r} returned ensemble members: its job must name out_members")
        out_dir = Path(out_members)
        out_dir.mkdir(parents=True, exist_ok=True)
        for t, (arrays, record) in enumerate(zip(result.members, result.records, strict=True)):
            write_npz(out_dir / f"task{t}.npz", **arrays)
            write_json(out_dir / f"task{t}.json", {"non_private": NON_PRIVATE, **record})
    if out_model is not None:
        if result.model is None:
            raise ValueError(f"learner {learner!r} returned no model for {out_model}")
        write_npz(out_model, **result.model)
    log(
        f"{learner} seed {sc.seed} eps {labels['epsilon_tag']} {labels['method']}: final acc "
        f"{100 * metrics['final_accuracy']:.1f} % ({time.perf_counter() - t0:.1f} s)"
    )
    write_run(
        {"metrics": out_metrics, "privacy": out_privacy, "diagnostics": out_diagnostics},
        metrics,
        privacy,
        diag,
        device=device_record(dev, deterministic=deterministic, precision=precision),
    )


def tune_film_stage(
    dataset: str,
    root: str | Path,
    dataset_cfg: dict,
    backbone_cfg: dict,
    *,
    scenario_path: str | Path,
    epsilons: list,
    delta: float,
    outputs: dict[str, str | Path],
    n_trials: int,
    dpsgd_cfg: dict,
    physical_batch: int,
    device: str,
    protocol: str = "public",
    deterministic: bool = True,
    precision: str = "fp32",
) -> None:
    """Tune the FiLM learners' DP-SGD hyperparameters once per (ε, seed) (App. D.1).

    Tuning set: images of the plan of ``protocol`` (:func:`dpcl.training.tuning_protocol.tuning_plan`:
    the PUBLIC ``tune`` split's first-task classes, or as the paper the private training data's),
    as :func:`dpcl.stages.heads.tune_head_learners` does on features. Epochs and the normaliser
    are the FiLM learners' own (``dpsgd`` overridden by ``film.dpsgd``). One result file per ε tag
    in ``outputs``, with the configs scaled to the runs.
    """
    from ..training.precision import check_precision
    from ..training.tuning import tune_film
    from ..training.tuning_protocol import tuning_plan, tuning_rows, with_run_configs
    from .data import dataset_subset

    dev = resolve_device(device)  # a job asked for a GPU it cannot see fails here, before any work
    use_deterministic(dev, deterministic)
    check_precision(precision, dev, key="film.precision")
    sc = Scenario.from_dict(read_json(scenario_path))
    _refuse_permuted(sc)
    eps_values = [math.inf if str(e).lower() in ("inf", ".inf") else float(e) for e in epsilons]
    missing = sorted({eps_tag(e) for e in eps_values} - set(outputs))
    if missing:
        raise ValueError(f"no output file for ε tags {missing}; outputs are named for {sorted(outputs)}")
    plan = tuning_plan(dataset, dataset_cfg, sc.task_classes, protocol)
    ds, idx = dataset_subset(dataset, root, plan.split, dataset_cfg)
    sel = idx[tuning_rows(ds.labels[idx], plan, int(sc.seed))]
    x, y = ds.images[sel], ds.labels[sel]
    backbone, pre = load_film_backbone(backbone_cfg)
    for eps in eps_values:
        t0 = time.perf_counter()
        tag = eps_tag(eps)

        def log_tuning(msg: str, tag: str = tag) -> None:
            log(f"tune_film seed {sc.seed} eps {tag}: {msg}")

        res = tune_film(
            backbone,
            x,
            y,
            eps,
            delta,
            int(sc.seed),
            pre=pre,
            n_trials=n_trials,
            epochs=float(dpsgd_cfg["epochs"]),
            normaliser=float(dpsgd_cfg["normaliser"]),
            physical_batch=physical_batch,
            device=str(dev),
            precision=precision,
            log=log_tuning,
            journal=f"{outputs[tag]}.optuna-journal",
        )  # a requeued job resumes its search
        res = with_run_configs(res, plan) | {
            "seed": sc.seed,
            "device": device_record(dev, deterministic=deterministic, precision=precision),
        }
        write_json(outputs[tag], res)
        log_tuning(
            f"best validation accuracy {100 * res['best_validation_accuracy']:.1f} % "
            f"({time.perf_counter() - t0:.1f} s, "
            f"{protocol} protocol, factor {res['plan']['factor_per_task']:.3g})"
        )
