"""FiLM's model surgery: which parameters of a pre-trained backbone FiLM trains ([LabelSpace] App. D).

FiLM trains every normalisation layer's scale and bias (LayerNorm, GroupNorm, BatchNorm;
:func:`film_parameter_names`) plus a linear head; everything else is frozen. A BatchNorm trains only
with frozen running statistics (:func:`freeze_batchnorm`, :class:`FrozenBatchNorm`): a fixed
per-channel affine map in which no sample influences another; a BatchNorm that would use the batch's
statistics is refused (:func:`check_per_sample`). The per-sample gradients are
:mod:`dpcl.training.film_per_sample`'s: the layers' own backward where every FiLM layer allows it, else
opacus's hooks with the samplers registered here (:func:`register_grad_samplers`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import norm_samplers

#: torch's BatchNorm layers (its public classes; timm's BatchNormAct2d subclasses BatchNorm2d)
BATCH_NORMS = (
    nn.BatchNorm1d,
    nn.BatchNorm2d,
    nn.BatchNorm3d,
    nn.SyncBatchNorm,
    nn.LazyBatchNorm1d,
    nn.LazyBatchNorm2d,
    nn.LazyBatchNorm3d,
)


class FrozenBatchNorm(nn.Module):
    """A BatchNorm with frozen running statistics: a fixed per-channel affine map (FiLM, App. D).

    ``y = act(drop(γ · (x − μ) / √(σ² + ε) + β))`` with the running mean μ and variance σ² as
    buffers, in training *and* evaluation mode (it is ``F.batch_norm(..., training=False)``,
    bit for bit what an eval-mode BatchNorm computes), so no sample's output depends on
    another's and the per-sample gradients of γ (``weight``) and β (``bias``) are well defined.
    ``act`` and ``drop`` keep the activation of timm's ``BatchNormAct2d`` (Identity for a plain
    BatchNorm). Made by :func:`freeze_batchnorm`, which keeps the parameter names, so a member's
    FiLM names are the same on the original and the frozen backbone.
    """

    def __init__(self, bn: nn.Module) -> None:
        super().__init__()
        if not bn.track_running_stats or bn.running_mean is None or bn.running_var is None:
            raise ValueError(
                f"{type(bn).__name__} without running statistics (track_running_stats=False) always "
                "normalises with the batch's statistics: it cannot be frozen for FiLM"
            )
        drop = getattr(bn, "drop", None)
        if drop is not None and not norm_samplers.is_identity(drop):
            raise ValueError(f"{type(bn).__name__} has a stochastic drop layer {drop!r}: cannot freeze it")
        self.num_features = bn.num_features
        self.eps = float(bn.eps)
        self.weight = bn.weight  # the same Parameter objects (or None when affine=False)
        self.bias = bn.bias
        self.register_buffer("running_mean", bn.running_mean.detach().clone())
        self.register_buffer("running_var", bn.running_var.detach().clone())
        self.drop = drop if drop is not None else nn.Identity()
        act = getattr(bn, "act", None)
        self.act = act if act is not None else nn.Identity()
        self.train(bn.training)

    def normalise(self, x: torch.Tensor, affine: bool = True) -> torch.Tensor:
        w, b = (self.weight, self.bias) if affine else (None, None)
        return F.batch_norm(x, self.running_mean, self.running_var, w, b, False, 0.0, self.eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.drop(self.normalise(x)))

    def extra_repr(self) -> str:
        return f"{self.num_features}, eps={self.eps}, affine={self.weight is not None}, frozen statistics"


def _frozen_input(layer: FrozenBatchNorm, x: torch.Tensor) -> torch.Tensor:
    return layer.normalise(x, affine=False)


def register_grad_samplers() -> None:
    """opacus's samplers for the frozen BatchNorm and timm's norm classes (:mod:`dpcl.training.norm_samplers`),
    through opacus's public ``register_grad_sampler``: ∂L/∂γ of sample n, channel c is Σ over positions of
    (∂L/∂z)·x̂ with x̂ recomputed from opacus's captured input (for the frozen BatchNorm normalised by the
    running statistics), ∂L/∂β is Σ ∂L/∂z, after the pull-back through the layer's activation."""
    samplers = norm_samplers.timm_samplers()
    samplers[FrozenBatchNorm] = norm_samplers.norm_sampler(_frozen_input, channels="first", act=True)
    norm_samplers.register(samplers)


def freeze_batchnorm(model: nn.Module) -> int:
    """Replace every BatchNorm in ``model`` (in place; timm's ``BatchNormAct2d`` with its
    activation) by a :class:`FrozenBatchNorm` with its running statistics and the *same*
    weight and bias parameters; returns how many. Eval-mode outputs are unchanged bit for bit;
    in training mode the layer no longer mixes samples through batch statistics. Idempotent.
    """
    if isinstance(model, BATCH_NORMS):
        raise ValueError("freeze_batchnorm replaces submodules: pass the model that contains the BatchNorm")
    count = 0
    for parent in list(model.modules()):
        for child_name, child in list(parent.named_children()):
            if isinstance(child, BATCH_NORMS):
                setattr(parent, child_name, FrozenBatchNorm(child))
                count += 1
    return count


NORM_TYPES = (nn.LayerNorm, nn.GroupNorm, *BATCH_NORMS, FrozenBatchNorm)


def _is_norm(module: nn.Module) -> bool:
    """A normalisation layer: LayerNorm, GroupNorm, BatchNorm or a frozen BatchNorm (and subclasses)."""
    return isinstance(module, NORM_TYPES)


def film_parameter_names(model) -> list[str]:
    """Names (in ``model.named_parameters()`` order) of the FiLM parameters: the scale (weight)
    and shift (bias) of every normalisation layer, LayerNorm, GroupNorm and BatchNorm
    (trained only with frozen statistics, see :func:`freeze_batchnorm`), subclasses
    included. ViT-B/16: 50 tensors, 38,400 values; EfficientNet-Lite0: 49 BatchNorms, 98
    tensors, 42,016 values."""
    names = []
    for mod_name, module in model.named_modules():
        if _is_norm(module):
            for p_name, _ in module.named_parameters(recurse=False):
                names.append(f"{mod_name}.{p_name}" if mod_name else p_name)
    if not names:
        raise ValueError(
            f"{type(model).__name__} has no normalisation layer (LayerNorm, GroupNorm, BatchNorm) with "
            "affine parameters: FiLM needs one"
        )
    return names


def film_parameter_count(model) -> int:
    """Number of FiLM parameters: 38,400 for ViT-B/16 (App. D), 42,016 for EfficientNet-Lite0."""
    params = dict(model.named_parameters())
    return sum(params[n].numel() for n in film_parameter_names(model))


def check_per_sample(model: nn.Module) -> None:
    """Refuse a backbone in which one sample could influence another's output or gradient.

    A layer with running statistics that is not a :class:`FrozenBatchNorm` (a BatchNorm,
    SyncBatchNorm, timm's BatchNormAct2d or an EvoNorm-B) normalises with the *batch's*
    statistics in training mode, which FiLM DP-SGD needs for its hooks: every sample's output
    and gradient would depend on the others (no per-sample gradient, no DP). A trainable layer
    with other buffers is refused too (opacus's validator refuses them all; frozen running
    statistics are constants of the pre-trained model, not data).
    """
    mixing, buffered = [], []
    for name, m in model.named_modules():
        if isinstance(m, FrozenBatchNorm):
            continue
        running = [b for b, _ in m.named_buffers(recurse=False) if b.startswith("running_")]
        if isinstance(m, BATCH_NORMS) or running:
            mixing.append(f"{name or '<root>'} ({type(m).__name__})")
        elif any(p.requires_grad for p in m.parameters(recurse=False)) and any(
            True for _ in m.buffers(recurse=False)
        ):
            buffered.append(f"{name or '<root>'} ({type(m).__name__})")
    if mixing:
        raise ValueError(
            f"FiLM DP-SGD refuses {len(mixing)} BatchNorm-type layer(s) with batch statistics, e.g. "
            f"{', '.join(mixing[:3])}: in training mode they normalise with the batch's statistics, "
            "which mixes samples (no per-sample gradient, no DP). Freeze their running statistics "
            "first: dpcl.training.film.freeze_batchnorm(backbone)"
        )
    if buffered:
        raise ValueError(f"FiLM DP-SGD cannot train layers with buffers: {', '.join(buffered[:3])}")


@contextmanager
def private_training(model: nn.Module) -> Iterator[nn.Module]:
    """``model`` with every in-place module (``inplace=True``: timm's and torchvision's ReLUs) computing out
    of place inside the context, with the same values; restored on exit. opacus's hooks hand a hooked
    layer's output on as a view of a custom autograd function, which autograd refuses to let an in-place
    activation after the layer modify (a GroupNorm followed by ``ReLU(inplace=True)``); the hook-free twins
    keep their activations' outputs for the backward, which a later in-place change would invalidate."""
    flipped = [m for m in model.modules() if getattr(m, "inplace", None) is True]
    for m in flipped:
        m.inplace = False
    try:
        yield model
    finally:
        for m in flipped:
            m.inplace = True
