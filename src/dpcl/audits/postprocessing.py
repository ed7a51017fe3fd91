"""The post-processing check: everything a run releases is a function of what its mechanism primitives
released and of the public inputs, and of nothing else of the private data.

If every private read goes through a primitive (:mod:`dpcl.privacy.releases`), a learner's whole release
(its label files, predictions and metrics, model, members and ``privacy.json``) is a function of the
public inputs and the primitives' outputs. That is tested exactly, with no statistics and no cooperation
from the learner: the learner runs on D while every primitive's output is recorded, then on a D′ with
the same public inputs (sizes, label spaces, test sets, seeds, options) and other private values, and on
D with one more record in every task (the public plan unchanged), with every primitive *replaying* what
it released on D. Any byte of the release that differs depends on the private data outside the
mechanisms: an un-noised statistic, a count, a normalisation by the true class sizes, a head
initialised from the data, a primitive's private by-product (the Poisson sample's size, the count of
clipped rows). A replay that leaves the recorded run (a release the recorded run did not make, or made
with another noise scale, shape or primitive) is the same finding: the releases themselves depend on
the private data outside the mechanisms.

What the check cannot see: a primitive's own bug (its noise, its clipping: the statistical audits test
those), a release made outside the primitives (no replay, so the release differs, and the learner is
marked not auditable when it made no primitive release at all), and dependence on private values that
neither neighbour changes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from ..privacy import releases

T = TypeVar("T")


def replayed(run: Callable[[], T], recorded: Sequence[releases.Release]) -> tuple[T | None, str | None]:
    """``run()`` with every primitive replaying the ``recorded`` releases (:mod:`dpcl.privacy.releases`):
    (its result, None), or (None, why the replay left the recorded run: a release that differs in public,
    whether or not the learner caught the error, or recorded releases it did not make)."""
    with releases.recording(replay=recorded, keep_rows=False) as rec:
        try:
            out = run()
        except releases.ReplayDiverged as err:
            return None, rec.diverged or str(err)
    if rec.diverged is not None:  # the learner caught the divergence
        return None, rec.diverged
    if rec.unreplayed():
        return None, f"{rec.unreplayed()} of the {len(recorded)} releases made on D were not made here"
    return out, None


def release_files(
    *,
    labels: dict,
    metrics: dict,
    privacy: dict,
    predictions: list,
    model: dict | None = None,
    members: list | None = None,
) -> dict[str, Any]:
    """A run's release, file by file, in the form its files hold (JSON values and arrays): the label
    file, ``metrics.json``, ``privacy.json``, the predictions, ``model.npz`` and each member."""
    out: dict[str, Any] = {
        "labels.json": labels,
        "metrics.json": metrics,
        "privacy.json": privacy,
        "predictions": [[np.asarray(p) for p in row] for row in predictions],
    }
    if model:
        out["model.npz"] = {k: np.asarray(v) for k, v in model.items()}
    for t, member in enumerate(members or []):
        out[f"members/task{t}.npz"] = {k: np.asarray(v) for k, v in member.items()}
    return out


def first_difference(recorded: dict[str, Any], replayed: dict[str, Any]) -> str | None:
    """Where two releases (:func:`release_files`) first differ, byte for byte, as "file: field: what on
    D, what here", or None when they are identical."""
    for name in sorted(set(recorded) | set(replayed)):
        if name not in recorded or name not in replayed:
            return f"{name}: {'missing' if name not in recorded else 'written'} on D, {'missing' if name not in replayed else 'written'} here"
        found = _difference(recorded[name], replayed[name], "")
        if found is not None:
            where, what = found
            return f"{name}: {where or 'the file'}: {what}"
    return None


def _difference(a: Any, b: Any, path: str) -> tuple[str, str] | None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            where = f"{path}.{k}" if path else str(k)
            if k not in a or k not in b:
                return (
                    where,
                    f"{'absent' if k not in a else 'present'} on D, {'absent' if k not in b else 'present'} here",
                )
            found = _difference(a[k], b[k], where)
            if found is not None:
                return found
        return None
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        if len(a) != len(b):
            return path, f"{len(a)} entries on D, {len(b)} here"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = _difference(x, y, f"{path}[{i}]")
            if found is not None:
                return found
        return None
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        x, y = np.asarray(a), np.asarray(b)
        if x.dtype != y.dtype or x.shape != y.shape:
            return path, f"{x.dtype}{list(x.shape)} on D, {y.dtype}{list(y.shape)} here"
        if x.tobytes() != y.tobytes():
            i = _first_index(x, y)
            at = ", ".join(str(int(j)) for j in np.unravel_index(i, x.shape))
            return f"{path}[{at}]", f"{x.ravel()[i].item()!r} on D, {y.ravel()[i].item()!r} here"
        return None
    if _same_scalar(a, b):
        return None
    return path, f"{a!r} on D, {b!r} here"


def _first_index(x: np.ndarray, y: np.ndarray) -> int:
    """The first element (flat) whose bytes differ between two arrays of one dtype and shape."""
    bx = np.ascontiguousarray(x).reshape(x.size, -1).view(np.uint8)
    by = np.ascontiguousarray(y).reshape(y.size, -1).view(np.uint8)
    return int(np.flatnonzero(np.any(bx != by, axis=1))[0])


def _same_scalar(a: Any, b: Any) -> bool:
    """Equal as a file holds them: the same type and value (NaN equals NaN; 0.0 and -0.0 differ)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    return a == b


@dataclass
class PostProcessing:
    """The post-processing check of one learner over its runs (label methods and neighbours)."""

    runs: int = 0  #: runs compared with their recorded run
    releases: int = 0  #: primitive releases the recorded runs made
    findings: list[str] = field(default_factory=list)  #: what differed, one line per run that differed
    files: set[str] = field(default_factory=set)  #: the kinds of file compared

    @property
    def verdict(self) -> str:
        if self.findings:
            return "refuted"
        if not self.releases:
            return "not auditable: releases outside the mechanism primitives"
        return "not refuted"

    def summary(self) -> str:
        if self.findings:
            return (
                f"the release depends on the private data outside the mechanism primitives: "
                f"{self.findings[0]}"
                + (f" (and {len(self.findings) - 1} more)" if len(self.findings) > 1 else "")
            )
        kinds = sorted({"members/*.npz" if f.startswith("members/") else f for f in self.files})
        return (
            f"{self.runs} neighbouring runs replayed {self.releases} primitive releases; every released "
            f"byte identical ({', '.join(kinds)})"
        )

    def compare(self, where: str, recorded: dict, replayed: dict | None, diverged: str | None) -> None:
        """Add one replayed run (``where`` names it) against its recorded one; ``diverged``: why the
        replay left the recorded run, if it did (then ``replayed`` is None)."""
        self.runs += 1
        self.files |= set(recorded)
        if diverged is not None:
            self.findings.append(f"{where}: {diverged}")
            return
        found = first_difference(recorded, replayed)
        if found is not None:
            self.findings.append(f"{where}: {found}")
