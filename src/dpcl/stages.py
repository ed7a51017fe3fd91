"""The workflow's stages as plain functions (paths in, files out).

Each function is what one Snakemake job runs; ``workflow/scripts/*.py`` only unpack the
``snakemake`` object and call these. Stages: data → features → scenario → label
release → per-task DP training and evaluation → report.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from .config import eps_tag
from .data.datasets import load_dataset, obtain_fashion_mnist, select_per_class
from .data.label_space import evaluation_labels, output_label_spaces, parse_label_method, remap_task_data
from .data.scenarios import Scenario, make_scenario
from .io import read_json, write_json, write_npz
from .learners.cosine import CosineClassifier, cosine_sigma
from .metrics import accuracy_matrix, average_accuracy, average_forgetting
from .privacy.accounting import Budget
from .privacy.ledger import Ledger, split_public
from .seeding import rng


def _log(msg: str) -> None:
    print(f"[dpcl {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --- data -------------------------------------------------------------------------------


def obtain_dataset(name: str, manifest: str | Path, cfg: dict) -> None:
    """Put the raw files of dataset ``name`` beside ``manifest`` (verified), then write the manifest."""
    from .data.datasets import base_name

    dest = Path(manifest).parent
    kind = base_name(name)  # a variant key such as imagenet_r__seed1 is obtained like imagenet_r
    if kind in ("mnist", "svhn", "notmnist", "imagenet_r", "five_datasets"):
        listing = _obtain_paper_dataset(name, kind, dest, cfg)
    elif kind == "fashion_mnist":
        files = obtain_fashion_mnist(dest, source=cfg.get("source", "auto"), local_dir=cfg.get("local_dir"),
                                     verify=cfg.get("verify", True))  # fmt: skip
        listing = {k: Path(v).name for k, v in files.items()}
    elif kind in ("cifar10", "cifar100"):
        from .data.datasets import obtain_cifar

        if cfg.get("source", "auto") == "local" and not cfg.get("local_dir"):
            raise ValueError(
                f"dataset {name}: source 'local' needs local_dir (the folder holding the archive)"
            )
        folder = obtain_cifar(kind, dest, local_dir=cfg.get("local_dir"), verify=cfg.get("verify", True))
        listing = {"folder": folder.name}
    else:
        raise ValueError(f"unknown dataset {name!r}")
    write_json(manifest, {"dataset": name, "files": listing})


def _obtain_paper_dataset(name: str, kind: str, dest: Path, cfg: dict) -> dict:
    """MNIST, SVHN, notMNIST, ImageNet-R and 5-datasets (dpcl.data.sources), config keys applied."""
    from .data import sources

    source, local_dir = cfg.get("source", "auto"), cfg.get("local_dir")
    if source == "local" and not local_dir:
        raise ValueError(f"dataset {name}: source 'local' needs local_dir (the folder holding the files)")
    local_dir = None if source == "download" else local_dir
    kw = {"local_dir": local_dir, "verify": cfg.get("verify", True)}
    if kind == "imagenet_r":
        out = sources.obtain_imagenet_r(dest, split_seed=int(cfg.get("split_seed", 0)),
                                        image_size=int(cfg.get("image_size") or 224), **kw)  # fmt: skip
    else:
        fn = {"mnist": sources.obtain_mnist, "svhn": sources.obtain_svhn, "notmnist": sources.obtain_notmnist,
              "five_datasets": sources.obtain_five_datasets}[kind]  # fmt: skip
        out = fn(dest, **kw)
    return {k: (Path(v).name if isinstance(v, Path) else v) for k, v in out.items()}


def dataset_subset(name: str, root: str | Path, split: str, cfg: dict):
    """The split restricted to its fixed per-class subset, and the original indices.

    ``tune`` is a held-out part of the training split, disjoint from the ``train`` subset
    that runs use, so hyperparameter tuning touches no private task data.
    """
    from .data.sources import check_obtained_options

    check_obtained_options(name, root, cfg)  # e.g. ImageNet-R's split_seed and image_size
    seed = int(cfg.get("subset_seed", 0))
    ds = load_dataset(name, root, "train" if split == "tune" else split)
    if split == "test":
        return ds, select_per_class(ds.labels, cfg.get("test_per_class"), seed)
    pool = np.arange(len(ds.labels))
    holdout = float(cfg.get("holdout_fraction") or 0.0)
    if holdout > 0:  # a fixed public tuning share of every class, set aside before the train subset
        held = holdout_per_class(ds.labels, holdout, seed)
        if split == "tune":
            return ds, held[select_per_class(ds.labels[held], cfg.get("tune_per_class", 300), seed + 1)]
        pool = np.setdiff1d(pool, held)
    train_idx = pool[select_per_class(ds.labels[pool], cfg.get("train_per_class"), seed)]
    if split == "train":
        return ds, train_idx
    rest = np.setdiff1d(np.arange(len(ds.labels)), train_idx)
    if rest.size == 0:
        raise ValueError(f"dataset {name}: no training images left for a tuning split; lower train_per_class")
    return ds, rest[select_per_class(ds.labels[rest], cfg.get("tune_per_class", 300), seed + 1)]


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


# --- features ---------------------------------------------------------------------------


def cache_features(
    dataset: str, root: str | Path, split: str, dataset_cfg: dict, backbone_name: str, backbone_cfg: dict,
    out: str | Path, threads: int | None = None, progress: bool = True,
) -> dict:  # fmt: skip
    """Extract and cache features of one dataset split with one backbone."""
    from .backbones import backbone_from_config
    from .features import extract_features, save_feature_cache

    ds, idx = dataset_subset(dataset, root, split, dataset_cfg)
    model, pre = backbone_from_config(backbone_cfg)
    _log(f"features {dataset}/{backbone_name}/{split}: {len(idx)} images at {pre.image_size}px")
    t0 = time.perf_counter()
    feats = extract_features(model, ds.images[idx], pre, int(backbone_cfg.get("batch_size", 256)),
                             threads=threads, progress=progress, desc=f"{dataset}/{split}")  # fmt: skip
    seconds = time.perf_counter() - t0
    meta = {
        "dataset": dataset, "split": split, "backbone": backbone_name, "arch": backbone_cfg["arch"],
        "weights": backbone_cfg.get("weights"), "image_size": pre.image_size, "mean": pre.mean, "std": pre.std,
        "interpolation": pre.interpolation, "channels_last": pre.channels_last,
        "per_class": dataset_cfg.get({"train": "train_per_class", "test": "test_per_class",
                                      "tune": "tune_per_class"}[split]),  # fmt: skip
        "subset_seed": dataset_cfg.get("subset_seed", 0), "seconds": round(seconds, 2),
    }  # fmt: skip
    _log(f"  {len(idx) / max(seconds, 1e-9):.0f} images/s")
    return save_feature_cache(out, feats, ds.labels[idx], idx, meta)


# --- scenario ---------------------------------------------------------------------------


def build_scenario(dataset: str, root: str | Path, dataset_cfg: dict, kind: str, n_tasks: int, seed: int,
                   out: str | Path, **params: float) -> Scenario:  # fmt: skip
    """Task split over the fixed training subset; indices are original dataset indices."""
    ds, idx = dataset_subset(dataset, root, "train", dataset_cfg)
    sc = make_scenario(kind, ds.labels[idx], n_tasks, seed, **params)
    sc.train_indices = [idx[i] for i in sc.train_indices]
    write_json(out, sc.to_dict())
    return sc


# --- label release ----------------------------------------------------------------------


def release_label_spaces(
    dataset: str, root: str | Path, scenario_path: str | Path, methods: list[str], epsilons: list[float],
    delta: float, seed: int, outputs: dict[tuple[str, str], str],
) -> None:  # fmt: skip
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
                raise ValueError(f"label method {tag!r} needs a class hierarchy; dataset {dataset!r} has none "
                                 "(CIFAR-100 has one: fine → coarse)")  # fmt: skip
            # the noise stream names the data (dataset with variant, scenario): benchmarks over the
            # same data never share label-release noise (DESIGN §4)
            res = output_label_spaces(method, task_labels, n_base, budget, seed, parent=parent,
                                      run_key=("release", dataset, sc.name, eps_tag(eps)))  # fmt: skip
            res.update(seed=seed, scenario=sc.name, epsilon_tag=eps_tag(eps),
                       stream={"dataset": dataset, "scenario": sc.name})  # fmt: skip
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


# --- shared by the learners -------------------------------------------------------------


def _parse_eps(v) -> float:
    return math.inf if v == "inf" else float(v)


NON_PRIVATE = (
    "NOT PRIVATE: research diagnostics computed from the private training data without any DP "
    "mechanism (sample counts, clipped fractions, batch sizes, timings). They are not part of the "
    "release and must never be published with it (DESIGN §4, the release boundary)."
)


def config_target(labels: dict, targets: dict | None) -> Budget:
    """The run's (ε, δ) from the validated config (``targets``: ε tag -> {epsilon, delta}); the
    label file must have been released for the same target. ``None`` (library use without a
    config): the label file's target."""
    stated = Budget(_parse_eps(labels["target"]["epsilon"]), float(labels["target"]["delta"]))
    if targets is None:
        return stated
    tag = labels["epsilon_tag"]
    if tag not in targets:
        raise ValueError(f"label file for ε = {tag} is not a run of the config (ε tags {sorted(targets)})")
    want = Budget(_parse_eps(targets[tag]["epsilon"]), float(targets[tag]["delta"]))
    if not math.isfinite(want.epsilon):
        want = Budget(math.inf, 0.0)
    if stated != want:
        raise ValueError(f"label file states target (ε={stated.epsilon}, δ={stated.delta}), but the config asks "
                         f"(ε={want.epsilon}, δ={want.delta}); rerun its label_spaces job")  # fmt: skip
    return want


def release_rng(labels: dict, backbone: str, learner: str, task: int, mechanism: str) -> np.random.Generator:
    """The noise stream of one mechanism of one run: keyed by what the data is (dataset with
    variant, scenario, backbone) as well as seed, learner, ε, label method, task and mechanism,
    so two benchmarks over the same data never share noise (DESIGN §4)."""
    stream = labels.get("stream")
    if not stream:
        raise ValueError("the label file names no data stream (dataset, scenario); rerun its label_spaces job")
    return rng(int(labels["seed"]), "release", stream["dataset"], stream["scenario"], backbone, learner,
               labels["epsilon_tag"], labels["method"], "task", int(task), mechanism)  # fmt: skip


def _ledger_from_labels(labels: dict, target: Budget | None = None) -> Ledger:
    """A run's ledger (target from the config when given), seeded with the label file's release entries."""
    ledger = Ledger(target or config_target(labels, None), len(labels["tasks"]))
    for e in labels["ledger"]:
        ledger.add(e["task"], {k: (math.inf if v == "inf" else v) for k, v in e.items() if k != "task"})
    return ledger


def _task_rows(train_index: np.ndarray, scenario: Scenario) -> list[np.ndarray]:
    """Feature-cache rows of each task's training samples (checked to exist)."""
    out = []
    for idx in scenario.train_indices:
        rows = np.searchsorted(train_index, idx)
        if np.any(rows >= len(train_index)) or np.any(
            train_index[np.minimum(rows, len(train_index) - 1)] != idx
        ):
            raise ValueError("the scenario references samples missing from the feature cache")
        out.append(rows)
    return out


_NOT_RECORDED = ("labels", "non_private")  # O_t is in the label file; the marker of a raw record


def ledger_and_diagnostics(labels: dict, records, target: Budget | None = None) -> tuple[Ledger, list[dict]]:
    """The verified ledger of a run and its per-task diagnostics.

    ``records[t]`` is task t's raw training record (or a list: DP-A-GEM's train/reference
    parts); each is split at the release boundary (:func:`dpcl.privacy.ledger.split_public`):
    the mechanism's public parameters go to the ledger, everything else (counts, clipped
    fractions, batch sizes, timings) to the diagnostics.
    """
    ledger = _ledger_from_labels(labels, target)
    diagnostics = []
    for t, recs in enumerate(records):
        entries = []
        for rec in recs if isinstance(recs, list) else [recs]:
            public, private = split_public({k: v for k, v in rec.items() if k not in _NOT_RECORDED})
            ledger.add(t, public)
            entries.append({"mechanism": public["mechanism"], **({"part": public["part"]} if "part" in public
                            else {}), **private})  # fmt: skip
        diagnostics.append({"task": t, "entries": entries})
    return ledger, diagnostics


def hyperparameters_note(values: dict | None, tuned: bool) -> dict:
    """privacy.json's account of how the hyperparameters were chosen."""
    if values is None:
        how = "none: no hyperparameters besides the budget (noise from the accountant)"
    elif tuned:
        how = ("Optuna search on the public tuning split (held out of the training data, never trained on "
               "by any run): no private data, no privacy cost")  # fmt: skip
    else:
        how = "fixed in the config before seeing data: no private data, no privacy cost"
    return {"chosen_by": how, "private_data_used": False, **({"values": values} if values is not None else {})}


def finish_run(
    learner: str,
    labels: dict,
    seed: int,
    preds,
    records,
    test_y,
    extra: dict,
    summary: Callable | None = None,
    target: Budget | None = None,
    hyperparameters: dict | None = None,
    diagnostics: dict | None = None,
) -> tuple[dict, dict, dict]:
    """(metrics, verified privacy ledger, non-private diagnostics) of one run from its predictions
    and raw per-task records; ``summary(privacy, ledger.tasks)``, if given, adds a learner's block
    to privacy.json (DP-A-GEM); ``diagnostics`` adds run-level non-private numbers."""
    ledger, per_task = ledger_and_diagnostics(labels, records, target)
    acc = accuracy_matrix(preds, test_y)
    with np.errstate(invalid="ignore"):
        aa, af = average_accuracy(acc), average_forgetting(acc)
    privacy = ledger.to_dict()  # raises PrivacyBudgetExceeded if the target is exceeded
    privacy["hyperparameters"] = hyperparameters or hyperparameters_note(None, False)
    target = ledger.target
    if summary is not None:  # DP-A-GEM: both parts, the buffer's worst case, the per-individual total
        privacy["agem"] = summary(privacy, ledger.tasks)
    metrics = {
        "learner": learner, "label_method": labels["method"], "epsilon": target.epsilon, "delta": target.delta,
        "seed": seed, "acc": acc, "average_accuracy": aa, "average_forgetting": af,
        "final_accuracy": float(np.nanmean(acc[-1])), "final_forgetting": float(af[-1]),
        "released_labels": [len(t["labels"]) for t in labels["tasks"]], **extra,
    }  # fmt: skip
    diag = {"non_private": NON_PRIVATE, "learner": learner, "label_method": labels["method"],
            "epsilon": target.epsilon, "seed": seed, "tasks": per_task, **(diagnostics or {})}  # fmt: skip
    return metrics, privacy, diag


# --- cosine classifier ------------------------------------------------------------------


def run_cosine(
    train: tuple[np.ndarray, np.ndarray, np.ndarray],
    test: tuple[np.ndarray, np.ndarray],
    scenario: Scenario,
    labels: dict,
    seed: int,
    backbone: str = "features",
    target: Budget | None = None,
) -> tuple[dict, dict, dict, dict]:
    """One DP cosine-classifier run through all tasks: (metrics, privacy ledger, model, diagnostics).

    ``train`` = (features, labels, original indices sorted ascending), ``test`` =
    (features, labels), ``labels`` = the label-release file of this (ε, method), ``backbone``
    names the features (part of the noise stream's key), ``target`` the config's (ε, δ).
    """
    train_x, train_y, train_index = train
    test_x, test_y = test
    tb = labels["training_budget"]
    t_eps = _parse_eps(tb["epsilon"])
    sigma = cosine_sigma(t_eps, float(tb["delta"]))
    clf = CosineClassifier(int(labels["label_universe"]), train_x.shape[1])
    test_sets = [np.flatnonzero(np.isin(test_y, cs)) for cs in scenario.task_classes]
    eval_y = evaluation_labels(test_y, labels)  # test labels as the public vocabulary names them
    preds: list[list[np.ndarray]] = []
    records = []
    for t, rows in enumerate(_task_rows(train_index, scenario)):
        o_t = labels["tasks"][t]["labels"]
        keep, y = remap_task_data(train_y[rows], o_t, labels.get("remap"))  # R_t^task(D_t), Eq. 8
        rec = clf.update(train_x[rows[keep]], y, o_t, sigma, release_rng(labels, backbone, "cosine", t, "gaussian"))
        rec.update(epsilon=t_eps, delta=float(tb["delta"]) if math.isfinite(t_eps) else 0.0,
                   data=f"features of R_task(D_{t})", samples=int(keep.sum()), dropped=int((~keep).sum()))  # fmt: skip
        records.append(rec)
        seen = np.concatenate(test_sets[: t + 1])
        pred = clf.predict(test_x[seen])
        bounds = np.cumsum([len(s) for s in test_sets[: t + 1]])[:-1]
        preds.append(np.split(pred, bounds))
    metrics, privacy, diag = finish_run("cosine", labels, seed, preds, records, [eval_y[s] for s in test_sets],
                                        {"sigma": sigma}, target=target)  # fmt: skip
    privacy["sigma"] = sigma
    return metrics, privacy, {"sums": clf.sums, "seen": clf.seen}, diag


def cosine_sweep(
    train_path: str | Path, test_path: str | Path, scenario_path: str | Path,
    runs: list[dict], save_model_max_labels: int = 1000, threads: int | None = None,
    targets: dict | None = None,
) -> None:  # fmt: skip
    """Run every (ε, label method) of one seed; ``runs`` items: {labels, metrics, privacy, diagnostics}.

    ``threads`` caps the BLAS threads (so parallel jobs do not oversubscribe the cores);
    ``targets`` (ε tag -> {epsilon, delta}) are the config's (see :func:`config_target`).
    """
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=threads):
        _cosine_sweep(train_path, test_path, scenario_path, runs, save_model_max_labels, targets)


def _cosine_sweep(train_path, test_path, scenario_path, runs, save_model_max_labels, targets) -> None:
    from .features import load_feature_cache

    tx, ty, tidx, meta = load_feature_cache(train_path)
    ex, ey, _, _ = load_feature_cache(test_path)
    sc = Scenario.from_dict(read_json(scenario_path))
    for run in runs:
        labels = read_json(run["labels"])
        t0 = time.perf_counter()
        metrics, privacy, model, diag = run_cosine((tx, ty, tidx), (ex, ey), sc, labels, int(sc.seed),
                                                   meta["backbone"], config_target(labels, targets))  # fmt: skip
        _log(f"cosine seed {sc.seed} eps {labels['epsilon_tag']} {labels['method']}: "
             f"final acc {100 * metrics['final_accuracy']:.1f} % ({time.perf_counter() - t0:.1f} s)")  # fmt: skip
        write_run(run, metrics, privacy, diag)
        if model["sums"].shape[0] <= save_model_max_labels:
            write_npz(Path(run["metrics"]).with_name("model.npz"), **model)


def write_run(run: dict, metrics: dict, privacy: dict, diagnostics: dict) -> None:
    """A run's files: privacy.json (release), diagnostics.json (non-private), metrics.json last."""
    write_json(run["privacy"], privacy)
    write_json(run.get("diagnostics") or Path(run["privacy"]).with_name("diagnostics.json"), diagnostics)
    write_json(run["metrics"], metrics)


# --- report -----------------------------------------------------------------------------


def _read_records(metrics_paths: list[str | Path]) -> list[dict]:
    """Run metrics with ε as a tag and non-finite values (stored as strings) as floats."""

    def num(v):
        if isinstance(v, list):
            return [num(x) for x in v]
        return float(v) if isinstance(v, str) else v

    records = []
    for p in metrics_paths:
        r = read_json(p)
        r["epsilon"] = eps_tag(math.inf if r["epsilon"] == "inf" else float(r["epsilon"]))
        for key in ("final_accuracy", "final_forgetting", "average_accuracy", "average_forgetting"):
            r[key] = num(r[key])
        records.append(r)
    return records


def build_summary_table(metrics_paths: list[str | Path], benchmark: str, methods: list[str], out_csv: str | Path,
                        out_md: str | Path) -> None:  # fmt: skip
    """One Table A3-style table of every learner of a benchmark (rows ε × learner)."""
    from .io import write_text
    from .report.tables import summarise, table_a3_markdown

    summary = summarise(_read_records(metrics_paths), benchmark)
    write_text(out_csv, summary.to_csv(index=False, float_format="%.4f"))
    write_text(out_md, table_a3_markdown(summary, methods, f"{benchmark}: final accuracy (%)"))


def build_report(
    metrics_paths: list[str | Path], benchmark: str, methods: list[str],
    out_csv: str | Path, out_md: str | Path, figures: list[str | Path],
) -> None:  # fmt: skip
    """Table A3-style CSV + Markdown and the average-accuracy-per-task figure of one benchmark."""
    from .io import write_text
    from .report.figures import plot_average_accuracy
    from .report.tables import summarise, table_a3_markdown

    records = _read_records(metrics_paths)
    summary = summarise(records, benchmark)
    write_text(out_csv, summary.to_csv(index=False, float_format="%.4f"))
    write_text(out_md, table_a3_markdown(summary, methods, f"{benchmark}: final accuracy (%)"))
    plot_average_accuracy(records, methods, f"{benchmark}: average accuracy per task", figures)


def aggregation_figure(metrics_paths: list[str | Path], benchmark: str, methods: list[str],
                       outputs: list[str | Path], learner: str = "peft_head") -> None:  # fmt: skip
    """Fig. A2 for one benchmark: a PEFT ensemble's final accuracy under every aggregation rule."""
    from .report.figures import plot_aggregation_comparison
    from .report.tables import LEARNER_NAMES

    records = _read_records(metrics_paths)
    missing = [r for r in records if "final_accuracy_by_aggregation" not in r]
    if missing:
        raise ValueError(
            f"{len(missing)} PEFT runs lack per-rule accuracies (written since the Entropy rule); rerun them"
        )
    title = f"{benchmark}: {LEARNER_NAMES.get(learner, learner)}, aggregation rules"
    plot_aggregation_comparison(records, methods, title, outputs)


# --- DP-SGD head learners (PEFT ensemble, Naive, Non-CL) ---------------------------------


def run_head_learners(
    train: tuple[np.ndarray, np.ndarray, np.ndarray],
    test: tuple[np.ndarray, np.ndarray],
    scenario: Scenario,
    labels: dict,
    seed: int,
    learners: list[str],
    dpsgd_cfg: dict,
    aggregation: str = "argmax",
    noise_cache: dict | None = None,
    backbone: str = "features",
    target: Budget | None = None,
    tuned: bool = False,
) -> dict[str, tuple[dict, dict, dict]]:
    """Every head learner for one (ε, label method): {learner: (metrics, privacy ledger, diagnostics)}."""
    from .dpsgd import DPSGDConfig
    from .learners.peft import dpsgd_noise, run_head_learner

    train_x, train_y, train_index = train
    test_x, test_y = test
    cfg = DPSGDConfig(**dpsgd_cfg)
    tb = labels["training_budget"]
    noise = dpsgd_noise(_parse_eps(tb["epsilon"]), float(tb["delta"]), cfg, noise_cache)
    spaces = [t["labels"] for t in labels["tasks"]]
    task_data = []
    for rows, o_t in zip(_task_rows(train_index, scenario), spaces, strict=True):
        keep, y = remap_task_data(train_y[rows], o_t, labels.get("remap"))  # R_t^task(D_t), Eq. 8
        task_data.append((train_x[rows[keep]], y))
    eval_y = evaluation_labels(test_y, labels)  # test labels as the public vocabulary names them
    test_sets = [(test_x[m], eval_y[m]) for m in (np.isin(test_y, cs) for cs in scenario.task_classes)]
    out = {}
    for learner in learners:
        by_rule: dict = {}
        preds, records = run_head_learner(
            learner, task_data, test_sets, spaces, int(labels["label_universe"]), cfg, noise,
            lambda t, _l=learner: release_rng(labels, backbone, _l, t, "dpsgd"),
            aggregation, by_rule if learner == "peft_head" else None,
        )  # fmt: skip
        extra = {
            "noise_multiplier": noise["noise_multiplier"],
            "dpsgd": dpsgd_cfg,
            "aggregation": aggregation,
        }
        metrics, privacy, diag = finish_run(learner, labels, seed, preds, records, [y for _, y in test_sets],
                                            extra, target=target,
                                            hyperparameters=hyperparameters_note(dpsgd_cfg, tuned))  # fmt: skip
        if by_rule:  # every aggregation rule on the same members (App. D.2, Fig. A2)
            accs = {rule: accuracy_matrix(p, [y for _, y in test_sets]) for rule, p in by_rule.items()}
            metrics["acc_by_aggregation"] = accs
            metrics["final_accuracy_by_aggregation"] = {
                rule: float(np.nanmean(a[-1])) for rule, a in accs.items()
            }
        out[learner] = (metrics, privacy, diag)
    return out


def _feature_runs(train_path, test_path, scenario_path, runs, dpsgd_cfg, threads, tuned):
    """Yield (run, train, test, scenario, label file, DP-SGD config, noise cache, backbone) for the
    runs of one seed on cached features, with BLAS capped at ``threads``; ``tuned`` maps ε tags to
    tuning results whose DP-SGD config replaces ``dpsgd_cfg``."""
    from threadpoolctl import threadpool_limits

    from .features import load_feature_cache

    with threadpool_limits(limits=threads):
        tx, ty, tidx, meta = load_feature_cache(train_path)
        ex, ey, _, _ = load_feature_cache(test_path)
        sc = Scenario.from_dict(read_json(scenario_path))
        cache: dict = {}
        for run in runs:
            labels = read_json(run["labels"])
            cfg = read_json(tuned[labels["epsilon_tag"]])["dpsgd"] if tuned else dpsgd_cfg
            yield run, (tx, ty, tidx), (ex, ey), sc, labels, cfg, cache, meta["backbone"]


def head_learner_sweep(
    train_path: str | Path, test_path: str | Path, scenario_path: str | Path, runs: list[dict],
    learners: list[str], dpsgd_cfg: dict, aggregation: str = "argmax", threads: int | None = None,
    tuned: dict[str, str] | None = None, targets: dict | None = None,
) -> None:  # fmt: skip
    """All (ε, label method) runs of one seed; ``runs`` items: {labels, outputs: {learner: (metrics,
    privacy[, diagnostics])}}.

    ``tuned`` maps ε tags to tuning results; their DP-SGD config replaces ``dpsgd_cfg``;
    ``targets`` are the config's (ε tag -> {epsilon, delta}).
    """
    for run, train, test, sc, labels, cfg, cache, backbone in _feature_runs(
        train_path, test_path, scenario_path, runs, dpsgd_cfg, threads, tuned
    ):
        t0 = time.perf_counter()
        res = run_head_learners(train, test, sc, labels, int(sc.seed), learners, cfg, aggregation, cache,
                                backbone, config_target(labels, targets), tuned=bool(tuned))  # fmt: skip
        for learner, (metrics, privacy, diag) in res.items():
            paths = run["outputs"][learner]
            write_run({"metrics": paths[0], "privacy": paths[1], "diagnostics": paths[2] if len(paths) > 2
                       else None}, metrics, privacy, diag)  # fmt: skip
        accs = ", ".join(f"{k} {100 * v[0]['final_accuracy']:.1f} %" for k, v in res.items())
        _log(f"heads seed {sc.seed} eps {labels['epsilon_tag']} {labels['method']}: {accs} "
                 f"({time.perf_counter() - t0:.1f} s)")  # fmt: skip


def tune_head_learners(
    tune_path: str | Path, scenario_path: str | Path, epsilons: list[float], delta: float,
    outputs: dict[str, str], n_trials: int, epochs: float, normaliser: float,
) -> None:  # fmt: skip
    """Tune the head learners' DP-SGD hyperparameters once per (ε, seed) on the public
    tuning split, restricted to the classes of the scenario's first task (task-sized)."""
    from .features import load_feature_cache
    from .tuning import tune_head

    x, y, _, _ = load_feature_cache(tune_path)
    sc = Scenario.from_dict(read_json(scenario_path))
    sel = np.isin(y, sc.task_classes[0])
    for eps in epsilons:
        t0 = time.perf_counter()
        res = tune_head(x[sel], y[sel], eps, delta, int(sc.seed), n_trials, epochs, normaliser)
        res["seed"] = sc.seed
        write_json(outputs[eps_tag(eps)], res)
        _log(f"tuned seed {sc.seed} eps {eps_tag(eps)}: validation accuracy "
             f"{100 * res['best_validation_accuracy']:.1f} % ({time.perf_counter() - t0:.1f} s)")  # fmt: skip


def blurry_figure(dataset: str, root: str | Path, dataset_cfg: dict, n_tasks: int, disjoint_pct: float,
                  blurry_pcts: list[float], seed: int, title: str, outputs: list[str | Path]) -> None:  # fmt: skip
    """Fig. 7 right panel for a benchmark's training subset (seed 0 of the sweep)."""
    from .report.figures import plot_blurry_samples

    ds, idx = dataset_subset(dataset, root, "train", dataset_cfg)
    plot_blurry_samples(ds.labels[idx], n_tasks, disjoint_pct, blurry_pcts, seed, title, outputs)


# --- DP-A-GEM baseline (enhanced Desai et al. 2021, App. D.4), head-only ----------------


def run_agem(
    train: tuple[np.ndarray, np.ndarray, np.ndarray],
    test: tuple[np.ndarray, np.ndarray],
    scenario: Scenario,
    labels: dict,
    seed: int,
    dpsgd_cfg: dict,
    agem_cfg: dict,
    noise_cache: dict | None = None,
    backbone: str = "features",
    target: Budget | None = None,
    tuned: bool = False,
) -> tuple[dict, dict, dict]:
    """One DP-A-GEM run for one (ε, label method): (metrics, privacy ledger, diagnostics).

    The ledger holds, per task, the label release (all of D_t), the train part's DP-SGD
    and the reference part's buffer rereads over the later tasks (disjoint parts, in
    parallel); it raises if any individual's total exceeds the target.
    """
    from .dpsgd import DPSGDConfig
    from .learners.agem import AGEMConfig, agem_noise, privacy_summary, run_agem_head

    train_x, train_y, train_index = train
    test_x, test_y = test
    cfg, agem = DPSGDConfig(**dpsgd_cfg), AGEMConfig.from_config(agem_cfg)
    agem.validate()
    tb = labels["training_budget"]
    n_tasks = len(scenario.train_indices)
    eps, delta = _parse_eps(tb["epsilon"]), float(tb["delta"])
    noise, noise_ref = agem_noise(eps, delta, cfg, agem, n_tasks, noise_cache)
    spaces = [t["labels"] for t in labels["tasks"]]
    task_data = []
    for rows, ids, o_t in zip(_task_rows(train_index, scenario), scenario.train_indices, spaces, strict=True):
        keep, y = remap_task_data(train_y[rows], o_t, labels.get("remap"))  # R_t^task(D_t), Eq. 8
        task_data.append((train_x[rows[keep]], y, np.asarray(ids)[keep]))
    eval_y = evaluation_labels(test_y, labels)
    test_sets = [(test_x[m], eval_y[m]) for m in (np.isin(test_y, cs) for cs in scenario.task_classes)]
    preds, records, stats = run_agem_head(
        task_data, test_sets, spaces, int(labels["label_universe"]), cfg, agem, noise, noise_ref,
        lambda t, part: release_rng(labels, backbone, "agem_head", t, part), seed,
    )  # fmt: skip
    extra = {"noise_multiplier": noise["noise_multiplier"],
             "buffer_noise_multiplier": None if noise_ref is None else noise_ref["noise_multiplier"],
             "dpsgd": dpsgd_cfg, "agem": agem_cfg}  # fmt: skip
    return finish_run(
        "agem_head", labels, seed, preds, records, [y for _, y in test_sets], extra,
        lambda p, tasks: privacy_summary(p, tasks, cfg, agem, noise, noise_ref, n_tasks), target=target,
        hyperparameters=hyperparameters_note(dpsgd_cfg, tuned), diagnostics={"agem_tasks": stats},
    )  # fmt: skip


def agem_sweep(
    train_path: str | Path, test_path: str | Path, scenario_path: str | Path, runs: list[dict],
    dpsgd_cfg: dict, agem_cfg: dict, threads: int | None = None, tuned: dict[str, str] | None = None,
    targets: dict | None = None,
) -> None:  # fmt: skip
    """All (ε, label method) DP-A-GEM runs of one seed; ``runs`` items: {labels, metrics, privacy,
    diagnostics}.

    ``tuned`` maps ε tags to the head learners' tuning results: like the paper (App. D.4),
    DP-A-GEM reuses the PEFT method's DP-SGD hyperparameters.
    """
    for run, train, test, sc, labels, cfg, cache, backbone in _feature_runs(
        train_path, test_path, scenario_path, runs, dpsgd_cfg, threads, tuned
    ):
        t0 = time.perf_counter()
        metrics, privacy, diag = run_agem(train, test, sc, labels, int(sc.seed), cfg, agem_cfg, cache, backbone,
                                          config_target(labels, targets), tuned=bool(tuned))  # fmt: skip
        write_run(run, metrics, privacy, diag)
        _log(f"agem_head seed {sc.seed} eps {labels['epsilon_tag']} {labels['method']}: final acc "
                 f"{100 * metrics['final_accuracy']:.1f} % ({time.perf_counter() - t0:.1f} s)")  # fmt: skip


def desai_figure(metrics_paths: list[str | Path], benchmark: str, outputs: list[str | Path]) -> None:
    """Fig. 3 for one benchmark: Cosine Classifier, PEFT Ensemble and DP-A-GEM in the Base Dataset setting."""
    from .report.figures import plot_desai_comparison

    records = _read_records(metrics_paths)
    other = sorted({r["label_method"] for r in records} - {"base"})
    if other:
        raise ValueError(f"Fig. 3 is drawn in the Base Dataset setting (label method 'base'), not {other}")
    plot_desai_comparison(records, f"{benchmark}: comparison with Desai et al. (Base Dataset)", outputs)


def paper_figures(runs: dict[str, list[str | Path]], benchmarks: dict[str, dict],
                  outputs: dict[str, list[str | Path]],
                  task_outputs: dict[str, dict[str, list[str | Path]]] | None = None) -> dict[str, list[str]]:  # fmt: skip
    """Figs. 4-7 (left), A3, A4 and the per-task Figs. A5-A9 of paper 000 (Sec. 6, App. E.1, F)
    from the run metrics of every benchmark; returns (and logs) per figure the notes on what the
    config does not sweep.

    ``runs`` maps a benchmark to its metrics.json paths (any learners; Figs. 4-7 and A3 keep the
    Cosine Classifier and PEFT Ensemble), ``benchmarks`` is the config's ``benchmarks`` entry,
    ``outputs`` maps 'fig4' … 'fig7' and optionally 'figA3', 'figA4' to their PNG/PDF paths,
    ``task_outputs`` maps a benchmark to {'accuracy': paths, 'forgetting': paths} (Figs. A5-A9).
    Figs. 4-6 use the disjoint-split benchmarks (Sec. 6.1), Figs. 7 and A3 the i-Blurry ones
    (Sec. 6.2), Fig. A4 the disjoint and 5-dataset ones (App. F).
    """
    from .report.paper_figures import (
        FIG_LEARNERS,
        blurry_groups,
        plot_fig4_label_methods,
        plot_fig5_release_fraction,
        plot_fig6_public_labels,
        plot_fig7_blurriness,
        plot_figA3_blurriness,
        plot_figA4_privacy_utility,
        plot_task_metric,
    )

    task_outputs = task_outputs or {}
    unknown = sorted((set(runs) | set(task_outputs)) - set(benchmarks))
    if unknown:
        raise ValueError(
            f"runs given for benchmarks {unknown} that are not in the config; allowed: {sorted(benchmarks)}"
        )
    all_records = {b: _read_records(paths) for b, paths in runs.items()}
    records = {b: [r for r in recs if r["learner"] in FIG_LEARNERS] for b, recs in all_records.items()}
    disjoint = {b: records.get(b, []) for b, cfg in benchmarks.items() if cfg["scenario"] == "disjoint"}
    groups = {
        g: {m: records.get(b, []) for m, b in by_m.items()} for g, by_m in blurry_groups(benchmarks).items()
    }
    notes = {
        "fig4": plot_fig4_label_methods(disjoint, outputs["fig4"]),
        "fig5": plot_fig5_release_fraction(disjoint, outputs["fig5"]),
        "fig6": plot_fig6_public_labels(disjoint, outputs["fig6"]),
        "fig7": plot_fig7_blurriness(groups, outputs["fig7"]),
    }
    if "figA3" in outputs:
        notes["figA3"] = plot_figA3_blurriness(groups, outputs["figA3"])
    if "figA4" in outputs:
        shifted = {
            b: all_records.get(b, [])
            for b, c in benchmarks.items()
            if c["scenario"] in ("disjoint", "datasets")
        }
        notes["figA4"] = plot_figA4_privacy_utility(shifted, benchmarks, outputs["figA4"])
    for bench, outs in task_outputs.items():
        for metric, paths in outs.items():
            notes[f"{bench}_{metric}_per_task"] = plot_task_metric(
                all_records.get(bench, []), metric, bench, benchmarks[bench], paths
            )
    for fig, lines in notes.items():
        for line in lines:
            _log(f"{fig}: {line}")
    return notes


def html_report(files: list[str | Path], config: dict, out: str | Path) -> None:
    """results/report.html: every table and figure of the run, grouped per benchmark, with the
    config entries behind each section and the full validated config (one self-contained page)."""
    from .report.html import build_html_report, group_files

    build_html_report(group_files(files, config), config, out, title="dpcl: differentially private continual "
                      "learning, tables and figures")  # fmt: skip


def build_paper_tables(
    metrics_paths: dict[str, list[str | Path]], benchmarks: dict[str, dict], out_dir: str | Path
) -> list[Path]:
    """Paper 000 Tables A3-A10 (App. E.2, F.2-F.4) from every run of every benchmark, beside the
    published numbers: ``out_dir/table_<ID>.{csv,md,tex}``; ``metrics_paths``: benchmark -> its metrics.json."""
    from .report import paper_tables

    records = {name: _read_records(paths) for name, paths in metrics_paths.items()}
    written = paper_tables.write_paper_tables(paper_tables.build_paper_tables(records, benchmarks), out_dir)
    _log(f"paper tables: wrote {len(written)} files to {out_dir}")
    return written
