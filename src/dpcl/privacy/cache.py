"""Disk cache of the DP-SGD accountant's results, shared by every process of a machine.

Calibrating σ for (ε, δ, q, steps) takes the PRV accountant seconds on a CPU, whatever the
model size; the paper grid asks the same question for every member, label method and task
of an (ε, seed) (9,800 ensemble members), and the miniature paper run more often than it trains.
The answers are pure functions of public parameters, so they are cached on disk: the key
is the function, its arguments and a hash of the accounting code (this package's modules)
and of the accountant packages' versions, so any change to either computes afresh. A hit
returns exactly what the computation returned (floats survive JSON unchanged). The PLD bounds of
:mod:`dpcl.privacy.pld` are kept too (a learner's verdicts, its verifier, the reports and
the tests ask for the same histories). A computation
that runs more of dpcl names those subpackages (``memo(packages=)``), whose code joins the key (the
DP-AL schedules, :func:`dpcl.stages.active.solve_schedule`, and the DP-AL report's solutions at the
authors' plans, :func:`dpcl.report.active_authors.authors_plan_claim`).

Folder: ``$DPCL_ACCOUNTING_CACHE``, else ``$XDG_CACHE_HOME/dpcl/accounting`` (default
``~/.cache/dpcl/accounting``); ``DPCL_ACCOUNTING_CACHE=off`` turns the cache off. An
unwritable folder only costs the speed-up.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

ENV = "DPCL_ACCOUNTING_CACHE"


def cache_dir() -> Path | None:
    """The cache folder, or None when switched off."""
    v = os.environ.get(ENV, "")
    if v.lower() == "off":
        return None
    if v:
        return Path(v)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dpcl" / "accounting"


@functools.cache
def _code_key(packages: tuple[str, ...] = ()) -> str:
    from importlib.metadata import PackageNotFoundError, version

    h = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for p in sorted(here.glob("*.py")):
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    for package in packages:  # more of dpcl's subpackages whose code the computation runs
        for p in sorted((here.parent / package).glob("*.py")):
            h.update(f"{package}/{p.name}".encode() + b"\0" + p.read_bytes())
    for pkg in ("opacus", "dp-accounting", "numpy", "scipy"):
        try:
            h.update(f"{pkg}={version(pkg)}\0".encode())
        except PackageNotFoundError:
            h.update(f"{pkg}=none\0".encode())
    return h.hexdigest()


def memo(name: str, args: tuple, compute: Callable[[], Any], *, packages: tuple[str, ...] = ()) -> Any:
    """``compute()``, or its cached result for (``name``, ``args``) under the current code: this
    subpackage's and, for a computation that runs more of dpcl, ``packages``' (e.g. ``("active",)``)."""
    root = cache_dir()
    if root is None:
        return compute()
    key = hashlib.sha256(json.dumps([name, list(args), _code_key(tuple(packages))]).encode()).hexdigest()
    path = root / key[:2] / f"{key}.json"
    try:
        return json.loads(path.read_text())["value"]
    except (OSError, ValueError, KeyError):
        pass
    value = compute()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"function": name, "args": list(args), "value": value}))
        os.replace(tmp, path)
    except OSError:
        pass
    return value
