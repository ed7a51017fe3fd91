"""The learner registry: one :class:`LearnerSpec` per learner, declared in the learner's own module.

A learner's module declares ``SPECS`` (a tuple of :class:`LearnerSpec`); this module imports the
modules listed in :data:`MODULES` and nothing else names a learner. The workflow (the Snakefile's
``learner`` wildcard, which job runs which learner, which label methods it runs), the config schema
(its list of learners is generated from here), the tables and figures (display names, which
comparison a learner appears in), the ledger verifier (:func:`ledger_spec`) and the audits read it.

Light by design: the Snakefile imports this module, so the learner modules it imports must not
import torch or opacus at module level (``tests/learners/test_learner_registry.py`` checks it).

Adding a learner: its module (training code, ``LEDGER_SPEC``, ``SPECS`` and its ``run`` function, the
one learner contract of :mod:`dpcl.learners.api`: ``run(RunInputs) -> RunResult``, which a built-in
learner's job, a user's learner's ``features`` job and the privacy audits call alike), its entry in
:data:`MODULES`, its test, and its name in the config's ``learners`` list. Every learner has one,
those that train on images with the backbone in the loop (the FiLM jobs, :data:`FILM_JOBS`) included.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..privacy.verify import LedgerSpec

#: the modules (under dpcl.learners) that declare learners, in the order the tables list them
MODULES = ("cosine", "peft", "agem", "desai", "l2dpml", "fm_agem", "agem_film")

#: what a learner trains on a frozen backbone
ADAPTERS = ("prototypes", "head", "film", "functional")
#: the workflow job that runs a learner (rule files under workflow/rules/): one job per seed runs every
#: learner of a cached-feature job, one job per run the FiLM ones; ``features`` is the job of a learner
#: that brings its own ``run`` function (:mod:`dpcl.learners.api`, one job per learner and seed)
JOBS = ("prototypes", "heads", "agem", "projected", "film_peft", "film_baseline", "features")
#: the jobs on images (FiLM): their learners' runs get images and the backbone (:class:`dpcl.stages.film.FilmJob`)
FILM_JOBS = ("film_peft", "film_baseline")
#: the config list a learner's label methods come from (:func:`label_methods_key`)
METHOD_LISTS = ("label_methods", "head_label_methods", "baseline_label_methods", "agem", "projected")
#: where a list of :data:`METHOD_LISTS` lives in the config when its name is not its config key: the
#: ``projected`` job's learners share the ``label_methods`` of L2DP-ML's config block
_METHOD_LIST_KEYS = {"projected": "l2dpml"}
#: a learner's role in Fig. 3: None (not drawn), "ours" ([LabelSpace]'s methods, drawn beside the compared
#: ones) or "compared" (a memory-buffer or published method: the figure is drawn when one of them runs)
FIG3_ROLES = (None, "ours", "compared")
#: what a learner's run trains on: each task's data in turn, or every task's at once (Non-CL)
TRAINS_ON = ("task", "all_tasks")


@dataclass(frozen=True, kw_only=True)
class LearnerAudit:
    """A learner's empirical privacy audit: its function, as "module:function", and the name and tag of
    its rows in the audit table (a white-box audit's tag defaults to the display names of the learners
    that share it).

    - a canary audit (:attr:`LearnerSpec.audit`, :mod:`dpcl.audits.learners`): ``(epsilon, delta, trials,
      seed) -> row``;
    - a white-box audit (:attr:`LearnerSpec.whitebox`, :mod:`dpcl.audits.whitebox`): ``(epsilon, delta,
      *, audit, seed) -> [row, ...]`` with ``audit`` the config's audit block; each row has ``part``,
      ``claimed_epsilon``, ``claimed_mu``, ``epsilon_lower_bound``, ``mu_lower_bound`` (None for a
      one-run audit, :mod:`dpcl.audits.film`),
      ``trials_per_world``, ``alpha`` and ``setting``."""

    function: str
    name: str
    tag: str = ""
    #: a white-box audit's own size key in the config's audit block (e.g. "film_canaries"): the audit
    #: makes no rows, and the table runs no job for it, while that key is 0 or absent ("": none)
    requires: str = ""


@dataclass(frozen=True, kw_only=True)
class LearnerSpec:
    """What the pipeline needs to know about one learner (its training code stays in its module)."""

    name: str  #: the config and file-path name
    display: str  #: the name in tables, e.g. "PEFT Ensemble (head-only)"
    adapter: str  #: one of :data:`ADAPTERS`
    job: str  #: one of :data:`JOBS`
    methods: str  #: one of :data:`METHOD_LISTS`
    module: str  #: the module under dpcl.learners that declares it (its ledger spec lives there)
    trains_on: str = "task"
    figure_label: str | None = None  #: the name in comparison figures (default: ``display``)
    published_claim: str | None = None  #: short name of the published privacy claim it carries, if any
    dp: bool = True  #: False for a method reproduced as published whose privacy claim does not hold
    fig3: str | None = None  #: its role in Fig. 3 (the comparison with Desai et al.): :data:`FIG3_ROLES`
    ensemble: bool = False  #: an ensemble of per-task members (Fig. A2: its aggregation rules)
    #: the learner contract (:mod:`dpcl.learners.api`): ``run(RunInputs) -> RunResult``, a callable or
    #: "module:function" (imported on first use, so that the registry stays light); every learner has one
    run: Callable | str | None = None
    audit: LearnerAudit | None = None  #: its canary audit, if it has one (the privacy audit table runs it)
    #: its white-box audit, if it has one: the adversary sees what its mechanism releases at every step
    #: (learners that share one training function name the same audit; the table runs it once)
    whitebox: LearnerAudit | None = None
    #: a note the paper tables (Tables A3-A7, F1) add where it has rows (what its published counterpart is)
    paper_table_note: str | None = None
    config_blocks: tuple[str, ...] = ()  #: the learner's own config blocks (e.g. ("agem",)) its jobs read
    resources: dict = field(default_factory=lambda: {"mem_mb": 2000, "runtime": 60})

    def __post_init__(self) -> None:
        for key, allowed in (
            ("adapter", ADAPTERS),
            ("job", JOBS),
            ("methods", METHOD_LISTS),
            ("trains_on", TRAINS_ON),
            ("fig3", FIG3_ROLES),
        ):
            if getattr(self, key) not in allowed:
                raise ValueError(
                    f"learner {self.name!r}: {key} must be one of {allowed}, got {getattr(self, key)!r}"
                )
        for key in ("audit", "whitebox"):
            a = getattr(self, key)
            if a is not None and (not isinstance(a, LearnerAudit) or a.function.count(":") != 1):
                raise ValueError(
                    f"learner {self.name!r}: {key} must be a LearnerAudit naming 'module:function'"
                )
        if not (callable(self.run) or (isinstance(self.run, str) and self.run.count(":") == 1)):
            raise ValueError(
                f"learner {self.name!r}: needs its run function (run(RunInputs) -> RunResult, a callable or "
                f"'module:function'), got {self.run!r}"
            )

    @property
    def label(self) -> str:
        """The name in comparison figures."""
        return self.figure_label or self.display

    @property
    def ledger(self) -> LedgerSpec:
        """The ledger this learner declares it writes (``LEDGER_SPECS[name]`` or ``LEDGER_SPEC`` of its module)."""
        _load()
        module = _MODULE_OF[self.name]
        specs_ = getattr(module, "LEDGER_SPECS", None)
        if specs_ and self.name in specs_:
            return specs_[self.name]
        if not hasattr(module, "LEDGER_SPEC"):
            raise ValueError(f"learner {self.name!r}: its module {module.__name__} declares no LEDGER_SPEC")
        return module.LEDGER_SPEC


_REGISTRY: dict[str, LearnerSpec] | None = None
_MODULE_OF: dict[str, ModuleType] = {}
_EXTERNAL: dict[str, ModuleType] = {}  # a user's learner modules, by the entry that named them


def _register(found: dict[str, LearnerSpec], module: ModuleType, short: str) -> None:
    specs_ = getattr(module, "SPECS", None)
    if not isinstance(specs_, tuple | list) or not all(isinstance(s, LearnerSpec) for s in specs_):
        raise ValueError(f"learner module {module.__name__} must declare SPECS, a tuple of LearnerSpec")
    for spec in specs_:
        if spec.name in found:
            raise ValueError(
                f"learner {spec.name!r} is declared twice ({_MODULE_OF[spec.name].__name__}, {module.__name__})"
            )
        if spec.module != short:
            raise ValueError(f"learner {spec.name!r} is declared in {short} but names module {spec.module!r}")
        found[spec.name] = spec
        _MODULE_OF[spec.name] = module


#: environment variable naming a workflow's learner modules (os.pathsep-separated), set by the Snakefile
#: so that every job's process (local or cluster) registers the same learners
ENV_MODULES = "DPCL_LEARNER_MODULES"


def _load() -> dict[str, LearnerSpec]:
    global _REGISTRY
    inherited = [e for e in os.environ.get(ENV_MODULES, "").split(os.pathsep) if e and e not in _EXTERNAL]
    # (file entries are exported as absolute paths, the keys load_modules stores them under)
    if inherited:
        load_modules(inherited)
    if _REGISTRY is None:
        found: dict[str, LearnerSpec] = {}
        for mod in MODULES:
            _register(found, importlib.import_module(f".{mod}", __package__), mod)
        for entry, module in _EXTERNAL.items():
            _register(found, module, external_name(entry))
        _REGISTRY = found
    return _REGISTRY


def external_name(entry: str) -> str:
    """The ``module`` a learner of ``learner_modules`` entry ``entry`` names: a file's stem, else the module path."""
    return Path(entry).stem if entry.endswith(".py") else entry


def export_modules(entries, base: str | Path = ".") -> None:
    """Name a workflow's learner modules in the environment (:data:`ENV_MODULES`, files as absolute paths)
    so that the processes of its jobs register them too."""
    resolved = [str((Path(base) / e).resolve()) if e.endswith(".py") else e for e in entries or ()]
    if resolved:
        os.environ[ENV_MODULES] = os.pathsep.join(resolved)
    else:
        os.environ.pop(ENV_MODULES, None)


def load_modules(entries, base: str | Path = ".") -> None:
    """Register the learners of a user's modules (config ``learner_modules``): each entry is a Python file
    (``my_learner.py``, relative to ``base``) or an importable module path (``mypkg.learner``) declaring
    ``SPECS`` and ``LEDGER_SPEC`` like a built-in learner's module. Loading an entry twice is a no-op."""
    global _REGISTRY
    for entry in entries or ():
        key = str((Path(base) / entry).resolve()) if entry.endswith(".py") else entry
        if key in _EXTERNAL:
            continue
        if entry.endswith(".py"):
            path = Path(key)
            if not path.is_file():
                raise ValueError(f"learner_modules: {entry!r} is not a file (looked for {path})")
            name = f"dpcl_user_learners.{path.stem}"
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or spec.loader is None:
                raise ValueError(f"learner_modules: {entry!r} cannot be loaded as a Python module")
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        else:
            try:
                module = importlib.import_module(entry)
            except ImportError as exc:
                raise ValueError(f"learner_modules: cannot import {entry!r} ({exc})") from exc
        _EXTERNAL[key] = module
        _REGISTRY = None  # rebuilt with the new module on next use


def names() -> tuple[str, ...]:
    """Every registered learner's name, in table order."""
    return tuple(_load())


def get(name: str) -> LearnerSpec:
    """The spec of learner ``name``; a clear error for an unknown one."""
    reg = _load()
    if name not in reg:
        raise ValueError(f"unknown learner {name!r}; known: {sorted(reg)}")
    return reg[name]


def specs() -> tuple[LearnerSpec, ...]:
    return tuple(_load().values())


def select(learners, **where) -> list[str]:
    """The names in ``learners`` (e.g. the config's list, in its order) whose spec has every attribute
    of ``where``, e.g. ``select(config["learners"], job="heads")``."""
    return [n for n in learners if all(getattr(get(n), k) == v for k, v in where.items())]


def job_learners(learners, job: str) -> list[str]:
    """The learners of ``learners`` that workflow job ``job`` runs (:data:`JOBS`)."""
    if job not in JOBS:
        raise ValueError(f"unknown job {job!r}; known: {JOBS}")
    return select(learners, job=job)


def job_resources(job: str) -> dict:
    """Resources of a job of ``job``: the largest each registered learner of that job declares."""
    specs_ = [s for s in specs() if s.job == job]
    keys = sorted({k for s in specs_ for k in s.resources})
    return {k: max(s.resources.get(k, 0) for s in specs_) for k in keys}


def wildcard(job: str | None = None) -> str:
    """A Snakemake wildcard constraint matching the registered learners (of ``job``, if given)."""
    return "|".join(n for n in names() if job is None or get(n).job == job)


def run_function(name: str, job: str | None = None) -> Callable:
    """Learner ``name``'s ``run`` function (the learner contract, :mod:`dpcl.learners.api`), checked to
    belong to ``job`` when given: a clear error for a learner another job runs."""
    spec = get(name)
    if job is not None and spec.job != job:
        raise ValueError(
            f"learner {name!r} is run by job {spec.job!r}, not {job!r}; this job runs {wildcard(job)}"
        )
    if spec.run is None:
        raise ValueError(f"learner {name!r} declares no run function (LearnerSpec.run)")
    return _import(spec.run) if isinstance(spec.run, str) else spec.run


def _import(path: str) -> Callable:
    module, function = path.split(":")
    return getattr(importlib.import_module(module), function)


def audited() -> tuple[LearnerSpec, ...]:
    """The learners with an audit, in the audit table's order: methods audited as published (``dp`` False,
    whose claim the audit tests) first, then in registry order."""
    return tuple(sorted((s for s in specs() if s.audit is not None), key=lambda s: s.dp))


def audit_function(name: str) -> Callable:
    """Learner ``name``'s audit function (:class:`LearnerAudit`)."""
    spec = get(name)
    if spec.audit is None:
        raise ValueError(f"learner {name!r} declares no audit (LearnerSpec.audit)")
    return _import(spec.audit.function)


def whitebox_audits() -> list[tuple[LearnerAudit, Callable, tuple[LearnerSpec, ...]]]:
    """The white-box audits (:attr:`LearnerSpec.whitebox`), each once with the learners that name it, in
    registry order: (audit, its function, learners)."""
    groups: dict[str, tuple[LearnerAudit, list[LearnerSpec]]] = {}
    for s in specs():
        if s.whitebox is not None:
            groups.setdefault(s.whitebox.function, (s.whitebox, []))[1].append(s)
    return [(audit, _import(f), tuple(g)) for f, (audit, g) in groups.items()]


def method_list_key(methods: str) -> str:
    """The config key of method list ``methods`` (:data:`METHOD_LISTS`): a top-level list, or a config
    block whose ``label_methods`` it is."""
    if methods not in METHOD_LISTS:
        raise ValueError(f"unknown method list {methods!r}; known: {METHOD_LISTS}")
    return _METHOD_LIST_KEYS.get(methods, methods)


def label_methods_key(name: str) -> str:
    """Which config list learner ``name`` takes its label methods from (its config key)."""
    return method_list_key(get(name).methods)


def ledger_spec(name: str) -> LedgerSpec:
    """The ledger learner ``name`` declares it writes (what :mod:`dpcl.privacy.verify` checks)."""
    return get(name).ledger
