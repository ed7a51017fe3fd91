"""The noisy clipped gradient sum of a linear head over a Poisson sample: DP-SGD's mechanism, fast.

One release of the subsampled Gaussian mechanism on cached features, shared by every head-only learner
(:func:`dpcl.training.heads.train_head`, DP-A-GEM's two parts, Desai et al.'s buffer):

1. a Poisson sample of the records (:func:`dpcl.privacy.sampling.by_gaps`, or with a rate per record
   :func:`~dpcl.privacy.sampling.by_coins`: each record joins independently with probability q), drawn
   and reported to an audit by the sampling primitive;
2. the per-example gradients of the cross-entropy loss, clipped to norm C in closed form (for a linear
   head the gradient of example i is δ_i x_iᵀ and δ_i, so ‖g_i‖² = (‖x_i‖² + 1)‖δ_i‖²; no per-example
   gradient is materialised), summed;
3. N(0, σ²C²I) added to the weight and bias sums.

How it is fast (the law of the release is unchanged):

* **Sampling by gaps.** The gaps between successive members of a Poisson sample are independent
  Geometric(q) variables, so the sample is drawn with about q·n geometric draws instead of n uniform ones.
  Same distribution, different random stream (a run's bits differ from the record-by-record draw).
* **Float32 per-example work.** The cached features are float32 on disk; the batch's rows are gathered
  into a reused float32 buffer, and the batch × outputs arrays (logits, softmax, δ, the clipped δ) and
  the two products with the batch are float32. The norms are accumulated in float64 (‖x_i‖² + 1 once per
  dataset), and the clipping factors, the bias sum, the noise and the optimiser are float64.
* **One flat gradient.** A head's weight and bias are views of one float64 buffer
  (:class:`dpcl.training.heads.LinearHead`), and the release writes into a flat gradient of the same
  layout (``out``, reused across steps): the noise of both is one call (the same normals, in the same
  order, as a call for each) and Adam steps both in one pass.
* **A clipping margin for float32.** The clipping factor and the clipped δ_i are rounded to float32,
  which can lengthen a clipped gradient by a relative 2·2⁻²⁴; clipping to C·(1 − 2⁻²⁰) keeps every
  per-example gradient actually summed within C, so the sensitivity the accountant is told (C) holds for
  the arithmetic done. (As with float64, the rounding of the sum across examples is not modelled; the
  noise is float64.)
"""

from __future__ import annotations

import math

import numpy as np

from ..privacy import releases, sampling

#: clipping factor margin: a float32 rounding of the clipped δ_i lengthens it by at most 2⁻²⁴ (relative)
CLIP_MARGIN = 1.0 - 2.0**-20


#: logits more than this far below their row's maximum are raised to it before exp: their probabilities
#: (below e⁻⁶⁰ ≈ 1e-26) would otherwise become float32 subnormals, which slow every later product tenfold
FLOOR = -60.0


def softmax_(z: np.ndarray, active: np.ndarray | None = None) -> np.ndarray:
    """Row-wise softmax in place, over the ``active`` outputs only (the others get probability 0), each
    logit at most :data:`FLOOR` below its row's maximum (a change below 1e-26 in every probability)."""
    if active is not None:
        z[:, ~active] = -np.inf
    z -= z.max(axis=1, keepdims=True)
    np.maximum(z, FLOOR, out=z)
    np.exp(z, out=z)
    if active is not None:
        z[:, ~active] = 0.0
    z /= z.sum(axis=1, keepdims=True)
    return z


class HeadData:
    """A dataset prepared for the head's gradient sums: float32 features, labels, ‖x_i‖² + 1 in float64."""

    def __init__(self, x: np.ndarray, y: np.ndarray) -> None:
        self.x = np.ascontiguousarray(x, dtype=np.float32)
        self.y = np.asarray(y, dtype=np.int64)
        if self.x.ndim != 2 or self.y.shape != (len(self.x),):
            raise ValueError(f"features must be (n, dim) with one label per row, got {x.shape} and {y.shape}")
        self.sq1 = np.einsum("ij,ij->i", self.x, self.x, dtype=np.float64) + 1.0
        self._rows = np.empty((0, self.x.shape[1]), dtype=np.float32)

    def __len__(self) -> int:
        return len(self.y)

    def rows(self, batch: np.ndarray) -> np.ndarray:
        """The batch's feature rows (``batch``: sorted distinct indices), gathered into a reused buffer
        (valid until the next call); a batch of every record (sampling rate 1) is the features themselves,
        read in place (not to be written to)."""
        if len(batch) == len(self.x) and (not len(batch) or (batch[0] == 0 and batch[-1] == len(batch) - 1)):
            return self.x  # sorted, distinct, from 0 to n − 1: every record in order, nothing to gather
        if len(batch) > len(self._rows):
            self._rows = np.empty((max(len(batch), 2 * len(self._rows)), self.x.shape[1]), dtype=np.float32)
        return np.take(self.x, batch, axis=0, out=self._rows[: len(batch)], mode="clip")


def logit_grads32(
    w: np.ndarray, b: np.ndarray, xb: np.ndarray, yb: np.ndarray, active: np.ndarray | None
) -> np.ndarray:
    """δ_i = softmax(z_i) − e_{y_i} with z = x Wᵀ + b, in float32 (batch × outputs: with a large label
    space, e.g. Public Labels ×1000, these are the step's largest arrays)."""
    z = xb @ w.astype(np.float32).T
    z += b.astype(np.float32)
    p = softmax_(z, active)
    p[np.arange(len(yb)), yb] -= 1.0
    return p


def clip_factors(sq1: np.ndarray, delta: np.ndarray, clip: float) -> np.ndarray:
    """c_i = min(1, C·(1 − 2⁻²⁰) / ‖g_i‖) with ‖g_i‖² = (‖x_i‖² + 1)‖δ_i‖², accumulated in float64."""
    norms = np.sqrt(sq1 * np.einsum("ij,ij->i", delta, delta, dtype=np.float64))
    return np.minimum(1.0, (clip * CLIP_MARGIN) / np.maximum(norms, 1e-12))


def clipped_sum(
    data: HeadData, w: np.ndarray, b: np.ndarray, batch: np.ndarray, *, clip: float, active: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, int]:
    """(Σ clip(g_i) weight part (float32), bias part (float64), how many were clipped) over ``batch``.

    ``clip = inf``: no clipping (the non-private twin). ``active`` (bool per output) restricts the softmax
    to a subset of the head's outputs (the Naive and memory baselines' seen labels); None: all outputs.
    Each example's clipped δ_i is rounded to float32 (c_i too): the clipping margin covers both roundings.
    """
    if not len(batch):
        return np.zeros(w.shape, dtype=np.float32), np.zeros(b.shape), 0
    xb = data.rows(batch)
    d = logit_grads32(w, b, xb, data.y[batch], active)
    n_clipped = 0
    if math.isfinite(clip):
        c = clip_factors(data.sq1[batch], d, clip)
        n_clipped = int(np.count_nonzero(c < 1.0))
        d *= c.astype(np.float32)[:, None]
    return d.T @ xb, d.sum(axis=0, dtype=np.float64), n_clipped


def noisy_clipped_sum(
    data: HeadData,
    w: np.ndarray,
    b: np.ndarray,
    *,
    rate: float | np.ndarray,
    clip: float,
    sigma: float,
    gen: np.random.Generator,
    active: np.ndarray | None = None,
    out: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """One release: (g_w, g_b) = Σ clip_C(g_i) over a Poisson sample + N(0, σ²C²I), float64; also the
    sample's indices and how many of its examples were clipped (diagnostics, not private).

    g_w and g_b are views of one flat float64 array, the weight row by row, then the bias (the layout of
    :class:`dpcl.training.heads.LinearHead`'s ``params``): ``out`` (``w.size + b.size`` elements,
    overwritten) when given, else a new one.

    Random draws in this order from ``gen``: the sample (``rate`` a float: by gaps; an array: one uniform
    per record), then the weight noise, then the bias noise (none when σ = 0), drawn in one call over the
    flat array (the same normals, in the same order, as one call for the weight and one for the bias).
    """
    n = len(data)
    batch = (
        sampling.by_gaps(gen, n, rate, population=data.x)
        if np.ndim(rate) == 0
        else sampling.by_coins(gen, n, rate, population=data.x)
    )
    s_w, s_b, n_clipped = clipped_sum(data, w, b, batch, clip=clip, active=active)
    g = np.empty(w.size + b.size) if out is None else out
    g_w, g_b = g[: w.size].reshape(w.shape), g[w.size :]
    if sigma > 0:
        gen.standard_normal(out=g)
        g *= sigma * clip
        g_w += s_w
        g_b += s_b
    else:
        g_w[...] = s_w
        g_b[...] = s_b
    if releases.listening():  # an audit sees every release, and may replay it (dpcl.privacy.releases)
        released = releases.publish(
            "clipped_gradient_sum",
            g,
            rows=data.x[batch],
            sensitivity=clip,
            noise_scale=sigma * clip,
            attribution=head_attribution(w, b, clip=clip, active=active),
            state=(w, b),
        )
        if released is not g:  # a replay: the recorded release, in the caller's buffer
            g[...] = released
    return g_w, g_b, batch, n_clipped


def head_attribution(w: np.ndarray, b: np.ndarray, *, clip: float, active: np.ndarray | None):
    """``(rows, labels, value) -> (dots, norms)`` of a release at this head (:mod:`dpcl.privacy.releases`):
    the weight block of record i's clipped gradient, c_i = min(1, C / ‖g_i‖)·δ_i x_iᵀ, projected on the
    weight block of the flat release ``value`` (the layout of :func:`noisy_clipped_sum`'s), and its norm
    min(1, C / ‖g_i‖)·‖δ_i‖·‖x_i‖; computed without materialising c_i (a canary audit attributes thousands
    of wide records). The bias block is left out: every record adds to it, so its projection would carry
    the other records' gradients, a term shared by every canary of the release (their trials would no
    longer be independent), for at most 1/√(‖x_i‖² + 1) of the canary's signal."""
    # the state of the release (the caller reuses and updates these arrays, the active outputs included)
    w, b = np.array(w, copy=True), np.array(b, copy=True)
    active = None if active is None else np.array(active, copy=True)

    def attribution(rows: np.ndarray, labels: np.ndarray, value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # the wide products in float32, the features' type (a canary audit's rows are thousands of columns
        # wide: a float64 copy of them per release was most of its time); the small ones in float64
        x = np.asarray(rows, dtype=np.float32)
        d = logit_grads32(w, b, x, np.asarray(labels, dtype=np.int64), active).astype(np.float64)
        sq = np.einsum("ij,ij->i", x, x).astype(np.float64)
        c = clip_factors(sq + 1.0, d, clip) if math.isfinite(clip) else np.ones(len(x))
        v_w = value[: w.size].reshape(w.shape).astype(np.float32)
        dots = c * np.einsum("ij,ij->i", d, (x @ v_w.T).astype(np.float64))
        return dots, c * np.sqrt(np.einsum("ij,ij->i", d, d) * sq)

    return attribution
