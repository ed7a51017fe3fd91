"""What produced a result: the library code a workflow step runs (so Snakemake reruns exactly the
steps a code change affects) and the versions recorded in every output.

Snakemake hashes a rule's script, but all logic lives in ``src/dpcl`` and the scripts are a few
lines, so an edit of the library would leave every result stale. :func:`code_hash` follows a
script's imports of ``dpcl`` (module level and inside functions, absolute and relative,
transitively) and hashes the source of every module reached; the Snakefile gives each rule
that hash as the parameter ``dpcl_code``, and Snakemake's parameter trigger reruns the rule
(and what depends on its outputs) when it changes. An edit of the report code therefore reruns
the report rules, not feature extraction.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.metadata
import platform
import subprocess
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
PACKAGE = PACKAGE_DIR.name  # "dpcl"


def _module_file(module: str) -> Path | None:
    """The source file of ``dpcl.x.y`` (a module or a package's __init__), None outside dpcl."""
    parts = module.split(".")
    if parts[0] != PACKAGE:
        return None
    base = PACKAGE_DIR.joinpath(*parts[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE_DIR).with_suffix("")
    parts = [PACKAGE, *rel.parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def _imports(path: Path) -> frozenset[str]:
    """dpcl modules ``path`` imports anywhere in its body (with ``from m import n``: m and m.n)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_pkg = path.name == "__init__.py"
    here = _module_name(path) if path.is_relative_to(PACKAGE_DIR) else ""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                pkg = here.split(".") if is_pkg else here.split(".")[:-1]
                base = ".".join(pkg[: len(pkg) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)
    return frozenset(m for m in out if m == PACKAGE or m.startswith(PACKAGE + "."))


def module_closure(script: str | Path) -> list[Path]:
    """Every dpcl source file ``script`` reaches through imports (with the packages on the way)."""
    seen: set[Path] = set()
    todo = [Path(script).resolve()]
    while todo:
        path = todo.pop()
        for module in _imports(path):
            parts = module.split(".")
            for i in range(1, len(parts) + 1):  # importing dpcl.a.b runs dpcl/__init__ and dpcl/a/__init__
                f = _module_file(".".join(parts[:i]))
                if f is not None and f not in seen:
                    seen.add(f)
                    todo.append(f)
    return sorted(seen)


@functools.cache
def code_hash(script: str | Path) -> str:
    """sha256 (16 hex digits) of ``script`` and every dpcl module it reaches: changes exactly when
    the code a workflow step runs changes."""
    h = hashlib.sha256()
    script = Path(script).resolve()
    for path in [script, *module_closure(script)]:
        name = path.relative_to(PACKAGE_DIR).as_posix() if path.is_relative_to(PACKAGE_DIR) else path.name
        h.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(PACKAGE_DIR), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(PACKAGE_DIR), "status", "--porcelain", "--", "."],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return out + ("-dirty" if dirty else "") if out else None


def provenance(device: dict | None = None) -> dict:
    """dpcl's version and commit (when run from a git checkout), the hash of the whole library and
    the versions of the packages results depend on; recorded in every run's metrics.json and
    privacy.json, every feature cache and the report. ``device``: where torch computed the output
    (:func:`dpcl.devices.device_record`; FiLM runs and tuning, feature caches), recorded as ``device``."""
    return _provenance() | ({"device": dict(device)} if device is not None else {})


@functools.cache
def _provenance() -> dict:
    versions = {}
    for pkg in ("numpy", "torch", "timm", "opacus", "dp-accounting", "prv-accountant", "optuna", "scipy"):
        try:
            versions[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            versions[pkg] = None
    try:
        version = importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        version = None
    h = hashlib.sha256()
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        h.update(path.relative_to(PACKAGE_DIR).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return {
        "dpcl": version,
        "commit": _git_commit(),
        "library_sha256": h.hexdigest()[:16],
        "python": platform.python_version(),
        "packages": versions,
    }
