"""The arithmetic precision of FiLM's forward and backward passes (config key ``film.precision``).

* ``fp32`` (default): every product in float32, as the backbone was trained.
* ``tf32``: CUDA's TensorFloat-32 in matrix products and convolutions (10-bit mantissa inputs, float32
  accumulation; Ampere and later GPUs), through torch's public flags, set only while the passes run.
* ``bf16``: the forward pass under ``torch.autocast`` in bfloat16 (the backward follows it); norm layers
  stay in float32 where autocast keeps them there.

What stays in true float32 (or float64) in every mode is what the privacy guarantee rests on
(:func:`dpcl.training.film.clipped_grad_sum`): the head (its logits, their gradients e_i, the features
f_i in float32), the per-sample norms (accumulated in float64), the clipping factors (float64, then
float32), the clipped sums (float32 products, computed outside these contexts: never TF32) and the noise
(float32 from a CPU generator). A lower precision changes *which* vector g_i the backward computes for
sample i (a rounded approximation of its gradient, a function of that sample and the model alone), not
the bound: each g_i is clipped as computed, to C·(1 − 2⁻²⁰), which covers the float32 rounding of the
factor and of the products (the heads' margin, :data:`dpcl.training.clipped_sum.CLIP_MARGIN`), so every
sample's contribution to the sum stays within C, the sensitivity the accountant is told. (As for the
heads, the rounding of the sum across samples is not modelled.) fp16 with a loss scaler is not offered:
its overflow checks skip steps depending on the batch's gradients, a data-dependent release.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

PRECISIONS = ("fp32", "tf32", "bf16")


def check_precision(precision: str, device, *, key: str = "film.precision") -> None:
    """Refuse an unknown ``precision`` or TF32 off CUDA (a CPU has no TF32 mode: the run would be fp32
    while saying otherwise), naming the config ``key``."""
    if precision not in PRECISIONS:
        raise ValueError(f"{key} must be one of {list(PRECISIONS)}, got {precision!r}")
    if precision == "tf32" and torch.device(device).type != "cuda":
        raise ValueError(
            f"{key} tf32 is a CUDA mode (TensorFloat-32 matrix units), but this job computes on "
            f"{torch.device(device).type}: use fp32, or bf16 (autocast, also on CPUs)"
        )


@contextmanager
def reduced_precision(precision: str, device, *, forward: bool = True) -> Iterator[None]:
    """Run the enclosed pass at ``precision`` on ``device``: TF32 flags on (restored on exit), or, for
    the forward pass (``forward``), bfloat16 autocast; fp32 does nothing."""
    if precision == "fp32" or (precision == "bf16" and not forward):
        yield
        return
    if precision == "bf16":
        with torch.autocast(torch.device(device).type, dtype=torch.bfloat16):
            yield
        return
    if precision != "tf32":
        raise ValueError(f"precision must be one of {list(PRECISIONS)}, got {precision!r}")
    with _tf32(True):
        yield


@contextmanager
def full_precision(device) -> Iterator[None]:
    """float32 products inside, whatever encloses it: autocast off and TF32 off (restored on exit). The
    head, the norms and the clipped sums run here."""
    with _tf32(False), torch.autocast(torch.device(device).type, enabled=False):
        yield


@contextmanager
def _tf32(on: bool) -> Iterator[None]:
    """torch's public TF32 flags (matrix products and cuDNN) set to ``on`` inside, restored on exit."""
    old = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = on
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old
