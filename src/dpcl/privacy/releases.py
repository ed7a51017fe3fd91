"""Every release of private data, reported by the mechanism primitive that makes it, and every sample drawn
for one, reported by the sampling primitive that draws it.

A release (the noisy clipped gradient sum of a linear head, over a task, a memory buffer or one of its blocks;
the noisy clipped gradient sums of a network's adapters; the noisy class sums of unit-norm features; noisy
Taylor coefficients; Laplace-noised acquisition scores; a task's released label space) goes through
:func:`publish` with what it read, how it was noised and what it returns. A Poisson sample of the records
that a release will read is drawn by :mod:`dpcl.privacy.sampling`, which reports it with :func:`sampled`
(the population it drew from and the rate it used). Outside an audit nothing listens: both return after
one context-variable read (and :func:`publish` returns what it was given). An audit opens
:func:`recording`, runs a learner's ordinary code, and receives every release and sample of the run, in
order, whether or not the learner's ledger expects it and whether or not the learner cooperates: the
report is made by the primitive, not by the learner.

**Replay.** A recording opened with ``replay=`` (the releases of an earlier recording, kept with their
payloads) makes every primitive return, in order, what the earlier run released instead of what it just
computed: the post-processing check runs a learner on other private data with the same public inputs and
compares every released byte (:mod:`dpcl.stages.postprocessing`). The primitive still computes (and
draws its randomness) as usual, so every random stream advances as it would; a release that differs
from the recorded one in anything public (its primitive, its sensitivity, its noise, the shape and type
of what it returns), or one more than was recorded, raises :class:`ReplayDiverged`, and the recording
keeps the reason even if the learner catches the error.

What a release states is what the adversary of the accountant needs and nothing the learner chooses to
say: the records it read (their rows, as the primitive read them, so that an audit can tell which
individuals they are by their content), the L2 sensitivity its clipping or normalisation enforces, the
noise's standard deviation, and the released value.

**Canaries.** A recording may carry an audit's canaries (``canaries=``: their rows, as the primitive reads
them, and their labels). A primitive whose releases depend on a state that changes from release to
release (a network's, whose clipped per-sample gradients only the live model gives) attributes them
at release time: :func:`canaries_read` gives it the canaries when the release read any of them, and the
attribution it reports returns what it computed then.

**Threads.** A recording sees the releases of its own thread and context. While one is open anywhere in
the process, a primitive called outside it (a worker thread the learner started) refuses to release
rather than go unrecorded.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True, kw_only=True)
class Release:
    """One release of private data, as its primitive made it."""

    mechanism: str  #: the primitive, e.g. "clipped_gradient_sum", "class_sums", "taylor_coefficients"
    #: the records read, one row each, as the primitive read them (None: the recording keeps no rows, or
    #: the release reads no rows of features: a label release reads the labels' counts)
    rows: np.ndarray | None
    sensitivity: float  #: the bound on one record's contribution (L2 for Gaussian noise, L1 for Laplace)
    noise_scale: float  #: the noise's scale on every released coordinate: a Gaussian's σ, a Laplace's b
    noise: str = "gaussian"  #: "gaussian", "laplace" or "tsgd" (k-TSGD label release)
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
    #: what the primitive returned, exactly (a copy: arrays, tensors, or a tuple or list of them), when the
    #: recording keeps payloads: what a replay returns
    payload: Any = field(default=None, repr=False)
    #: how the payload's shape relates to the data (:data:`LAYOUTS`): "fixed" by the public plan, "set" (a
    #: released set, whose size is part of its value: a label space), "per_record" (one value per row read)
    layout: str = "fixed"

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


@dataclass(frozen=True, kw_only=True)
class Sample:
    """One sample of records drawn for a release, as its sampling primitive drew it."""

    mechanism: str  #: the sampling: "poisson" (each record independently, at its ``rate``)
    #: the population drawn from, one row per record, as the primitive saw it (None: not kept)
    rows: np.ndarray | None
    #: the inclusion probability the primitive used: one rate, or one per record of the population
    rate: float | np.ndarray
    drawn: np.ndarray  #: the positions (into ``rows``) of the records drawn

    def rates(self) -> np.ndarray:
        """One inclusion probability per record of the population."""
        n = len(self.rows) if self.rows is not None else 0
        return np.broadcast_to(np.asarray(self.rate, dtype=np.float64), (n,))


#: the layouts of a release's payload (:attr:`Release.layout`)
LAYOUTS = ("fixed", "set", "per_record")


class ReplayDiverged(RuntimeError):
    """A replayed run made a release that the recorded run did not make (or made differently in public)."""


class OutsideRecording(RuntimeError):
    """A primitive was called outside the recording open in this process (from another thread)."""


class Recorder:
    """The releases and samples of the code run inside :func:`recording`, in order (``keep_values``: with
    their released values, states and attributions, for a statistical audit; ``keep_rows``: with the rows
    they read, which an audit that knows where its canaries are skips; ``keep_payloads``: with what each
    primitive returned, for a later replay; ``keep_samples``: with every sample drawn, its population's
    rows too if ``keep_rows``; ``replay``: the releases a replayed run returns, in order; ``canaries``:
    an audit's canaries, (rows, labels), that a primitive attributes at release time)."""

    def __init__(
        self,
        *,
        keep_values: bool = False,
        keep_rows: bool = True,
        keep_payloads: bool = False,
        keep_samples: bool = False,
        replay: Sequence[Release] | None = None,
        canaries: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> None:
        self.keep_values = keep_values
        self.keep_rows = keep_rows
        self.keep_payloads = keep_payloads
        self.keep_samples = keep_samples
        self.replay = None if replay is None else list(replay)
        if self.replay is not None and any(r.payload is None for r in self.replay):
            raise ValueError("a replay needs releases recorded with their payloads (keep_payloads=True)")
        #: the canaries' rows, labels and the rows' bytes (what a release's rows are matched by)
        self.canaries: tuple[np.ndarray, np.ndarray, set[bytes]] | None = None
        if canaries is not None:
            rows, labels = (np.asarray(a) for a in canaries)
            if len(rows) != len(labels) or not len(rows):
                raise ValueError("canaries must be (rows, labels) of one non-zero length")
            if not keep_values:
                raise ValueError(
                    "a recording attributes canaries only when it keeps values (keep_values=True)"
                )
            self.canaries = (rows, labels, {np.ascontiguousarray(r).tobytes() for r in rows})
        self.releases: list[Release] = []
        self.samples: list[Sample] = []
        #: why the replayed run left the recorded one (the first divergence), None while it follows it
        self.diverged: str | None = None

    def add(self, release: Release) -> None:
        self.releases.append(release)

    def unreplayed(self) -> int:
        """How many recorded releases a replayed run has not made (0 when it made them all)."""
        return 0 if self.replay is None else max(0, len(self.replay) - len(self.releases))


_RECORDER: ContextVar[Recorder | None] = ContextVar("dpcl_release_recorder", default=None)
_OPEN = 0  # recordings open in this process, any thread
_OPEN_LOCK = threading.Lock()


@contextlib.contextmanager
def recording(
    *,
    keep_values: bool = False,
    keep_rows: bool = True,
    keep_payloads: bool = False,
    keep_samples: bool = False,
    replay: Sequence[Release] | None = None,
    canaries: tuple[np.ndarray, np.ndarray] | None = None,
) -> Iterator[Recorder]:
    """Record every release and sample made inside the ``with`` block (this thread and context; a
    primitive called from another thread meanwhile refuses); with ``replay`` every primitive returns the
    recorded release's payload instead of its own; ``canaries`` (rows, labels) are attributed at release
    time by the primitives that need to (module docstring)."""
    global _OPEN
    rec = Recorder(
        keep_values=keep_values,
        keep_rows=keep_rows,
        keep_payloads=keep_payloads,
        keep_samples=keep_samples,
        replay=replay,
        canaries=canaries,
    )
    token = _RECORDER.set(rec)
    with _OPEN_LOCK:
        _OPEN += 1
    try:
        yield rec
    finally:
        with _OPEN_LOCK:
            _OPEN -= 1
        _RECORDER.reset(token)


def _current() -> Recorder | None:
    rec = _RECORDER.get()
    if rec is None and _OPEN:
        raise OutsideRecording(
            "a release or sample outside the audit's recording (another thread?): while an audit records, "
            "every mechanism primitive must run in the thread that opened the recording"
        )
    return rec


def listening() -> bool:
    """Whether a :func:`recording` is open (a primitive may skip building a report when not)."""
    return _current() is not None


def keeps_samples() -> bool:
    """Whether an open :func:`recording` keeps samples (a sampling primitive gathers its population's rows
    only then)."""
    rec = _current()
    return rec is not None and rec.keep_samples


def canaries_read(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The open recording's canaries (rows, labels) if a release that read ``rows`` read any of them (by
    content), else None: what a primitive attributes at release time (module docstring)."""
    rec = _current()
    if rec is None or rec.canaries is None:
        return None
    cx, cy, known = rec.canaries
    if not any(np.ascontiguousarray(r).tobytes() in known for r in np.asarray(rows)):
        return None
    return cx, cy


def _copy(x: object) -> object:
    """An exact copy of a payload (arrays, tensors, and tuples or lists of them)."""
    if isinstance(x, tuple | list):
        return type(x)(_copy(v) for v in x)
    if isinstance(x, np.ndarray):
        return np.array(x, copy=True)
    if hasattr(x, "detach") and hasattr(x, "clone"):  # a torch tensor (privacy/ imports no torch)
        return x.detach().clone()
    raise TypeError(f"a release's payload must be arrays or tensors, got {type(x).__name__}")


def _describe(x: Any) -> object:
    """The public form of a payload: its structure, shapes and element types (and a tensor's device)."""
    if isinstance(x, tuple | list):
        return (type(x).__name__, tuple(_describe(v) for v in x))
    if isinstance(x, np.ndarray):
        return ("ndarray", x.shape, str(x.dtype))
    return ("tensor", tuple(x.shape), str(x.dtype))


def _like(recorded: Any, computed: Any) -> Any:
    """A copy of ``recorded`` placed as ``computed`` is (a tensor on the computed one's device)."""
    if isinstance(recorded, tuple | list):
        return type(recorded)(_like(r, c) for r, c in zip(recorded, computed, strict=True))
    if isinstance(recorded, np.ndarray):
        return np.array(recorded, copy=True)
    return recorded.detach().clone().to(computed.device)


def publish(
    mechanism: str,
    payload: Any,
    *,
    rows: np.ndarray | None,
    sensitivity: float,
    noise_scale: float,
    noise: str = "gaussian",
    value: np.ndarray | None = None,
    attribution: Callable | None = None,
    state: tuple[np.ndarray, ...] = (),
    layout: str = "fixed",
):
    """Report one release to the open :func:`recording`, if any, and return what the primitive returns:
    ``payload`` itself, or under a replay the recorded release's payload (a copy, shaped and placed as
    ``payload``). ``value`` is the released vector a statistical audit reads (default: the payload, flat);
    ``state`` the parameter arrays the release was computed at, in order; ``rows`` the records read (None:
    none, e.g. a label release, which reads counts). What the recording keeps is copied (the caller's
    buffers are reused across steps).

    ``layout`` (:data:`LAYOUTS`) says what a replay may compare of the payload's shape: "fixed" (the
    default) all of it; "set" its type and number of dimensions only (a released set's size is part of
    its value); "per_record" (one value per row of ``rows``, an array) its type, and where the replayed
    run read another number of rows (a record added or removed), each row read on the recorded data gets
    its recorded value and any other row its own: under add/remove adjacency a per-record mechanism's
    output about the added record is that record's own release."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    rec = _current()
    if rec is None:
        return payload
    release = Release(
        mechanism=mechanism,
        rows=np.array(rows, copy=True) if rec.keep_rows and rows is not None else None,
        sensitivity=float(sensitivity),
        noise_scale=float(noise_scale),
        noise=noise,
        value=_flat(payload if value is None else value) if rec.keep_values else None,
        attribution=attribution if rec.keep_values else None,
        state=np.concatenate([np.ravel(a).astype(np.float64) for a in state])
        if rec.keep_values and state
        else None,
        payload=_copy(payload) if rec.keep_payloads else None,
        layout=layout,
    )
    if rec.replay is None:
        rec.add(release)
        return payload
    k = len(rec.releases)
    why = _divergence(rec.replay[k] if k < len(rec.replay) else None, release, payload, k)
    if why is not None:
        rec.diverged = rec.diverged or why
        raise ReplayDiverged(why)
    recorded = rec.replay[k]
    if layout == "per_record" and len(payload) != len(recorded.payload):
        replayed = _by_row(recorded, rows, payload)
    else:
        replayed = _like(recorded.payload, payload)
    rec.add(release)
    return replayed


def _by_row(recorded: Release, rows: np.ndarray | None, payload: Any) -> np.ndarray:
    """A per-record payload for ``rows``: each row read on the recorded data gets its recorded value, any
    other row (a record the recorded data lacks) the value just computed for it."""
    if recorded.rows is None or rows is None:
        raise ReplayDiverged(f"a per-record {recorded.mechanism} release cannot be aligned without its rows")
    at = {np.ascontiguousarray(r).tobytes(): i for i, r in enumerate(recorded.rows)}
    out = np.array(payload, copy=True)
    for i, r in enumerate(np.asarray(rows)):
        j = at.get(np.ascontiguousarray(r).tobytes())
        if j is not None:
            out[i] = recorded.payload[j]
    return out


def _divergence(recorded: Release | None, release: Release, payload, k: int) -> str | None:
    """Why ``release`` (the k-th of a replayed run) is not the recorded one in public, or None."""
    if recorded is None:
        return f"release {k + 1} ({release.mechanism}) was not made on the recorded data"
    for what, a, b in (
        ("primitive", recorded.mechanism, release.mechanism),
        ("sensitivity", recorded.sensitivity, release.sensitivity),
        ("noise scale", recorded.noise_scale, release.noise_scale),
        ("noise", recorded.noise, release.noise),
        ("layout", recorded.layout, release.layout),
        ("shape and type", _shape(recorded.payload, recorded.layout), _shape(payload, release.layout)),
    ):
        if a != b:
            return f"release {k + 1} ({recorded.mechanism}) has another {what}: {a!r} on the recorded data, {b!r} here"
    return None


def _shape(payload, layout: str) -> object:
    """What a replay compares of a payload's shape under its ``layout`` (:func:`publish`)."""
    if layout == "fixed":
        return _describe(payload)
    return ("ndarray", np.ndim(payload), str(np.asarray(payload).dtype))


def _flat(x) -> np.ndarray:
    """A payload's values as one flat float64 vector (tensors through their CPU copy)."""
    if isinstance(x, tuple | list):
        return np.concatenate([_flat(v) for v in x]) if len(x) else np.zeros(0)
    if isinstance(x, np.ndarray):
        return np.array(x, dtype=np.float64, copy=True).ravel()
    return np.asarray(x.detach().to("cpu").double().reshape(-1).numpy(), dtype=np.float64).copy()


def sampled(mechanism: str, drawn: np.ndarray, *, population: np.ndarray, rate: float | np.ndarray) -> None:
    """Report one sample to the open :func:`recording`, if any: the ``population`` it was drawn from
    (one row per record, read only when an audit listens), the inclusion probability ``rate`` (one, or
    one per record) and the positions ``drawn``."""
    rec = _current()
    if rec is None or not rec.keep_samples:
        return
    rec.samples.append(
        Sample(
            mechanism=mechanism,
            rows=np.array(population, copy=True) if rec.keep_rows else None,
            rate=float(rate) if np.ndim(rate) == 0 else np.array(rate, dtype=np.float64, copy=True),
            drawn=np.array(drawn, dtype=np.int64, copy=True),
        )
    )
