"""The DP-AL experiment grid from the config's ``active`` block: runs, their schedules and plans.

A run is (pool, mode, method, ε, ε_Sel, seed). A method is ``random-nal`` (no AL: one DP-SGD
phase on a random labelled set of the whole budget, the paper's "Random"), ``random-naive`` /
``random-sa`` (random selection, naive / step-amplification schedule) or
``{acquisition}-{dp|nondp}-{sa|naive|cl|nr|psa}`` (``psa``: the authors' step amplification as
released, :mod:`dpcl.active.paper_schedule`, whose runs carry the verdicts on their claim in
``privacy.json``). Only DP selection charges ε_Sel; random and
non-DP selection train with the whole ε ([Schwethelm2025], Sec. IV-A), so their runs are tagged sel 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .acquisition import ACQUISITIONS

# The Snakefile imports this module: keep it free of torch/opacus (opacus configures the root logger
# on import, which would print every Snakemake message twice), so the schedules are imported lazily.

SCHEDULE_OF = {
    "nal": "single",
    "naive": "naive",
    "sa": "step_amplification",
    "cl": "continual",
    "nr": "noise_reduction",
    "psa": "paper_step_amplification",
}
_METHOD = re.compile(
    r"^(random)-(nal|naive|sa)$|^(" + "|".join(ACQUISITIONS) + r")-(dp|nondp)-(sa|naive|cl|nr|psa)$"
)


@dataclass(frozen=True)
class MethodSpec:
    name: str
    acquisition: str
    selection: str  # random | dp | nondp
    schedule: str  # a dpcl.active.schedules kind


def parse_method(name: str) -> MethodSpec:
    m = _METHOD.match(name)
    if not m:
        raise ValueError(
            f"unknown active-learning method {name!r}: use random-nal, random-naive, random-sa or "
            f"{{{','.join(ACQUISITIONS)}}}-{{dp,nondp}}-{{sa,naive,cl,nr,psa}}"
        )
    if m.group(1):
        return MethodSpec(name, "random", "random", SCHEDULE_OF[m.group(2)])
    return MethodSpec(name, m.group(3), m.group(4), SCHEDULE_OF[m.group(5)])


def tag(x: float) -> str:
    return f"{float(x):g}"


def run_cells(active: dict) -> list[dict]:
    """Every (mode, method, ε, charged ε_Sel) the config asks for, deduplicated, in a stable order."""
    eps, sel = float(active["epsilon"]), float(active["selection_epsilon"])
    wanted = [(m, eps, sel) for m in active["methods"]]
    for e, s in active.get("table2_settings") or []:
        wanted += [("random-nal", float(e), float(s)), ("entropy-dp-sa", float(e), float(s))]
    for s in active.get("fig5_selection_epsilons") or []:
        wanted += [("entropy-dp-sa", eps, float(s))]
    if active.get("fig5_selection_epsilons"):
        wanted += [("random-nal", eps, sel), ("entropy-nondp-sa", eps, sel)]
    if active.get("table5"):
        wanted += [(f"entropy-dp-{s}", eps, sel) for s in ("cl", "nr", "sa")]
    cells, seen = [], set()
    for name, e, s in wanted:
        spec = parse_method(name)
        charged = s if spec.selection == "dp" else 0.0
        for mode in active["modes"]:
            if spec.selection == "nondp" and mode != "paper":
                continue
            key = (mode, name, e, charged)
            if key not in seen:
                seen.add(key)
                cells.append(
                    {
                        "mode": mode,
                        "method": name,
                        "epsilon": e,
                        "selection_epsilon": charged,
                        "schedule": spec.schedule,
                        "key": f"{mode}/{name}/eps{tag(e)}-sel{tag(charged)}",
                    }
                )
    return cells


def schedule_keys(active: dict) -> list[str]:
    """Schedule files the runs need: ``{kind}-eps{ε}-sel{ε_Sel}``."""
    keys = []
    for c in run_cells(active):
        k = f"{c['schedule']}-eps{tag(c['epsilon'])}-sel{tag(c['selection_epsilon'])}"
        if k not in keys:
            keys.append(k)
    return keys


def plan_for(active: dict, kind: str, epsilon: float, selection_epsilon: float):
    """The public plan (an ``ALPlan``) of a schedule (the single-phase baseline labels the whole budget at once)."""
    from .schedules import ALPlan

    queries = tuple(int(k) for k in active["query_sizes"])
    if kind == "single":
        return ALPlan(
            epsilon,
            float(active["delta"]),
            0.0,
            int(active["initial_size"]) + sum(queries),
            (),
            float(active["batch_size"]),
            float(active["epochs_random"]),
        )
    return ALPlan(
        epsilon,
        float(active["delta"]),
        selection_epsilon,
        int(active["initial_size"]),
        queries,
        float(active["batch_size"]),
        float(active["epochs"]),
    )


def parse_schedule_key(key: str) -> tuple[str, float, float]:
    m = re.match(r"^([a-z_]+)-eps([0-9.e+-]+)-sel([0-9.e+-]+)$", key)
    if not m:
        raise ValueError(f"not a schedule key: {key!r}")
    return m.group(1), float(m.group(2)), float(m.group(3))
