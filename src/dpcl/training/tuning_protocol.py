"""Which data the DP-SGD hyperparameters are tuned on, and how the tuned values scale to a run
([LabelSpace] App. D.1), from the public configuration alone.

Two protocols (config ``tuning.protocol``):

* ``public`` (sound, the default): the tuning set is the PUBLIC ``tune`` split (held out of the
  training data, never trained on by any run) restricted to the first task's classes. Nothing
  private is touched; ``privacy.json`` says so.
* ``paper`` (the published protocol): the tuning set is drawn from the PRIVATE training data and
  its use is not accounted ("we do not account for additional privacy budget spending during
  the tuning"). Split-CIFAR-100 / ImageNet-R: "a dataset that is representative of one task"
  — here the training images of the first task's classes; 5-datasets: "a subset of CIFAR-10
  that is 10 % the size of the final training dataset" with a validation set of 4.28 % of it
  (10 : 4.28 is the same 70 : 30 split). ``privacy.json`` then lists the tuning as an
  unaccounted use of private data and says ``guarantee_holds: false``.

Either way the tuning set is split 70:30 (:func:`dpcl.training.tuning.split_tuning_set`) and
the tuned configuration is scaled to a run (App. D.1): the sampling rate is kept (the expected
batch size grows linearly with the data) and Adam's learning rate is multiplied by
√(scaling factor), the factor being *final training-set size / tuning training-set size*.
Both sizes are **nominal** — the configured per-class counts (or the data set's published size)
× classes — never a count of private data. The final size is a task's (the mean task: nominal
training set / T) for the learners that train per task (PEFT ensemble, Naive, DP-A-GEM) and
the whole nominal training set for Non-CL, which trains on all tasks at once.

"The final training dataset" of the 5-datasets sentence is read as one (mean) task's, like the
"representative of one task" of the other benchmarks; with it the 5-datasets factor is 10.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from ..data.registry import FIVE_DATASETS_TUNING_CLASSES, OFFICIAL_TRAIN_SIZE, spec  # noqa: F401 (re-exported)
from ..seeding import rng

PROTOCOLS = ("public", "paper")
#: what a learner's run trains on (its spec's ``trains_on``): each task's data, or all tasks' at once (Non-CL)
TRAINS_ON = ("task", "all_tasks")
TRAIN_FRACTION = 0.7  # the 70:30 tuning/validation split of App. D.1

#: 5-datasets (App. D.1): tuning on CIFAR-10 (the registry's paper_tuning_classes, labels 40-49), 10 % of
#: the final training size for training and 4.28 % for validation
FIVE_DATASETS_TUNING_FRACTION = 0.10 + 0.0428


def nominal_train_size(name: str, cfg: dict) -> float:
    """The data set's nominal training-set size after the public holdout: the configured
    ``train_per_class`` × classes, else ``nominal_train_size`` (or the published size) × (1 −
    ``holdout_fraction``). Public by construction: no count of the obtained data."""
    entry = spec(name, cfg)
    if cfg.get("train_per_class"):
        return float(cfg["train_per_class"]) * entry.n_classes
    total = cfg.get("nominal_train_size") or entry.nominal_train_size
    if total is None:
        raise ValueError(
            f"dataset {name}: no published training-set size for {entry.name}; set datasets.{name}.nominal_train_size "
            "(the size the tuned learning rate is scaled to, App. D.1)"
        )
    return float(total) * (1.0 - float(cfg.get("holdout_fraction") or 0.0))


def public_tune_per_class(name: str, cfg: dict) -> float:
    """Nominal images per class of the public ``tune`` split (:func:`dpcl.stages.data.dataset_subset`)."""
    entry = spec(name, cfg)
    want = float(cfg.get("tune_per_class", 300))
    official = cfg.get("nominal_train_size") or entry.nominal_train_size
    if official is None:
        return want
    per_class = float(official) / entry.n_classes
    holdout = float(cfg.get("holdout_fraction") or 0.0)
    if holdout > 0:
        return min(want, round(holdout * per_class))
    if cfg.get("train_per_class"):
        left = per_class - float(cfg["train_per_class"])
        if left <= 0:
            raise ValueError(
                f"dataset {name}: train_per_class {cfg['train_per_class']} leaves no public tuning images of "
                f"the nominal {per_class:g} per class (nominal_train_size / classes); lower train_per_class, "
                "raise nominal_train_size or set holdout_fraction"
            )
        return min(want, left)
    return want


@dataclass(frozen=True)
class TuningPlan:
    """The tuning set of one (benchmark, seed) and the sizes its scaling factor comes from."""

    protocol: str
    split: str  # "tune" (public) or "train" (private, the paper's)
    tasks: tuple[tuple[int, ...], ...]  # the tuning set's classes, per (pseudo-)task
    per_class: int | None  # images kept per class (seeded subset); None keeps all of the split's
    nominal_tuning_train: float  # 70 % of the nominal tuning set of one (pseudo-)task
    nominal_task: float  # the mean task's nominal training set
    nominal_all: float  # the whole nominal training set (Non-CL)

    @property
    def classes(self) -> tuple[int, ...]:
        return tuple(c for t in self.tasks for c in t)

    @property
    def private(self) -> bool:
        return self.split == "train"

    def factor(self, trains_on: str = "task") -> float:
        """final training-set size / tuning training-set size (both nominal) for a learner that trains on
        each ``"task"``'s data or on ``"all_tasks"``' at once (a learner's spec says which)."""
        if trains_on not in TRAINS_ON:
            raise ValueError(f"trains_on must be one of {TRAINS_ON}, got {trains_on!r}")
        final = self.nominal_all if trains_on == "all_tasks" else self.nominal_task
        return final / self.nominal_tuning_train

    def to_dict(self) -> dict:
        return asdict(self) | {
            "factor_per_task": self.factor("task"),
            "factor_all_tasks": self.factor("all_tasks"),
        }


def tuning_plan(
    name: str, cfg: dict, task_classes: list[list[int]], protocol: str, n_tasks: int = 1
) -> TuningPlan:
    """The tuning set of a benchmark on data set ``name`` (config ``cfg``) whose scenario has
    ``task_classes``, under ``protocol`` (see the module docstring): one task's classes, or with
    ``n_tasks`` = 2 (DP-A-GEM's two-task loop) the first two tasks' (5-datasets, paper protocol:
    the CIFAR-10 classes in two halves)."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"tuning.protocol must be one of {PROTOCOLS}, got {protocol!r}")
    if not 1 <= n_tasks <= len(task_classes):
        raise ValueError(
            f"a tuning set of {n_tasks} tasks needs a scenario with as many ({len(task_classes)})"
        )
    entry = spec(name, cfg)
    n_classes = len({c for cs in task_classes for c in cs})
    total = nominal_train_size(name, cfg) * n_classes / entry.n_classes
    task = total / len(task_classes)
    tasks = tuple(tuple(int(c) for c in cs) for cs in task_classes[:n_tasks])
    per_class, per_task = None, sum(len(t) for t in tasks) / n_tasks
    if protocol == "public":
        tune = public_tune_per_class(name, cfg)
        return TuningPlan(protocol, "tune", tasks, None, TRAIN_FRACTION * tune * per_task, task, total)
    if entry.paper_tuning_classes:
        classes = entry.paper_tuning_classes
        tasks = tuple(tuple(int(c) for c in h) for h in np.array_split(classes, n_tasks))
        per_class = int(round(FIVE_DATASETS_TUNING_FRACTION * task / len(classes)))
        return TuningPlan(
            protocol,
            "train",
            tasks,
            per_class,
            TRAIN_FRACTION * per_class * len(classes) / n_tasks,
            task,
            total,
        )
    return TuningPlan(
        protocol, "train", tasks, None, TRAIN_FRACTION * total / n_classes * per_task, task, total
    )


def tuning_rows(y: np.ndarray, plan: TuningPlan, seed: int) -> np.ndarray:
    """Sorted rows of ``y`` (the plan's split) that form the tuning set: the plan's classes, at most
    ``per_class`` of each (a seeded subset)."""
    y = np.asarray(y)
    rows = np.flatnonzero(np.isin(y, plan.classes))
    if plan.per_class is not None:
        gen = rng(seed, "tuning", "subset")
        rows = np.concatenate(
            [gen.permutation(rows[y[rows] == c])[: plan.per_class] for c in np.unique(y[rows])]
        )
    if rows.size == 0:
        raise ValueError(
            f"the {plan.split!r} split has no images of the tuning classes {list(plan.classes)}"
            + ("; raise tune_per_class or holdout_fraction" if plan.split == "tune" else "")
        )
    return np.sort(rows)


def scaled_dpsgd(best: dict, plan: TuningPlan, trains_on: str = "task") -> dict:
    """A run's DP-SGD config from the tuned one: sampling rate kept, lr × √factor (App. D.1)."""
    return {**best, "lr": float(best["lr"]) * math.sqrt(plan.factor(trains_on))}


def with_run_configs(result: dict, plan: TuningPlan) -> dict:
    """A tuning result completed for the runs: its plan, and the scaled configs of the per-task
    learners (``dpsgd``) and of Non-CL (``dpsgd_all_tasks``)."""
    return result | {
        "protocol": plan.protocol,
        "plan": plan.to_dict(),
        "dpsgd": scaled_dpsgd(result["best"], plan, "task"),
        "dpsgd_all_tasks": scaled_dpsgd(result["best"], plan, "all_tasks"),
    }


def run_dpsgd(result: dict, trains_on: str, source: str = "tuning result") -> dict:
    """The DP-SGD config of a run that trains on ``trains_on`` (:data:`TRAINS_ON`: each task's data, or
    all tasks' at once; a learner's spec says which), from a tuning result (:func:`with_run_configs`)."""
    if trains_on not in TRAINS_ON:
        raise ValueError(f"trains_on must be one of {TRAINS_ON}, got {trains_on!r}")
    key = "dpsgd_all_tasks" if trains_on == "all_tasks" else "dpsgd"
    if key not in result or "protocol" not in result:
        raise ValueError(
            f"{source} has no {key!r}/'protocol' (written by an older dpcl); rerun its tuning job"
        )
    return result[key]


def hyperparameters_use(
    protocol: str | None, search: str = "Optuna search", fixed_with_private_data: str | None = None
) -> dict:
    """privacy.json's account of the tuning data (``protocol`` None: not tuned). ``search`` names the
    search that chose the values (the DP-SGD learners' Optuna study, FM-A-GEM's grid);
    ``fixed_with_private_data`` (values not tuned) says how fixed values were chosen with private
    data, which makes the choice an unaccounted use (:func:`unaccounted_uses`)."""
    if protocol == "paper":
        return {
            "chosen_by": f"{search} on PRIVATE training data ([LabelSpace] App. D.1: a task-sized subset "
            "of the training data; 5-datasets: a CIFAR-10 subset), as the paper does",
            "private_data_used": True,
            "accounted": False,
        }
    if protocol == "public":
        return {
            "chosen_by": f"{search} on the public tuning split (held out of the training data, never "
            "trained on by any run): no private data, no privacy cost",
            "private_data_used": False,
        }
    if protocol is not None:
        raise ValueError(f"tuning protocol must be one of {PROTOCOLS} or None, got {protocol!r}")
    if fixed_with_private_data:
        return {
            "chosen_by": f"fixed in the config, values chosen with private data: {fixed_with_private_data}",
            "private_data_used": True,
            "accounted": False,
            "unaccounted_use": {
                "use": "hyperparameter choice",
                "data": "private training and test data",
                "why": fixed_with_private_data + "; the (epsilon, delta) above covers label release and "
                "training only",
            },
        }
    return {
        "chosen_by": "fixed in the config before seeing data: no private data, no privacy cost",
        "private_data_used": False,
    }


def protocol_note(tuning: dict | None) -> str:
    """A table note on how the runs' DP-SGD hyperparameters were chosen (config ``tuning``)."""
    if not tuning or not tuning.get("enabled", True):
        return "Hyperparameters: the config's dpsgd block, not tuned (the paper tunes them, App. D.1)."
    if tuning.get("protocol", "public") == "paper":
        return (
            "Hyperparameters: tuned as the paper (App. D.1, Optuna GP, "
            + str(tuning.get("trials", 20))
            + " trials) on a task-sized subset of the private training data (5-datasets: a CIFAR-10 subset, "
            "10 % + 4.28 % of a task's nominal size), not accounted (privacy.json: guarantee_holds false); lr "
            "scaled by sqrt(nominal final / tuning-train size). Our reading: 5-datasets' 'final training "
            "dataset' is one (mean) task's; DP-A-GEM has its own study on the first two tasks."
        )
    return (
        "Hyperparameters: tuned (Optuna GP, " + str(tuning.get("trials", 20)) + " trials) on a PUBLIC "
        "held-out split, not on private data as the paper (App. D.1); lr scaled by sqrt(nominal final / "
        "tuning-train size)."
    )


def unaccounted_uses(note: dict) -> list[dict]:
    """The ledger's unaccounted uses of private data given privacy.json's hyperparameter ``note``
    (:func:`hyperparameters_use`): the paper protocol's tuning, or fixed values chosen with private data."""
    if not note.get("private_data_used") or note.get("accounted") is True:  # a missing key is not accounted
        return []
    if "unaccounted_use" in note:  # fixed values chosen with private data (hyperparameters_use)
        return [dict(note["unaccounted_use"])]
    return [
        {
            "use": "hyperparameter tuning",
            "data": "private training data",
            "why": "[LabelSpace] App. D.1 tunes on the training data and does not account for it; the "
            "(epsilon, delta) above covers label release and training only",
        }
    ]


#: the output label spaces a tuning study can train in (:func:`tuning_label_space`)
TUNING_LABEL_SPACES = ("base", "task")


def tuning_label_space(method: str) -> str:
    """The label space a study must tune in to serve runs of label ``method`` (a config tag):
    ``"task"`` where O_t is the task's own labels (Label Oracle) or a release of them (Release
    Labels), ``"base"`` where it is fixed before seeing data and holds every base label from task 0
    (Base Dataset, Public Labels). Public: a function of the config tag only."""
    from ..data.label_space import parse_label_method

    return "task" if parse_label_method(method).data_dependent else "base"


def hyperparameters_note(
    values: dict | None,
    protocol: str | None,
    search: str = "Optuna search",
    fixed_with_private_data: str | None = None,
) -> dict:
    """privacy.json's account of how the hyperparameters were chosen: ``protocol`` is the tuning
    protocol of a tuned run ("public" or "paper", :mod:`dpcl.training.tuning_protocol`) and ``search``
    the search that tuned it; None when the values were fixed in the config (or there are none),
    then ``fixed_with_private_data`` says how they were chosen with private data, if they were."""
    from .heads import CHOSEN_WITH_PRIVATE_DATA

    if values is None:
        return {
            "chosen_by": "none: no hyperparameters besides the budget (noise from the accountant)",
            "private_data_used": False,
        }
    if CHOSEN_WITH_PRIVATE_DATA in values:  # a dpsgd block's own statement (config/film_cpu.yaml)
        values = dict(values)
        declared = values.pop(CHOSEN_WITH_PRIVATE_DATA)
        if protocol is None and fixed_with_private_data is None:
            fixed_with_private_data = declared
    return hyperparameters_use(protocol, search, fixed_with_private_data) | {"values": values}
