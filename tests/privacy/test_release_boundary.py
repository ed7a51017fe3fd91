"""The release boundary: a run's release is its released outputs plus privacy.json,
and nothing in them depends on the private data except through an accounted mechanism.

Neighbour invariance, for every learner: the same seed on a data set D, on D plus one
individual and on D minus one individual, through the real stages (Fashion-MNIST idx files,
features from a tiny ViT, scenario, label release, training, evaluation), must give a
byte-identical privacy.json and identical metrics apart from what is evaluated on the test
set or released through a mechanism. The per-run diagnostics (marked non-private) are where
the counts go, and they do differ.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from dpcl.config import run_targets
from dpcl.data.datasets import FASHION_MNIST_FILES, write_idx
from dpcl.io import read_json
from dpcl.learners import registry

pytestmark = pytest.mark.slow

EPS = [1.0, math.inf]
METHODS = ["oracle", "base", "release-f0.1"]
HEADS = ["peft_head", "naive_head", "noncl_head"]
MEMORY = [
    "agem_head",
    "desai_head",
]  # the memory-buffer baselines (enhanced DP-A-GEM; [Desai2021] as published)
FUNCTIONAL = [
    "l2dpml",
    "fm_agem",
]  # L2DP-ML as published ([Lai2022]) and the sound functional-mechanism variant
FILM_BASELINES = ["naive_film", "noncl_film", "agem_film"]
FILM_RUN = (
    "1",
    "base",
)  # FiLM learners: one private run each (ε tag, label method) that trains on every class
DPSGD = {"sample_rate": 0.5, "epochs": 2.0, "lr": 0.01, "clip": 1.0, "normaliser": 16.0}
FILM_DPSGD = {**DPSGD, "epochs": 1.0}
BACKBONE = {"arch": "vit_tiny_patch16_224", "weights": "random", "image_size": 32, "batch_size": 64}
#: FiLM on a BatchNorm backbone (the embedded one's architecture; its BatchNorms frozen by the stage)
BACKBONE_BN = {"arch": "tf_efficientnet_lite0", "weights": "random", "image_size": 32, "batch_size": 64}
FILM_BN = ["peft_film_lite0", "naive_film_lite0", "agem_film_lite0"]  # those learners on BACKBONE_BN
#: metrics that are evaluated on the (non-private) test set or are a released output (|O_t|)
EVALUATED = {
    "acc",
    "average_accuracy",
    "average_forgetting",
    "final_accuracy",
    "final_forgetting",
    "worst_case_forgetting",
    "final_worst_case_forgetting",
    "acc_by_aggregation",
    "final_accuracy_by_aggregation",
    "released_labels",
}


def _images(labels: np.ndarray, gen: np.random.Generator) -> np.ndarray:
    protos = np.random.default_rng(123).uniform(0, 255, size=(10, 7, 7))
    base = np.kron(protos[labels], np.ones((4, 4)))
    return np.clip(base + gen.normal(0, 40, base.shape), 0, 255).astype(np.uint8)


def _write_fmnist(root, x, y, xt, yt) -> None:
    root.mkdir(parents=True)
    for key, arr in (("train_images", x), ("train_labels", y), ("test_images", xt), ("test_labels", yt)):
        write_idx(root / FASHION_MNIST_FILES[key].name, arr)


def _neighbours(tmp):
    """D, D + one individual (appended: everyone else keeps their id) and D − the last one."""
    gen = np.random.default_rng(0)
    y = np.repeat(np.arange(10), 10).astype(np.uint8)
    gen.shuffle(y)
    x = _images(y, gen)
    yt = np.repeat(np.arange(10), 4).astype(np.uint8)
    xt = _images(yt, gen)
    extra_y = np.array([3], np.uint8)
    extra_x = _images(extra_y, gen)
    sets = {
        "D": (x, y),
        "D+1": (np.concatenate([x, extra_x]), np.concatenate([y, extra_y])),
        "D-1": (x[:-1], y[:-1]),
    }
    for name, (a, b) in sets.items():
        _write_fmnist(tmp / name / "raw", a, b, xt, yt)
    return list(sets)


def _run_everything(work):
    """Every learner's stage on one data set, as the workflow runs them; returns the run folder."""
    from dpcl.stages.agem import agem_sweep
    from dpcl.stages.features import cache_features
    from dpcl.stages.film import film_run_stage
    from dpcl.stages.heads import head_learner_sweep
    from dpcl.stages.labels import release_label_spaces
    from dpcl.stages.learner import RunFiles, SeedJob, learner_sweep
    from dpcl.stages.projected import projected_sweep
    from dpcl.stages.prototypes import prototypes_sweep
    from dpcl.stages.scenarios import build_scenario

    raw, res = work / "raw", work / "results"
    dcfg = {"subset_seed": 0}
    for split in ("train", "test"):
        cache_features(
            "fashion_mnist", raw, split, dcfg, "vit", BACKBONE, out=res / f"{split}.npz", progress=False
        )
    sc = res / "scenario.json"
    build_scenario("fashion_mnist", raw, dcfg, "disjoint", 2, 0, out=sc)
    runs = res / "runs"
    pairs = [(("inf" if math.isinf(e) else f"{e:g}"), m) for e in EPS for m in METHODS]
    labels = {p: str(res / "labels" / f"eps{p[0]}" / f"{p[1]}.json") for p in pairs}
    release_label_spaces("fashion_mnist", raw, sc, METHODS, EPS, 1e-5, seed=0, outputs=labels)
    targets = run_targets(EPS, 1e-5)

    def out(learner, p, kind):
        return str(runs / learner / f"eps{p[0]}" / p[1] / f"{kind}.json")

    prototypes_sweep(
        res / "train.npz",
        res / "test.npz",
        sc,
        [
            {
                "labels": labels[p],
                "metrics": out("cosine", p, "metrics"),
                "privacy": out("cosine", p, "privacy"),
                "diagnostics": out("cosine", p, "diagnostics"),
            }
            for p in pairs
        ],
        learners=["cosine"],
        targets=targets,
    )
    head_learner_sweep(
        res / "train.npz",
        res / "test.npz",
        sc,
        [
            {
                "labels": labels[p],
                "outputs": {
                    lr: tuple(out(lr, p, k) for k in ("metrics", "privacy", "diagnostics")) for lr in HEADS
                },
            }
            for p in pairs
        ],
        HEADS,
        DPSGD,
        targets=targets,
    )
    agem_sweep(
        res / "train.npz",
        res / "test.npz",
        sc,
        [
            {
                "labels": labels[p],
                "outputs": {
                    lr: tuple(out(lr, p, k) for k in ("metrics", "privacy", "diagnostics")) for lr in MEMORY
                },
            }
            for p in pairs
        ],
        dpsgd_cfg=DPSGD,
        agem_cfg={"buffer_fraction": 0.3},
        targets=targets,
        learners=MEMORY,
    )
    # the PCA of l2dpml/fm_agem is fitted on public features: here the (identical) test split's
    projected_sweep(
        res / "train.npz",
        res / "test.npz",
        res / "test.npz",
        sc,
        [
            {
                "labels": labels[p],
                "outputs": {
                    lr: tuple(out(lr, p, k) for k in ("metrics", "privacy", "diagnostics"))
                    for lr in FUNCTIONAL
                },
            }
            for p in pairs
        ],
        FUNCTIONAL,
        blocks={
            "l2dpml": {"input_dim": 8, "hidden": 8, "batch_size": 8, "epochs": 2},
            "fm_agem": {
                "dim": 8,
                "lr": 0.4,
                "steps": 4,
            },  # not its defaults, which were chosen with private data
        },
        targets=targets,
    )
    lab = labels[FILM_RUN]
    common = ("fashion_mnist", raw, dcfg)
    run = {
        "scenario_path": sc,
        "labels_path": lab,
        "dpsgd_cfg": FILM_DPSGD,
        "physical_batch": 16,
        "device": "cpu",
    }
    for backbone, name, learners, suffix in (
        (BACKBONE, "vit", ("peft_film", *FILM_BASELINES), ""),
        (BACKBONE_BN, "lite0", ("peft_film", "naive_film", "agem_film"), "_lite0"),
    ):
        for learner in learners:
            folder = f"{learner}{suffix}"
            film_run_stage(
                learner,
                *common,
                backbone,
                **run,
                out_metrics=out(folder, FILM_RUN, "metrics"),
                out_privacy=out(folder, FILM_RUN, "privacy"),
                out_diagnostics=out(folder, FILM_RUN, "diagnostics"),
                **(
                    {"out_members": runs / folder / "members"}
                    if learner == "peft_film"
                    else {"out_model": out(folder, FILM_RUN, "model").replace(".json", ".npz")}
                ),
                agem_cfg={"buffer_fraction": 0.3},
                targets=targets,
                backbone_name=name,
            )
    # a learner that brings its own run function: the documented example (docs/examples/my_learner.py)
    learner_sweep(
        SeedJob(
            learner=EXAMPLE,
            train=res / "train.npz",
            test=res / "test.npz",
            scenario=sc,
            runs=tuple(
                RunFiles(
                    labels=labels[p],
                    metrics=out(EXAMPLE, p, "metrics"),
                    privacy=out(EXAMPLE, p, "privacy"),
                    diagnostics=out(EXAMPLE, p, "diagnostics"),
                )
                for p in pairs
            ),
            targets=targets,
            modules=(str(EXAMPLE_MODULE),),
        )
    )
    return runs


@pytest.fixture(scope="module")
def neighbour_runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("neighbours")
    return {name: _run_everything(tmp / name) for name in _neighbours(tmp)}


#: the documented example of a user's own learner (registered from its file by the stage)
EXAMPLE, EXAMPLE_MODULE = (
    "my_sums",
    Path(__file__).resolve().parents[2] / "docs" / "examples" / "my_learner.py",
)
#: every registered learner, the example and the FiLM learners on a BatchNorm backbone
BUILT_IN = [n for n in registry.names() if registry.get(n).module in registry.MODULES]
LEARNERS = [*BUILT_IN, EXAMPLE, *FILM_BN]


def test_every_registered_learner_is_run_here():
    ran = {"cosine", *HEADS, *MEMORY, *FUNCTIONAL, "peft_film", *FILM_BASELINES}
    assert set(BUILT_IN) <= ran, f"add {sorted(set(BUILT_IN) - ran)} to _run_everything"


def _run_dirs(runs, learner):
    return sorted(p.parent.relative_to(runs) for p in (runs / learner).rglob("privacy.json"))


@pytest.mark.parametrize("learner", LEARNERS)
def test_privacy_json_is_byte_identical_on_neighbouring_data(neighbour_runs, learner):
    d = neighbour_runs["D"]
    dirs = _run_dirs(d, learner)
    film = learner in FILM_BN or (learner in registry.names() and registry.get(learner).adapter == "film")
    assert len(dirs) == (1 if film else len(EPS) * len(METHODS))
    for name in ("D+1", "D-1"):
        other = neighbour_runs[name]
        assert _run_dirs(other, learner) == dirs
        for run in dirs:
            a, b = (r / run / "privacy.json" for r in (d, other))
            assert a.read_bytes() == b.read_bytes(), (
                f"{learner} {run}: privacy.json depends on the data ({name})"
            )


@pytest.mark.parametrize("learner", LEARNERS)
def test_metrics_differ_only_in_evaluated_fields_and_counts_live_in_diagnostics(neighbour_runs, learner):
    d, plus = neighbour_runs["D"], neighbour_runs["D+1"]
    diag_differs = False
    for run in _run_dirs(d, learner):
        ma, mb = (read_json(r / run / "metrics.json") for r in (d, plus))
        assert set(ma) == set(mb)
        for key in set(ma) - EVALUATED:
            assert ma[key] == mb[key], f"{learner} {run}: metrics key {key!r} depends on the data"
        da, db = ((r / run / "diagnostics.json").read_text() for r in (d, plus))
        assert next(iter(json.loads(da))) == "non_private" and "NOT PRIVATE" in json.loads(da)["non_private"]
        diag_differs |= da != db
    assert diag_differs, (
        f"{learner}: the extra individual changed no diagnostic count: is it in the data at all?"
    )


def _keys_and_strings(obj, keys, strings):
    if isinstance(obj, dict):
        for k, v in obj.items():
            keys.add(k)
            _keys_and_strings(v, keys, strings)
    elif isinstance(obj, list):
        for v in obj:
            _keys_and_strings(v, keys, strings)
    elif isinstance(obj, str):
        strings.append(obj)


def test_no_count_or_statistic_reaches_a_release_file(neighbour_runs):
    import re

    banned = {
        "kept",
        "dropped",
        "samples",
        "mean_clipped_fraction",
        "mean_batch_size",
        "mean_buffer_batch_size",
        "train_samples",
        "buffer_samples_before",
        "seconds",
        "noised_labels",
        "projected_fraction",
        "tasks_detail",
        "agem_tasks",
    }
    count_phrase = re.compile(r"\d+\s+(kept|dropped|samples|images)")
    for runs in neighbour_runs.values():
        for path in [*runs.rglob("privacy.json"), *runs.rglob("metrics.json")]:
            keys, strings = set(), []
            _keys_and_strings(read_json(path), keys, strings)
            assert not keys & banned, f"{path}: {sorted(keys & banned)}"
            assert not [s for s in strings if count_phrase.search(s)], path


def test_model_files_have_the_same_shape_on_neighbouring_data(neighbour_runs):
    d, plus = neighbour_runs["D"], neighbour_runs["D+1"]
    models = sorted(p.relative_to(d) for p in d.rglob("*.npz"))
    assert len(models) >= 3
    for rel in models:
        with np.load(d / rel) as a, np.load(plus / rel) as b:
            assert sorted(a.files) == sorted(b.files)
            assert all(a[k].shape == b[k].shape for k in a.files)


def test_ledgers_of_every_learner_verify_from_their_parameters(neighbour_runs):
    from dpcl.privacy.accounting import Budget
    from dpcl.privacy.verify import Plan, verify_privacy

    runs = neighbour_runs["D"]
    for path in runs.rglob("privacy.json"):
        p = read_json(path)
        eps = math.inf if p["target"]["epsilon"] == "inf" else float(p["target"]["epsilon"])
        target = Budget(eps, 0.0 if math.isinf(eps) else 1e-5)
        learner = (
            path.relative_to(runs).parts[0].removesuffix("_lite0")
        )  # FILM_BN: the learner on BACKBONE_BN
        # against the learner's declaration (its own summary block is checked only against its plan)
        summary = verify_privacy(p, plan=Plan(target=target, n_tasks=2, spec=registry.ledger_spec(learner)))
        leaky = "oracle" in str(path) or ("l2dpml" in str(path) and math.isfinite(eps))
        assert summary["guarantee_holds"] == (not leaky) or "published_claim" in p
        assert p["hyperparameters"]["private_data_used"] is False
        assert p["adjacency"].startswith("add/remove")


def _accountant_epsilon(accountant, events, delta):
    """ε(δ) of ``events`` composed by one of dp_accounting's accountants (no dpcl code)."""
    acc = accountant()
    for event in events:
        acc.compose(event)
    return acc.get_epsilon(delta)


def _event(entry):
    """An entry's dp_event read back with dp_accounting's own ``DpEvent.from_named_tuple``."""
    from collections import namedtuple

    from dp_accounting import DpEvent

    def named(value):
        if isinstance(value, dict):
            return namedtuple("Event", list(value))(**{k: named(v) for k, v in value.items()})
        return [named(v) for v in value] if isinstance(value, list) else value

    return DpEvent.from_named_tuple(named(entry["dp_event"]))


#: PLD (dp_accounting, value discretisation 1e-4) against the ledger's own accountant for one DP-SGD entry
#: (PRV: its ε estimate carries an error bound of 1e-2 by default; pessimistic PLD: the same bound from
#: above): they agree to the larger of the two
ACCOUNTANTS_AGREE = 2e-2


def test_dp_accounting_composes_every_learners_ledger_from_its_events(neighbour_runs):
    """Every entry of every learner's ledger names its dp_accounting event; dp_accounting's PLD and RDP
    accountants, given only those events (read back by dp_accounting), compose each task's entries (the
    shared ones and each disjoint part's, as the ledger composes them) and every task within the
    ledger's stated ε: tight composition can only improve on the ledger's basic composition. An
    entry without an event (k-TSGD and Laplace thresholding, a uniformly chosen buffer block) adds its
    stated (ε, δ) by basic composition. Each private DP-SGD or Gaussian entry's own event gives its
    stated ε to the accountants' agreement, so an event that names other parameters than the entry's
    mechanism would be caught."""
    from dp_accounting import UnsupportedDpEvent
    from dp_accounting.pld.pld_privacy_accountant import PLDAccountant
    from dp_accounting.rdp.rdp_privacy_accountant import RdpAccountant

    runs = neighbour_runs["D"]
    seen: dict[str, set[str]] = {}
    for path in sorted(runs.rglob("privacy.json")):
        p = read_json(path)
        learner = path.relative_to(runs).parts[0]
        overall = {"pld": 0.0, "rdp": 0.0}
        for task in p["tasks"]:
            entries = task["mechanisms"]
            parts = sorted({e["part"] for e in entries if e.get("part") is not None})
            groups = [[e for e in entries if e.get("part") in (None, part)] for part in parts] or [entries]
            for group in groups:
                events = [_event(e) for e in group]
                without = [
                    e for e, ev in zip(group, events, strict=True) if isinstance(ev, UnsupportedDpEvent)
                ]
                with_event = [ev for ev in events if not isinstance(ev, UnsupportedDpEvent)]
                stated = sum(float(e["epsilon"]) for e in group)
                delta = sum(float(e["delta"]) for e in group) - sum(float(e["delta"]) for e in without)
                # a leaky baseline's entry states (∞, 1): its ε is ∞ at every δ below 1 (at δ = 1 any ε holds)
                delta = min(delta, 0.5)
                for name, accountant in (("pld", PLDAccountant), ("rdp", RdpAccountant)):
                    eps = _accountant_epsilon(accountant, with_event, delta) + sum(
                        float(e["epsilon"]) for e in without
                    )
                    overall[name] = max(overall[name], eps)
                    if name == "pld":
                        assert eps <= stated * (1 + ACCOUNTANTS_AGREE) or math.isinf(stated), (path, group)
            for entry, event in zip(entries, map(_event, entries), strict=True):
                seen.setdefault(learner, set()).add(type(event).__name__)
                if entry["mechanism"] in ("dpsgd", "gaussian", "dpsgd_buffer") and not isinstance(
                    event, UnsupportedDpEvent
                ):
                    alone = _accountant_epsilon(PLDAccountant, [event], float(entry["delta"]))
                    own = float(entry.get("epsilon_accounted", entry["epsilon"]))
                    assert alone == pytest.approx(own, rel=ACCOUNTANTS_AGREE), (path, entry)
        stated = p["overall"]["epsilon"]
        stated = math.inf if stated == "inf" else float(stated)
        assert math.isinf(overall["pld"]) == math.isinf(stated), path
        assert math.isinf(overall["rdp"]) == math.isinf(stated), path
        assert overall["pld"] <= stated * (1 + ACCOUNTANTS_AGREE) or math.isinf(stated), path
        # RDP's conversion to (ε, δ) is looser than PLD's, never tighter beyond discretisation
        assert overall["rdp"] >= overall["pld"] * (1 - ACCOUNTANTS_AGREE), path
    assert set(seen) == {path.relative_to(runs).parts[0] for path in runs.rglob("privacy.json")}
