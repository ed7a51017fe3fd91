"""Every release of private data, reported by the mechanism primitive that makes it.

A release (the noisy clipped gradient sum of the heads, DP-A-GEM's buffer and Desai et al.'s
blocks; the cosine classifier's noisy class sums; FM-A-GEM's noisy Taylor coefficients; DP active
learning's Laplace-noised acquisition scores) calls
:func:`report` with what it read and how it was noised. Outside an audit nothing listens: :func:`report`
returns after one context-variable read. An audit opens :func:`recording`, runs a learner's ordinary
code, and receives every release of the run, in order, whether or not the learner's ledger expects it
and whether or not the learner cooperates: the report is made by the primitive, not by the learner.

What a release states is what the adversary of the accountant needs and nothing the learner chooses to
say: the records it read (their rows, as the primitive read them, so that an audit can tell which
individuals they are by their content), the L2 sensitivity its clipping or normalisation enforces, the
noise's standard deviation, and the released value.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True, kw_only=True)
class Release:
    """One release of private data, as its primitive made it."""

    mechanism: str  #: the primitive, e.g. "clipped_gradient_sum", "class_sums", "taylor_coefficients"
    #: the records read, one row each, as the primitive read them (None: the recording keeps no rows)
    rows: np.ndarray | None
    sensitivity: float  #: the bound on one record's contribution (L2 for Gaussian noise, L1 for Laplace)
    noise_scale: float  #: the noise's scale on every released coordinate: a Gaussian's σ, a Laplace's b
    noise: str = "gaussian"  #: "gaussian" or "laplace"
    value: np.ndarray | None = None  #: the released (noisy) values, flat, when the audit keeps them
    #: the parameters the release was computed at (a head's weight row by row, then its bias), flat, when
    #: the audit keeps values: what an update-integrity check replays the optimiser against
    state: np.ndarray | None = None
    #: ``attribution(rows, labels, value) -> (dots, norms)``: for each given record, the contribution c_i
    #: it would add to this release (clipped or normalised, at the release's own state, e.g. the head it
    #: was computed at) projected on ``value`` (⟨c_i, value⟩) and its norm ‖c_i‖; for canaries
    attribution: Callable[[np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]] | None = field(
        default=None, repr=False
    )

    @property
    def noise_multiplier(self) -> float:
        """The noise scale per unit of sensitivity, what a ledger states for this release: σ of a
        Gaussian release (its noise multiplier), b / Δ of a Laplace one (1/ε)."""
        return self.noise_scale / self.sensitivity if self.sensitivity > 0 else float("inf")

    def attribute(self, rows: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(⟨c_i, value⟩, ‖c_i‖) for each record (``rows``, ``labels``): what the adversary of the
        accountant computes for a canary it placed, whether or not this release read it."""
        if self.attribution is None or self.value is None:
            raise ValueError(f"this {self.mechanism} release was recorded without its value or attribution")
        return self.attribution(np.asarray(rows), np.asarray(labels), self.value)


class Recorder:
    """The releases of the code run inside :func:`recording`, in order (``keep_values``: with their
    released values, states and attributions, for a statistical audit; without, counts only;
    ``keep_rows``: with the rows they read, which an audit that knows where its canaries are skips)."""

    def __init__(self, *, keep_values: bool = False, keep_rows: bool = True) -> None:
        self.keep_values = keep_values
        self.keep_rows = keep_rows
        self.releases: list[Release] = []

    def add(self, release: Release) -> None:
        self.releases.append(release)


_RECORDER: ContextVar[Recorder | None] = ContextVar("dpcl_release_recorder", default=None)


@contextlib.contextmanager
def recording(*, keep_values: bool = False, keep_rows: bool = True) -> Iterator[Recorder]:
    """Record every release made inside the ``with`` block (this thread and context only)."""
    rec = Recorder(keep_values=keep_values, keep_rows=keep_rows)
    token = _RECORDER.set(rec)
    try:
        yield rec
    finally:
        _RECORDER.reset(token)


def listening() -> bool:
    """Whether a :func:`recording` is open (a primitive may skip building a report when not)."""
    return _RECORDER.get() is not None


def report(
    mechanism: str,
    *,
    rows: np.ndarray,
    sensitivity: float,
    noise_scale: float,
    noise: str = "gaussian",
    value: np.ndarray | None = None,
    attribution: Callable | None = None,
    state: tuple[np.ndarray, ...] = (),
) -> None:
    """Report one release to the open :func:`recording`, if any (copies what it keeps: the caller's
    buffers are reused across steps); ``state``: the parameter arrays the release was computed at, in
    order (kept flat, joined, when the recording keeps values)."""
    rec = _RECORDER.get()
    if rec is None:
        return
    rec.add(
        Release(
            mechanism=mechanism,
            rows=np.array(rows, copy=True) if rec.keep_rows else None,
            sensitivity=float(sensitivity),
            noise_scale=float(noise_scale),
            noise=noise,
            value=np.array(value, dtype=np.float64, copy=True).ravel()
            if rec.keep_values and value is not None
            else None,
            attribution=attribution if rec.keep_values else None,
            state=np.concatenate([np.ravel(a).astype(np.float64) for a in state])
            if rec.keep_values and state
            else None,
        )
    )
