"""What every learner stage shares: the config's run targets, noise streams keyed by the data, the
verified ledger and the non-private diagnostics (the release boundary), run files."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..config import eps_tag
from ..data.label_space import evaluation_labels, remap_task_data
from ..data.scenarios import Scenario
from ..io import read_json, write_json
from ..metrics import accuracy_matrix, average_accuracy, average_forgetting, worst_case_forgetting
from ..privacy.accounting import Budget
from ..privacy.ledger import Ledger, split_public
from ..seeding import rng
from ..training.tuning_protocol import hyperparameters_note  # noqa: F401 (the stages' import)


def parse_eps(v) -> float:
    return math.inf if v == "inf" else float(v)


NON_PRIVATE = (
    "NOT PRIVATE: research diagnostics computed from the private training data without any DP "
    "mechanism (sample counts, clipped fractions, batch sizes, timings). They are not part of the "
    "release and must never be published with it (the release boundary)."
)


def config_target(labels: dict, targets: dict | None) -> Budget:
    """The run's (ε, δ) from the validated config (``targets``: ε tag -> {epsilon, delta}); the
    label file must have been released for the same target. ``None`` (library use without a
    config): the label file's target."""
    stated = Budget(parse_eps(labels["target"]["epsilon"]), float(labels["target"]["delta"]))
    if targets is None:
        return stated
    tag = labels["epsilon_tag"]
    if tag not in targets:
        raise ValueError(f"label file for ε = {tag} is not a run of the config (ε tags {sorted(targets)})")
    want = Budget(parse_eps(targets[tag]["epsilon"]), float(targets[tag]["delta"]))
    if not math.isfinite(want.epsilon):
        want = Budget(math.inf, 0.0)
    if stated != want:
        raise ValueError(
            f"label file states target (ε={stated.epsilon}, δ={stated.delta}), but the config asks "
            f"(ε={want.epsilon}, δ={want.delta}); rerun its label_spaces job"
        )
    return want


def release_rng(labels: dict, backbone: str, learner: str, task: int, mechanism: str) -> np.random.Generator:
    """The noise stream of one mechanism of one run: keyed by what the data is (dataset with
    variant, scenario, backbone) as well as seed, learner, ε, label method, task and mechanism,
    so two benchmarks over the same data never share noise."""
    stream = labels.get("stream")
    if not stream:
        raise ValueError(
            "the label file names no data stream (dataset, scenario); rerun its label_spaces job"
        )
    return rng(
        int(labels["seed"]),
        "release",
        stream["dataset"],
        stream["scenario"],
        backbone,
        learner,
        labels["epsilon_tag"],
        labels["method"],
        "task",
        int(task),
        mechanism,
    )


def ledger_from_labels(labels: dict, target: Budget | None = None) -> Ledger:
    """A run's ledger (target from the config when given), seeded with the label file's release entries."""
    ledger = Ledger(target or config_target(labels, None), len(labels["tasks"]))
    for e in labels["ledger"]:
        ledger.add(e["task"], {k: v for k, v in e.items() if k != "task"})  # Ledger.add reads "inf"
    return ledger


def task_rows(train_index: np.ndarray, scenario: Scenario) -> list[np.ndarray]:
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


def ledger_and_diagnostics(
    labels: dict, records, target: Budget | None = None, claim: dict | None = None
) -> tuple[Ledger, list[dict]]:
    """The verified ledger of a run and its per-task diagnostics.

    ``records[t]`` is task t's raw training record (or a list: DP-A-GEM's train/reference
    parts); each is split at the release boundary (:func:`dpcl.privacy.ledger.split_public`):
    the mechanism's public parameters go to the ledger, everything else (counts, clipped
    fractions, batch sizes, timings) to the diagnostics.
    """
    ledger = ledger_from_labels(labels, target)
    ledger.claim = claim  # a published method's own claim, shown beside the accounted composition
    diagnostics = []
    for t, recs in enumerate(records):
        entries = []
        for rec in recs if isinstance(recs, list) else [recs]:
            public, private = split_public({k: v for k, v in rec.items() if k not in _NOT_RECORDED})
            ledger.add(t, public)
            entries.append(
                {
                    "mechanism": public["mechanism"],
                    **({"part": public["part"]} if "part" in public else {}),
                    **private,
                }
            )
        diagnostics.append({"task": t, "entries": entries})
    return ledger, diagnostics


def resolve_dpsgd(
    dpsgd_cfg: dict, tuned_path: str | Path | None, epsilon_tag: str, learner: str
) -> tuple[dict, str | None]:
    """(DP-SGD config, tuning protocol or None) of ``learner``'s run at ``epsilon_tag``: the tuning
    result's config for that learner, scaled to its training set (App. D.1), over ``dpsgd_cfg`` when
    ``tuned_path`` is given, else ``dpsgd_cfg`` as is."""
    from ..training.tuning_protocol import run_dpsgd

    if tuned_path is None:
        return dict(dpsgd_cfg), None
    res = read_json(tuned_path)
    if "best" not in res or "epsilon" not in res:
        raise ValueError(f"{tuned_path} is not a tuning result (no 'best'/'epsilon' keys)")
    tag = eps_tag(math.inf if res["epsilon"] == "inf" else float(res["epsilon"]))
    if tag != epsilon_tag:
        raise ValueError(f"{tuned_path} was tuned for ε = {tag}, but the run's budget is ε = {epsilon_tag}")
    from ..training.heads import CHOSEN_WITH_PRIVATE_DATA

    # a tuned run's values are the study's: the fixed block's statement of how it was chosen does not apply
    fixed = {k: v for k, v in dpsgd_cfg.items() if k != CHOSEN_WITH_PRIVATE_DATA}
    from ..learners import registry

    return {**fixed, **run_dpsgd(res, registry.get(learner).trains_on, str(tuned_path))}, res["protocol"]


def finish_run(
    learner: str,
    labels: dict,
    seed: int,
    preds,
    records,
    test_y,
    *,
    extra: dict,
    summary: Callable | None = None,
    target: Budget | None = None,
    hyperparameters: dict | None = None,
    diagnostics: dict | None = None,
    claim: dict | None = None,
) -> tuple[dict, dict, dict]:
    """(metrics, verified privacy ledger, non-private diagnostics) of one run from its predictions
    and raw per-task records; ``summary(privacy, ledger.tasks)``, if given, adds a learner's block
    to privacy.json (DP-A-GEM); ``diagnostics`` adds run-level non-private numbers."""
    from ..training.tuning_protocol import unaccounted_uses

    hyperparameters = hyperparameters or hyperparameters_note(None, None)
    ledger, per_task = ledger_and_diagnostics(labels, records, target, claim)
    ledger.unaccounted = unaccounted_uses(hyperparameters)  # the paper's tuning on private data
    acc = accuracy_matrix(preds, test_y)
    with np.errstate(invalid="ignore"):
        aa, af, wf = average_accuracy(acc), average_forgetting(acc), worst_case_forgetting(acc)
    privacy = ledger.to_dict()  # raises PrivacyBudgetExceeded if the target is exceeded
    privacy["hyperparameters"] = hyperparameters
    target = ledger.target
    if summary is not None:  # DP-A-GEM: both parts, the buffer's worst case, the per-individual total
        privacy["agem"] = summary(privacy, ledger.tasks)
    verify_written(privacy, learner, labels["method"], target)
    metrics = {
        "learner": learner,
        "label_method": labels["method"],
        "epsilon": target.epsilon,
        "delta": target.delta,
        "seed": seed,
        "acc": acc,
        "average_accuracy": aa,
        "average_forgetting": af,
        "final_accuracy": float(np.nanmean(acc[-1])),
        "final_forgetting": float(af[-1]),
        "worst_case_forgetting": wf,
        "final_worst_case_forgetting": float(wf[-1]),
        "released_labels": [len(t["labels"]) for t in labels["tasks"]],
        **extra,
    }
    diag = {
        "non_private": NON_PRIVATE,
        "learner": learner,
        "label_method": labels["method"],
        "epsilon": target.epsilon,
        "seed": seed,
        "tasks": per_task,
        **(diagnostics or {}),
    }
    return metrics, privacy, diag


def verify_written(privacy: dict, learner: str, label_method: str, target: Budget) -> None:
    """Check a run's privacy.json against its public plan before it is written: the learner's declared
    entries (:func:`dpcl.learners.ledger_spec`), the label method's mechanism, every stated figure
    (:func:`dpcl.privacy.verify.verify_task_ledger`); raises naming the field."""
    from ..learners import ledger_spec
    from ..privacy.verify import Plan, verify_task_ledger

    plan = Plan(
        target=target,
        n_tasks=len(privacy["tasks"]),
        spec=ledger_spec(learner),
        label_method=label_method,
    )
    verify_task_ledger(privacy, plan)


def ledger_plan(config: dict, path: str | Path):
    """The public plan of the run whose privacy.json is at ``path`` (results layout
    ``runs/{learner}/{dataset}/{backbone}/{scenario}-t{T}/seed{s}/eps{tag}/{label_method}/privacy.json``):
    target, task count, learner declaration, label method and nominal size from the validated
    ``config``; the file itself is not read. A path the config did not plan is an error."""
    from ..config import run_targets
    from ..learners import ledger_spec
    from ..privacy.verify import Plan
    from ..training.tuning_protocol import nominal_train_size

    parts = Path(path).parts
    if len(parts) < 9 or parts[-9] != "runs" or parts[-1] != "privacy.json":
        raise ValueError(
            f"{path}: not a run's privacy.json in the results layout "
            "runs/{learner}/{dataset}/{backbone}/{scenario}-t{T}/seed{s}/eps{tag}/{label_method}/privacy.json"
        )
    learner, dataset, backbone, scen, _seed, eps, method = parts[-8:-1]
    scenario, _, n_tasks = scen.rpartition("-t")
    planned = [
        b
        for b in config["benchmarks"].values()
        if (b["dataset"], b["backbone"], b["scenario"], str(b["n_tasks"]))
        == (dataset, backbone, scenario, n_tasks)
    ]
    if not planned:
        raise ValueError(f"{path}: the config plans no benchmark {dataset}/{backbone}/{scen}")
    if learner not in config["learners"]:
        raise ValueError(f"{path}: learner {learner!r} is not in the config's learners")
    targets = run_targets(config["epsilons"], config["delta"])
    tag = eps.removeprefix("eps")
    if tag not in targets:
        raise ValueError(f"{path}: ε tag {tag!r} is not a run of the config (ε tags {sorted(targets)})")
    want = Budget(parse_eps(targets[tag]["epsilon"]), float(targets[tag]["delta"]))
    if not math.isfinite(want.epsilon):
        want = Budget(math.inf, 0.0)
    return Plan(
        target=want,
        n_tasks=int(n_tasks),
        spec=ledger_spec(learner),
        label_method=method,
        nominal_size=nominal_train_size(dataset, config["datasets"][dataset]),
    )


def write_run(
    run: dict, metrics: dict, privacy: dict, diagnostics: dict, *, device: dict | None = None
) -> None:
    """A run's files: privacy.json (release), diagnostics.json (non-private), metrics.json last; the
    release and the metrics record what produced them (dpcl version, commit, library hash, package
    versions and, for a run that computed with torch, its ``device``: :func:`dpcl.provenance.provenance`)."""
    from ..provenance import provenance

    write_json(run["privacy"], privacy | {"provenance": provenance(device)})
    write_json(run.get("diagnostics") or Path(run["privacy"]).with_name("diagnostics.json"), diagnostics)
    write_json(run["metrics"], metrics | {"provenance": provenance(device)})


def feature_runs(train_path, test_path, scenario_path, runs, threads, tuned):
    """Yield (run, train, test, scenario, label file, tuning result path or None, noise cache,
    backbone) for the runs of one seed on cached features, with BLAS capped at ``threads``;
    ``tuned`` maps ε tags to tuning results (:func:`resolve_dpsgd` reads one per learner)."""
    from threadpoolctl import threadpool_limits

    from ..features import load_feature_cache

    with threadpool_limits(limits=threads):
        tx, ty, tidx, meta = load_feature_cache(train_path)
        ex, ey, _, _ = load_feature_cache(test_path)
        sc = Scenario.from_dict(read_json(scenario_path))
        cache: dict = {}
        for run in runs:
            labels = read_json(run["labels"])
            tuned_path = tuned[labels["epsilon_tag"]] if tuned else None
            yield run, (tx, ty, tidx), (ex, ey), sc, labels, tuned_path, cache, meta["backbone"]


def read_records(metrics_paths: list[str | Path]) -> list[dict]:
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


def task_inputs(
    train: tuple[np.ndarray, np.ndarray, np.ndarray],
    test: tuple[np.ndarray, np.ndarray],
    scenario: Scenario,
    labels: dict,
    with_ids: bool = False,
) -> tuple[list[list[int]], list[tuple], list[tuple[np.ndarray, np.ndarray]]]:
    """(label spaces O_t, per-task training data R_t^task(D_t) as (features, labels[, sample ids]), per-task
    test sets (features, labels as the public vocabulary names them)) of one run on cached features."""
    train_x, train_y, train_index = train
    test_x, test_y = test
    spaces = [t["labels"] for t in labels["tasks"]]
    task_data: list[tuple] = []
    for rows, ids, o_t in zip(task_rows(train_index, scenario), scenario.train_indices, spaces, strict=True):
        keep, y = remap_task_data(train_y[rows], o_t, labels.get("remap"))  # R_t^task(D_t), Eq. 8
        task_data.append(
            (train_x[rows[keep]], y, np.asarray(ids)[keep]) if with_ids else (train_x[rows[keep]], y)
        )
    eval_y = evaluation_labels(test_y, labels)  # test labels as the public vocabulary names them
    test_sets = [(test_x[m], eval_y[m]) for m in (np.isin(test_y, cs) for cs in scenario.task_classes)]
    if scenario.feature_permutation:  # domain-incremental: task t's data through its public permutation
        from ..data.scenarios import feature_permutation

        perms = [feature_permutation(int(scenario.seed), t, train_x.shape[1]) for t in range(len(task_data))]
        task_data = [(d[0][:, p], *d[1:]) for d, p in zip(task_data, perms, strict=True)]
        test_sets = [(x[:, p], y) for (x, y), p in zip(test_sets, perms, strict=True)]
    return spaces, task_data, test_sets


def runs_by_learner(
    labels: list,
    metrics: list,
    privacy: list,
    diagnostics: list,
    learners: list[str],
    requested: list[list[str]] | None = None,
) -> list[dict]:
    """Sweep ``runs`` from a rule's outputs, which follow expand(learner, eps, method): learner-major,
    then (eps, method) in the order of the label files. ``requested[r]`` (default: every learner)
    lists the learners that run on label file r; the outputs then hold, learner-major, only those
    (learner, label file) pairs, and each run's ``outputs`` only its learners."""
    n = len(labels)
    if requested is None:
        requested = [list(learners)] * n
    if len(requested) != n:
        raise ValueError(f"{len(requested)} learner lists for {n} label files")
    unknown = sorted({lr for r in requested for lr in r} - set(learners))
    if unknown:
        raise ValueError(f"learners {unknown} requested but not among {list(learners)}")
    order = [(learner, r) for learner in learners for r in range(n) if learner in requested[r]]
    if not len(metrics) == len(privacy) == len(diagnostics) == len(order):
        raise ValueError(
            f"{len(metrics)} outputs for {len(order)} (learner, label file) runs "
            f"({n} label files x {len(learners)} learners, as requested)"
        )
    runs = [{"labels": lab, "outputs": {}} for lab in labels]
    for i, (learner, r) in enumerate(order):
        runs[r]["outputs"][learner] = (metrics[i], privacy[i], diagnostics[i])
    return runs
