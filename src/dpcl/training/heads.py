"""DP-SGD for a linear head on cached features, with closed-form per-sample clipping.

[LabelSpace] Alg. 2 (head-only PEFT), App. D.1. Each step samples
every example independently with probability q (Poisson sampling), computes the
per-example gradient g_i of the cross-entropy loss, clips it to norm C, sums, adds
N(0, σ²C²I) and takes an Adam step. For a linear head z = Wx + b the per-example
gradient is δ_i x_iᵀ (weight) and δ_i (bias) with δ_i = softmax(z_i) − e_{y_i}, so::

    ‖g_i‖² = ‖x_i‖² ‖δ_i‖² + ‖δ_i‖²,

and the clipped sum is (c ⊙ Δ)ᵀ X with c_i = min(1, C/‖g_i‖): no per-example gradient
is ever materialised (the identity is tested against opacus's per-sample gradients). The
release itself — sampling, clipping, noise — is :func:`dpcl.training.clipped_sum.noisy_clipped_sum`
(products with the batch in float32, clipping with a margin for their rounding) and the step
:class:`dpcl.training.adam.Adam`.

Privacy: q and the number of steps are configured, not derived from the (private)
dataset size, and the noisy sum is divided by a configured constant (``normaliser``),
never by the realised or expected batch size, so the released parameters are exactly
the Poisson-subsampled Gaussian mechanism composed ``steps`` times, accounted by
:mod:`dpcl.privacy.sgd_accounting`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .adam import Adam
from .clipped_sum import HeadData, noisy_clipped_sum, softmax_


@dataclass(frozen=True)
class DPSGDConfig:
    """Hyperparameters of one DP-SGD run (App. D.1, Table A2)."""

    sample_rate: float = 0.25  # Poisson sampling rate q
    epochs: float = 40.0  # steps = round(epochs / q), independent of the data size
    lr: float = 1e-2  # Adam learning rate
    clip: float = 1.0  # per-example L2 clipping bound C (inf: no clipping, non-private twin)
    normaliser: float = 128.0  # the noisy sum is divided by this public constant
    betas: tuple[float, float] = (0.9, 0.999)
    adam_eps: float = 1e-8

    @property
    def steps(self) -> int:
        return max(1, int(round(self.epochs / self.sample_rate)))

    def validate(self) -> None:
        if not 0 < self.sample_rate <= 1:
            raise ValueError(f"sample_rate must lie in (0, 1], got {self.sample_rate}")
        for name in ("epochs", "lr", "normaliser"):
            v = getattr(self, name)
            if not (v > 0 and math.isfinite(v)):
                raise ValueError(f"{name} must be positive and finite, got {v}")
        if not self.clip > 0:
            raise ValueError(f"clip must be positive (inf: no clipping, non-private only), got {self.clip}")

    @classmethod
    def from_block(cls, block: dict) -> DPSGDConfig:
        """From a config ``dpsgd`` block (or a resolved one): the declaration of how fixed values were
        chosen (:data:`CHOSEN_WITH_PRIVATE_DATA`) is not a hyperparameter and is left out."""
        return cls(**{k: v for k, v in block.items() if k != CHOSEN_WITH_PRIVATE_DATA})


#: a ``dpsgd`` block's optional statement that its fixed values were chosen with private data
#: (how); an untuned run then lists that choice under unaccounted_uses (dpcl.stages.common.hyperparameters_note)
CHOSEN_WITH_PRIVATE_DATA = "chosen_with_private_data"


def per_sample_grad_norms(x: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """‖g_i‖ of the linear head's per-example gradient (weight and bias), closed form, float64: the
    identity's reference form (training uses :func:`dpcl.training.clipped_sum.clip_factors`)."""
    return np.sqrt((np.einsum("ij,ij->i", x, x) + 1.0) * np.einsum("ij,ij->i", delta, delta))


def logit_grads(
    w: np.ndarray, b: np.ndarray, x: np.ndarray, y: np.ndarray, mask: np.ndarray | None
) -> np.ndarray:
    """δ_i = ∂ℓ_i/∂z_i = softmax(z_i) − e_{y_i} for cross-entropy over the unmasked outputs, float64 (the
    reference form; training uses :func:`dpcl.training.clipped_sum.logit_grads32`)."""
    p = softmax_(x @ w.T + b, mask)
    p[np.arange(len(y)), y] -= 1.0
    return p


class LinearHead:
    """Zero-initialised linear head (paper App. D: the last layer is set to zero).

    The weight ``w`` (outputs × dim) and the bias ``b`` are views of one flat float64 buffer, ``params``
    (the weight row by row, then the bias), so that a DP-SGD step draws the noise of both in one call and
    Adam updates both in one pass (:func:`train_head`). Write into ``w`` and ``b``; they cannot be rebound.
    """

    def __init__(self, dim: int, n_out: int) -> None:
        self._set(np.zeros(n_out * dim + n_out), n_out, dim)

    def _set(self, params: np.ndarray, n_out: int, dim: int) -> None:
        self.params = params
        self._w = params[: n_out * dim].reshape(n_out, dim)
        self._b = params[n_out * dim :]

    @property
    def w(self) -> np.ndarray:
        return self._w

    @property
    def b(self) -> np.ndarray:
        return self._b

    def __getstate__(self) -> dict:  # copies and pickles keep w and b views of params
        return {"params": self.params, "shape": self._w.shape}

    def __setstate__(self, state: dict) -> None:
        self._set(state["params"], *state["shape"])

    def logits(self, x: np.ndarray) -> np.ndarray:
        return x @ self.w.T + self.b


def train_head(
    head: LinearHead,
    x: np.ndarray,
    y: np.ndarray,
    cfg: DPSGDConfig,
    noise_multiplier: float,
    rng: np.random.Generator,
    *,
    active: np.ndarray | None = None,
    record_rates: np.ndarray | None = None,
    steps: int | None = None,
    after_step: Callable[[int], None] | None = None,
) -> dict:
    """Train ``head`` in place with DP-SGD (``noise_multiplier = 0``: the non-private twin).

    ``y`` are row indices into the head's outputs; ``active`` (bool per output) restricts
    the softmax to a subset of outputs (used by the Naive baseline). With no data at all
    the run still takes every step (noise only): the released head is a proper,
    randomly perturbed classifier (App. B, Prop. B.6), never "no model".

    ``record_rates`` gives every record its own Poisson rate ([Schwethelm2025]'s step amplification:
    record i joins each batch independently with probability record_rates[i]; the noisy sum
    is still divided by the public ``cfg.normaliser``, the planned expected batch size), and
    ``steps`` overrides the configured step count (a schedule's segment).

    Each step's privatized gradient sum is made, and reported to an audit that listens, by the mechanism
    primitive (:func:`dpcl.training.clipped_sum.noisy_clipped_sum`); the head then takes Adam's step on
    exactly that release (what :mod:`dpcl.audits.integrity` checks).
    ``after_step(step)``, if given, is called after each step's update (a tuning trial's checkpoints,
    :func:`dpcl.training.tuning.tune_dpsgd`); it may raise to stop the training.
    """
    cfg.validate()
    if noise_multiplier < 0:
        raise ValueError(f"noise_multiplier must be >= 0, got {noise_multiplier}")
    if noise_multiplier > 0 and math.isinf(cfg.clip):
        raise ValueError("a private run needs a finite clipping bound")
    x = np.asarray(x, dtype=np.float32)
    data = HeadData(x if x.size else x.reshape(0, head.w.shape[1]), y)
    n = len(data)
    if n and (data.y.min() < 0 or data.y.max() >= len(head.b)):
        raise ValueError("labels must index the head's outputs")
    if record_rates is not None:
        record_rates = np.asarray(record_rates, dtype=np.float64)
        if record_rates.shape != (n,) or np.any((record_rates < 0) | (record_rates > 1)):
            raise ValueError("record_rates must give every record a rate in [0, 1]")
    n_steps = cfg.steps if steps is None else int(steps)
    if n_steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    rate = cfg.sample_rate if record_rates is None else record_rates
    adam = Adam.for_head(head, cfg)
    grad = np.empty_like(head.params)  # each step's privatized gradient, flat as the head's parameters
    clipped_fraction = 0.0
    inclusions = np.zeros(n, dtype=np.int64) if record_rates is not None else None
    for step in range(1, n_steps + 1):
        g_w, g_b, batch, n_clipped = noisy_clipped_sum(
            data,
            head.w,
            head.b,
            rate=rate,
            clip=cfg.clip,
            sigma=noise_multiplier,
            gen=rng,
            active=active,
            out=grad,
        )
        if inclusions is not None:
            inclusions[batch] += 1
        if len(batch):
            clipped_fraction += n_clipped / len(batch)
        adam.step([grad])  # g_w and g_b are views of grad
        if after_step is not None:
            after_step(step)
    out = {
        "steps": n_steps,
        "sample_rate": cfg.sample_rate if record_rates is None else "per record",
        "clip": cfg.clip,
        "noise_multiplier": float(noise_multiplier),
        "mean_clipped_fraction": clipped_fraction / n_steps,
    }
    if inclusions is not None:  # per-record batch counts (NOT private: diagnostics and tests only)
        out["inclusions"] = inclusions.tolist()
    return out
