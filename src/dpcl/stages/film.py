"""Stages of ``workflow/rules/film.smk``: the FiLM learners ([LabelSpace] Alg. 2 with FiLM, App. F.1 baselines).

The PEFT ensemble's members are independent given the released label spaces; one job per
run trains them one after the other (:func:`film_members_stage`, one GPU, the data and the
backbone loaded once; the paper grid's 1,160 runs keep a cluster busy) and then aggregates them
(:func:`film_eval_stage`, in the same job). The
Naive and Non-CL baselines are sequential / single models: one job per run
(:func:`film_baseline_stage`). Members are stored as FiLM values + head only
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
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..config import eps_tag
from ..data.label_space import evaluation_labels, remap_task_data
from ..data.scenarios import Scenario
from ..io import log, read_json, write_json, write_npz
from .common import (
    NON_PRIVATE,
    config_target,
    finish_run,
    hyperparameters_note,
    release_rng,
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
    from ..training.film import freeze_batchnorm

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


def _noise(labels: dict, cfg):
    from ..learners.peft import dpsgd_noise

    tb = labels["training_budget"]
    eps = math.inf if tb["epsilon"] == "inf" else float(tb["epsilon"])
    return dpsgd_noise(eps, float(tb["delta"]), cfg)


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


def _rng_for(learner: str, labels: dict, backbone: str):
    return lambda t: release_rng(labels, backbone, learner, t, "dpsgd")


def film_member_stage(
    dataset: str,
    root: str | Path,
    dataset_cfg: dict,
    backbone_cfg: dict,
    *,
    learner: str,
    scenario_path: str | Path,
    labels_path: str | Path,
    task: int,
    dpsgd_cfg: dict,
    physical_batch: int,
    device: str,
    out_member: str | Path,
    out_record: str | Path,
    tuned_path: str | Path | None = None,
    backbone_name: str | None = None,
) -> None:
    """Train PEFT-ensemble member ``task`` of one run (FiLM + head over O_t) with DP-SGD
    (hyperparameters from ``tuned_path`` when given, see :func:`dpcl.stages.common.resolve_dpsgd`).

    The member record is an intermediate file marked non-private: it holds the raw training
    record (sample count, clipped fraction, batch size, time); the evaluation job splits it
    into the ledger's public entry and the run's diagnostics."""
    run = _MemberRun(
        learner,
        dataset,
        root,
        dataset_cfg,
        backbone_cfg,
        scenario_path,
        labels_path,
        dpsgd_cfg,
        tuned_path,
        backbone_name,
    )
    if not 0 <= task < run.n_tasks:
        raise ValueError(f"task {task} outside the scenario's {run.n_tasks} tasks")
    run.train(task, physical_batch, device, out_member, out_record)


def film_members_stage(
    dataset: str,
    root: str | Path,
    dataset_cfg: dict,
    backbone_cfg: dict,
    *,
    learner: str,
    scenario_path: str | Path,
    labels_path: str | Path,
    dpsgd_cfg: dict,
    physical_batch: int,
    device: str,
    out_dir: str | Path,
    tuned_path: str | Path | None = None,
    backbone_name: str | None = None,
) -> list[Path]:
    """Every member of one run, in one process: ``out_dir/task{t}.npz`` and ``task{t}.json`` for
    each task t, exactly as :func:`film_member_stage` writes them one by one (the same data,
    noise streams and files), loading the images, the backbone and σ once. The workflow runs
    one such job per run: 1,160 jobs for the paper grid's 9,800 members rather than 9,800."""
    run = _MemberRun(
        learner,
        dataset,
        root,
        dataset_cfg,
        backbone_cfg,
        scenario_path,
        labels_path,
        dpsgd_cfg,
        tuned_path,
        backbone_name,
    )
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for t in range(run.n_tasks):
        run.train(t, physical_batch, device, out_dir / f"task{t}.npz", out_dir / f"task{t}.json")
        written += [out_dir / f"task{t}.npz", out_dir / f"task{t}.json"]
    return written


class _MemberRun:
    """What every member of one PEFT FiLM run shares: scenario, label file, DP-SGD config and
    noise, backbone and the tasks' images (loaded once)."""

    def __init__(
        self,
        learner,
        dataset,
        root,
        dataset_cfg,
        backbone_cfg,
        scenario_path,
        labels_path,
        dpsgd_cfg,
        tuned_path,
        backbone_name,
    ) -> None:
        from ..training.heads import DPSGDConfig

        self.sc = Scenario.from_dict(read_json(scenario_path))
        _refuse_permuted(self.sc)
        self.labels = read_json(labels_path)
        self.n_tasks = len(self.sc.train_indices)
        dpsgd_cfg, self.protocol = resolve_dpsgd(dpsgd_cfg, tuned_path, self.labels["epsilon_tag"], learner)
        self.cfg = DPSGDConfig.from_block(dpsgd_cfg)
        self.noise = _noise(self.labels, self.cfg)
        self.backbone, self.pre = load_film_backbone(backbone_cfg)
        _, self.tasks = _task_images(dataset, root, dataset_cfg, self.sc)
        self.learner = learner
        self.rng_for = _rng_for(learner, self.labels, _backbone_key(backbone_name, backbone_cfg))

    def train(self, task: int, physical_batch: int, device: str, out_member, out_record) -> None:
        from ..training.film import train_film

        labels, cfg, noise = self.labels, self.cfg, self.noise
        x, y = self.tasks[task]
        o_t = sorted(labels["tasks"][task]["labels"])
        keep, y_kept = remap_task_data(y, o_t, labels.get("remap"))  # R_t^task(D_t), Eq. 8
        rows = np.searchsorted(np.asarray(o_t, dtype=np.int64), y_kept)
        t0 = time.perf_counter()
        member, info = train_film(
            self.backbone,
            x[keep],
            rows,
            len(o_t),
            cfg,
            noise_multiplier=float(noise["noise_multiplier"]),
            rng=self.rng_for(task),
            pre=self.pre,
            physical_batch=physical_batch,
            device=device,
            progress=True,
        )
        record = {
            "non_private": NON_PRIVATE,
            **noise,
            **info,
            "data": f"images of R_task(D_{task})",
            "samples": int(keep.sum()),
            "labels": o_t,
            "lr": cfg.lr,
            "tuned": self.protocol is not None,
        }
        log(
            f"{self.learner} seed {self.sc.seed} eps {labels['epsilon_tag']} {labels['method']} task {task}: "
            f"{info['steps']} steps, σ = {noise['noise_multiplier']:.4g} ({time.perf_counter() - t0:.1f} s)"
        )
        write_npz(out_member, **member.to_arrays())
        write_json(out_record, record)


def film_eval_stage(
    dataset: str,
    root: str | Path,
    dataset_cfg: dict,
    backbone_cfg: dict,
    *,
    learner: str,
    scenario_path: str | Path,
    labels_path: str | Path,
    member_paths: list[str | Path],
    record_paths: list[str | Path],
    dpsgd_cfg: dict,
    aggregation: str,
    device: str,
    out_metrics: str | Path,
    out_privacy: str | Path,
    tuned_path: str | Path | None = None,
    targets: dict | None = None,
    out_diagnostics: str | Path | None = None,
) -> None:
    """Evaluate a PEFT FiLM ensemble after every task with every aggregation rule (Eq. 11, App. D.2);
    checks that every member was trained with the run's DP-SGD config (tuned or configured)."""
    from ..learners.aggregation import RULES, EnsembleVotes
    from ..metrics import accuracy_matrix
    from ..training.film import FilmMember, film_logits_each
    from ..training.heads import DPSGDConfig

    sc = Scenario.from_dict(read_json(scenario_path))
    _refuse_permuted(sc)
    labels = read_json(labels_path)
    n_tasks = len(sc.train_indices)
    if len(member_paths) != n_tasks or len(record_paths) != n_tasks:
        raise ValueError(
            f"expected {n_tasks} members and records, got {len(member_paths)} and {len(record_paths)}"
        )
    records = [read_json(p) for p in record_paths]
    dpsgd_cfg, protocol = resolve_dpsgd(dpsgd_cfg, tuned_path, labels["epsilon_tag"], learner)
    cfg = DPSGDConfig.from_block(dpsgd_cfg)
    for t, rec in enumerate(records):
        if sorted(rec["labels"]) != sorted(labels["tasks"][t]["labels"]):
            raise ValueError(f"member {t} was trained over another label space than the run's label file")
        want = {
            "sample_rate": cfg.sample_rate,
            "steps": cfg.steps,
            "clip": cfg.clip,
            "normaliser": cfg.normaliser,
            "lr": cfg.lr,
        }
        used = {k: float(rec[k]) if k in rec else None for k in want}  # JSON writes inf as "inf"
        if used != want:
            raise ValueError(
                f"member {t} was trained with {used}, but the run's DP-SGD config ({'configured' if protocol is None else 'tuned'}) "
                f"is {want}; rerun its film_ensemble job"
            )
    backbone, pre = load_film_backbone(backbone_cfg)
    members = []
    for p in member_paths:
        with np.load(p) as z:
            members.append(FilmMember.from_arrays({k: z[k] for k in z.files}))
    spaces = [np.asarray(sorted(t["labels"]), dtype=np.int64) for t in labels["tasks"]]
    tests = _test_sets(dataset, root, dataset_cfg, sc, labels)
    # test set i after task t: members 0..t. Member t joins every test set's votes at task t (a
    # test set seen later has members 0..t already when it is first scored): each member's
    # values are swapped in once and its logits on a test set computed once
    votes = [EnsembleVotes(len(xt)) for xt, _ in tests]
    by_rule: dict[str, list[list[np.ndarray]]] = {rule: [] for rule in RULES}
    for t in range(n_tasks):
        sets = film_logits_each(backbone, members[t], [xt for xt, _ in tests], pre, device=device)
        for i, z in enumerate(sets):
            votes[i].add(z, spaces[t])
        for rule in RULES:
            by_rule[rule].append([votes[i].predict(rule) for i in range(t + 1)])
    test_y = [y for _, y in tests]
    accs = {rule: accuracy_matrix(p, test_y) for rule, p in by_rule.items()}
    extra = {
        "noise_multiplier": records[0]["noise_multiplier"],
        "dpsgd": dpsgd_cfg,
        "tuned": protocol is not None,
        "aggregation": aggregation,
        "acc_by_aggregation": accs,
        "final_accuracy_by_aggregation": {r: float(np.nanmean(a[-1])) for r, a in accs.items()},
        "trainable_parameters": [r["trainable_parameters"] for r in records],
    }
    metrics, privacy, diag = finish_run(
        learner,
        labels,
        int(sc.seed),
        by_rule[aggregation],
        records,
        test_y,
        extra=extra,
        target=config_target(labels, targets),
        hyperparameters=hyperparameters_note(dpsgd_cfg, protocol),
    )
    log(
        f"{learner} seed {sc.seed} eps {labels['epsilon_tag']} {labels['method']}: final acc "
        f"{100 * metrics['final_accuracy']:.1f} % ({aggregation})"
    )
    write_run(
        {"metrics": out_metrics, "privacy": out_privacy, "diagnostics": out_diagnostics},
        metrics,
        privacy,
        diag,
    )


@dataclass(frozen=True, kw_only=True)
class BaselineRun:
    """One FiLM baseline run (job ``film_baseline``) as :func:`film_baseline_stage` hands it to the
    learner's stage function (:attr:`LearnerSpec.stage`)."""

    dataset: str
    root: str | Path
    dataset_cfg: dict
    backbone_cfg: dict
    scenario: Scenario
    labels: dict
    cfg: object  #: the run's DPSGDConfig (tuned or configured)
    dpsgd_cfg: dict  #: its config block, as privacy.json records it
    protocol: str | None  #: the tuning protocol, None when untuned
    agem_cfg: dict  #: the config's agem block (only a learner that declares it gets it)
    physical_batch: int
    device: str
    out: dict  #: {metrics, privacy, diagnostics} paths
    out_model: str | Path
    target: object  #: the config's (ε, δ) of the run
    backbone_key: str  #: names the backbone in the noise streams' keys

    @property
    def seed(self) -> int:
        return int(self.scenario.seed)

    def backbone(self):
        """(backbone with frozen normalisation statistics, its preprocessing): :func:`load_film_backbone`."""
        return load_film_backbone(self.backbone_cfg)

    def noise(self) -> dict:
        """The run's DP-SGD noise (σ for its training budget and config)."""
        return _noise(self.labels, self.cfg)

    def rng_for(self, learner: str, *, part: bool = False):
        """The noise streams of ``learner``'s run: ``rng_for(t)`` for task t's DP-SGD, or with ``part``
        ``rng_for(t, part)`` for one named mechanism of task t."""
        if part:
            return lambda t, name: release_rng(self.labels, self.backbone_key, learner, t, name)
        return _rng_for(learner, self.labels, self.backbone_key)

    def finish(self, learner: str, preds, records, test_y, **kw) -> tuple[dict, dict, dict]:
        """(metrics, verified privacy ledger, diagnostics): :func:`dpcl.stages.common.finish_run`."""
        return finish_run(learner, self.labels, self.seed, preds, records, test_y, target=self.target, **kw)

    def note(self, search: str | None = None) -> dict:
        """privacy.json's account of the run's hyperparameters (:func:`dpcl.stages.common.hyperparameters_note`)."""
        if search is None:
            return hyperparameters_note(self.dpsgd_cfg, self.protocol)
        return hyperparameters_note(self.dpsgd_cfg, self.protocol, search)

    def write(self, model: dict, metrics: dict, privacy: dict, diagnostics: dict) -> None:
        """model.npz (``model``: its arrays), then the run's privacy, diagnostics and metrics files."""
        write_npz(self.out_model, **model)
        write_run(self.out, metrics, privacy, diagnostics)

    def task_data(self, *, with_ids: bool = False):
        """(label spaces, per-task R_task(D_t) images and rows [and sample ids], the test sets)."""
        _, tasks = _task_images(self.dataset, self.root, self.dataset_cfg, self.scenario)
        spaces = [sorted(t["labels"]) for t in self.labels["tasks"]]
        data = []
        for (x, y), o_t, ids in zip(tasks, spaces, self.scenario.train_indices, strict=True):
            keep, y_kept = remap_task_data(y, o_t, self.labels.get("remap"))
            data.append(
                (x[keep], y_kept, np.asarray(ids, dtype=np.int64)[keep]) if with_ids else (x[keep], y_kept)
            )
        return spaces, data, _test_sets(self.dataset, self.root, self.dataset_cfg, self.scenario, self.labels)


def film_baseline_stage(
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
    out_privacy: str | Path,
    out_model: str | Path,
    tuned_path: str | Path | None = None,
    agem_cfg: dict | None = None,
    targets: dict | None = None,
    out_diagnostics: str | Path | None = None,
    backbone_name: str | None = None,
) -> None:
    """One FiLM baseline run (registry job ``film_baseline``: a single model through, or over, all
    tasks, e.g. Naive and Non-CL, App. F.1, or DP-A-GEM, App. D.4), made by the learner's registered
    stage function (hyperparameters from ``tuned_path`` when given, see
    :func:`dpcl.stages.common.resolve_dpsgd`; ``agem_cfg`` is the config's ``agem`` block, for a learner
    that declares it)."""
    from ..learners.registry import stage_function
    from ..training.heads import DPSGDConfig

    stage = stage_function(learner, "film_baseline")
    sc = Scenario.from_dict(read_json(scenario_path))
    _refuse_permuted(sc)
    labels = read_json(labels_path)
    dpsgd_cfg, protocol = resolve_dpsgd(dpsgd_cfg, tuned_path, labels["epsilon_tag"], learner)
    run = BaselineRun(
        dataset=dataset,
        root=root,
        dataset_cfg=dataset_cfg,
        backbone_cfg=backbone_cfg,
        scenario=sc,
        labels=labels,
        cfg=DPSGDConfig.from_block(dpsgd_cfg),
        dpsgd_cfg=dpsgd_cfg,
        protocol=protocol,
        agem_cfg=agem_cfg or {},
        physical_batch=physical_batch,
        device=device,
        out={"metrics": out_metrics, "privacy": out_privacy, "diagnostics": out_diagnostics},
        out_model=out_model,
        target=config_target(labels, targets),
        backbone_key=_backbone_key(backbone_name, backbone_cfg),
    )
    stage(run, learner=learner)


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
) -> None:
    """Tune the FiLM learners' DP-SGD hyperparameters once per (ε, seed) (App. D.1).

    Tuning set: images of the plan of ``protocol`` (:func:`dpcl.training.tuning_protocol.tuning_plan`:
    the PUBLIC ``tune`` split's first-task classes, or as the paper the private training data's),
    as :func:`dpcl.stages.heads.tune_head_learners` does on features. Epochs and the normaliser
    are the FiLM learners' own (``dpsgd`` overridden by ``film.dpsgd``). One result file per ε tag
    in ``outputs``, with the configs scaled to the runs.
    """
    from ..training.tuning import tune_film
    from ..training.tuning_protocol import tuning_plan, tuning_rows, with_run_configs
    from .data import dataset_subset

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
            device=device,
            log=log_tuning,
            journal=f"{outputs[tag]}.optuna-journal",
        )  # a requeued job resumes its search
        res = with_run_configs(res, plan) | {"seed": sc.seed}
        write_json(outputs[tag], res)
        log_tuning(
            f"best validation accuracy {100 * res['best_validation_accuracy']:.1f} % "
            f"({time.perf_counter() - t0:.1f} s, "
            f"{protocol} protocol, factor {res['plan']['factor_per_task']:.3g})"
        )
