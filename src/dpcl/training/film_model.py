"""FiLM's model surgery: which parameters of a pre-trained backbone FiLM trains, and how their
per-sample gradients are obtained ([LabelSpace] App. D).

FiLM trains every normalisation layer's scale and bias (LayerNorm, GroupNorm, BatchNorm;
:func:`film_parameter_names`) plus a linear head; everything else is frozen. A BatchNorm trains only
with frozen running statistics (:func:`freeze_batchnorm`, :class:`FrozenBatchNorm`): a fixed
per-channel affine map in which no sample influences another; a BatchNorm that would use the batch's
statistics is refused (:func:`check_per_sample`). :func:`film_grad_sample_module` gives the per-sample
gradients: on a backbone whose FiLM layers are all frozen BatchNorms (EfficientNet-Lite0, the embedded
default) without hooks (:class:`HookFreePerSample`: the layers' own backward sets them), on any other in
opacus's hooks-mode ``GradSampleModule``, with the per-sample gradients of the frozen BatchNorm and of
timm's norm classes (:mod:`dpcl.training.norm_samplers`) registered through opacus's public
``register_grad_sampler``. Both give the same values, bit for bit (tested).
"""

from __future__ import annotations

import logging
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

    Per-sample gradients: inside :func:`private_training`, a training-mode forward whose input
    requires a gradient and whose activation is the identity, ReLU or ReLU6/Hardtanh runs as
    :class:`_FrozenAffineAct`, whose backward computes the per-sample sums of ∂L/∂z·x̂ and ∂L/∂z from
    the tensors the backward computes anyway and leaves them to the opacus sampler
    (:func:`_frozen_batchnorm_grad_sample`); every other forward is the plain one, and the sampler
    recomputes x̂ and z from opacus's captured input (:mod:`dpcl.training.norm_samplers`). Under
    :class:`HookFreePerSample` (``hook_free``) every training-mode forward of a layer with such an
    activation runs as :class:`_FrozenAffineAct`, whose backward sets the parameters' ``grad_sample``.
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
        self.per_sample = False  # set by private_training: the fused forward and backward
        self.hook_free = False  # set by HookFreePerSample: the fused backward sets the grad_sample itself
        self.train(bn.training)

    def normalise(self, x: torch.Tensor, affine: bool = True) -> torch.Tensor:
        w, b = (self.weight, self.bias) if affine else (None, None)
        return F.batch_norm(x, self.running_mean, self.running_var, w, b, False, 0.0, self.eps)

    def fusable(self) -> bool:
        """Whether :class:`_FrozenAffineAct` can compute this layer: a scale and a shift, and an
        activation whose gradient is a mask (identity, ReLU, ReLU6/Hardtanh)."""
        return (
            self.weight is not None
            and self.bias is not None
            and norm_samplers.activation_kind(self.act) is not None
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.__dict__.pop("_per_sample", None)  # a stash is only ever read for the latest forward
        if (
            (self.per_sample or self.hook_free)
            and self.training
            and torch.is_grad_enabled()
            # with opacus's hooks, an input that needs no gradient lets opacus's hook fire before this
            # layer's backward: its sampler recomputes; without hooks the layer delivers in any case
            and (x.requires_grad or self.hook_free)
            and self.fusable()
        ):
            return _FrozenAffineAct.apply(x, self.weight, self.bias, self)
        return self.act(self.drop(self.normalise(x)))

    def extra_repr(self) -> str:
        return f"{self.num_features}, eps={self.eps}, affine={self.weight is not None}, frozen statistics"


class _FrozenAffineAct(torch.autograd.Function):
    """y = act(γ·x̂ + β) of a :class:`FrozenBatchNorm`, with its per-sample parameter gradients.

    Forward: z by ``F.batch_norm`` in evaluation mode (the plain forward's values, bit for bit), y = act(z);
    it keeps x and (for ReLU and Hardtanh) y, as the plain backward would. Backward: ∂L/∂z = ∂L/∂y masked
    where the activation is flat (by y: ReLU's y > 0 and ReLU6's 0 < y < 6 are z's own conditions), x̂ the
    input normalised without the affine map, then per sample n and channel c Σ_positions ∂L/∂z·x̂ (γ) and
    Σ_positions ∂L/∂z (β), left on the layer with the input they belong to (or, ``hook_free``, set as the
    parameters' ``grad_sample``); the parameters' batch gradients are their sums over samples and the
    input's ∂L/∂z·γ/√(σ² + ε). Compared with the plain backward and a sampler that recomputes x̂, z and
    the activation, it saves the recomputation of z and of the activation's mask. With the identity it
    keeps no output, so a later in-place change of the output (a ResNet's ``x += shortcut``) is allowed."""

    @staticmethod
    def forward(ctx, x, weight, bias, layer):
        z = layer.normalise(x)
        kind = norm_samplers.activation_kind(layer.act)
        y = (
            z
            if kind == "identity"
            else (F.relu(z) if kind == "relu" else F.hardtanh(z, layer.act.min_val, layer.act.max_val))
        )
        # x̂ is recomputed in the backward, not kept: a kept x̂ is one more activation-sized tensor per layer
        # (peak memory), and the backward computes it with the same kernel, so the same bits
        ctx.save_for_backward(x, y if kind != "identity" else None, weight)
        ctx.layer, ctx.kind = layer, kind
        return y

    @staticmethod
    def backward(ctx, g):
        x, y, weight = ctx.saved_tensors
        layer, kind = ctx.layer, ctx.kind
        # ATen's own activation backward kernels, on y: torch's autograd runs them on z (ReLU6's in-place
        # backward on y), and y lies strictly inside the linear range exactly when z does
        if kind == "relu":
            g = torch.ops.aten.threshold_backward(g, y, 0.0)
        elif kind == "hardtanh":
            g = torch.ops.aten.hardtanh_backward(g, y, layer.act.min_val, layer.act.max_val)
        n, c = g.shape[0], g.shape[1]
        xhat = layer.normalise(x, affine=False)
        ps_w = (g * xhat).reshape(n, c, -1).sum(dim=2)
        ps_b = g.reshape(n, c, -1).sum(dim=2)
        shape = (1, c) + (1,) * (g.dim() - 2)
        gx = None
        if ctx.needs_input_grad[0]:
            gx = g * (weight * torch.rsqrt(layer.running_var + layer.eps)).reshape(shape)
        if layer.hook_free:  # no opacus hooks: the per-sample gradients are this backward's output
            _add_grad_sample(layer.weight, ps_w)
            _add_grad_sample(layer.bias, ps_b)
            return gx, None, None, None
        layer._per_sample = (x, ps_w, ps_b)  # for the opacus sampler, which checks the input is its own
        return gx, ps_w.sum(dim=0), ps_b.sum(dim=0), None


def _add_grad_sample(param: nn.Parameter, per_sample: torch.Tensor) -> None:
    """``param.grad_sample`` (samples × the parameter's shape), as opacus keeps it: set, or added to when
    the layer ran more than once in the forward."""
    before = getattr(param, "grad_sample", None)
    param.grad_sample = per_sample if before is None else before + per_sample


def _frozen_input(layer: FrozenBatchNorm, x: torch.Tensor) -> torch.Tensor:
    return layer.normalise(x, affine=False)


_recompute_frozen = norm_samplers.norm_sampler(_frozen_input, channels="first", act=True)


def _frozen_batchnorm_grad_sample(layer: FrozenBatchNorm, activations, backprops) -> dict:
    """The opacus sampler of a :class:`FrozenBatchNorm`: the per-sample sums :class:`_FrozenAffineAct`'s
    backward left for this very input, else recomputed from opacus's captured input."""
    stash = layer.__dict__.pop("_per_sample", None)
    x = activations[0]  # opacus keeps a detached view: the same storage as the input the stash was made for
    if stash is None or stash[0].data_ptr() != x.data_ptr() or stash[0].shape != x.shape:
        return _recompute_frozen(layer, activations, backprops)
    _, ps_w, ps_b = stash
    return {p: v for p, v in ((layer.weight, ps_w), (layer.bias, ps_b)) if p.requires_grad}


def _register_grad_samplers() -> None:
    """The frozen BatchNorm's sampler and timm's norm classes' (:mod:`dpcl.training.norm_samplers`):
    ∂L/∂γ of sample n, channel c is Σ over positions of (∂L/∂z)·x̂ with x̂ normalised by the running
    statistics, ∂L/∂β is Σ ∂L/∂z, after the pull-back through ``BatchNormAct2d``'s activation."""
    samplers = norm_samplers.timm_samplers()
    samplers[FrozenBatchNorm] = _frozen_batchnorm_grad_sample
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
    """``model`` set up for FiLM DP-SGD's per-sample gradients inside the context, restored on exit:

    * every in-place module (``inplace=True``: timm's and torchvision's ReLUs) computes out of place, with
      the same values: opacus's hooks hand a hooked layer's output on as a view of a custom autograd
      function, which autograd refuses to let an in-place activation after the layer modify (a GroupNorm
      followed by ``ReLU(inplace=True)``);
    * every :class:`FrozenBatchNorm` computes its per-sample gradients in its own backward
      (:class:`_FrozenAffineAct`)."""
    flipped = [m for m in model.modules() if getattr(m, "inplace", None) is True]
    frozen = [m for m in model.modules() if isinstance(m, FrozenBatchNorm)]
    for m in flipped:
        m.inplace = False
    for m in frozen:
        m.per_sample = True
    try:
        yield model
    finally:
        for m in flipped:
            m.inplace = True
        for m in frozen:
            m.per_sample = False
            m.__dict__.pop("_per_sample", None)


class HookFreePerSample:
    """Per-sample FiLM gradients without opacus's hooks, for a backbone whose every trainable parameter
    belongs to a :class:`FrozenBatchNorm` that :class:`_FrozenAffineAct` computes (EfficientNet(-Lite),
    the embedded default): each such layer's backward sets its parameters' ``grad_sample`` itself, as
    opacus's ``GradSampleModule`` would, with the same per-sample sums. It saves opacus's forward and
    backward hooks (a Python call per layer and pass) and its activation captures; for the first layer,
    whose input needs no gradient, it also saves opacus's recomputation. Called as the backbone; its
    ``cleanup()`` restores the layers and removes every ``grad_sample``."""

    def __init__(self, backbone: nn.Module) -> None:
        if not self.applies(backbone):
            raise ValueError(
                "HookFreePerSample needs a backbone whose FiLM layers are all fusable FrozenBatchNorms"
            )
        self.backbone = backbone
        self.layers = [m for m in backbone.modules() if isinstance(m, FrozenBatchNorm)]
        for m in self.layers:
            m.hook_free = True

    @staticmethod
    def applies(backbone: nn.Module) -> bool:
        """Every module that owns a trainable parameter is a :class:`FrozenBatchNorm` that
        :class:`_FrozenAffineAct` computes, and there is one."""
        owners = [m for m in backbone.modules() if any(p.requires_grad for p in m.parameters(recurse=False))]
        return bool(owners) and all(isinstance(m, FrozenBatchNorm) and m.fusable() for m in owners)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.backbone(x)

    def cleanup(self) -> None:
        for m in self.layers:
            m.hook_free = False
        for p in self.backbone.parameters():
            if hasattr(p, "grad_sample"):
                del p.grad_sample


def film_grad_sample_module(backbone: nn.Module):
    """The per-sample FiLM gradients of ``backbone``: :class:`HookFreePerSample` where it applies (every
    FiLM layer a frozen BatchNorm with a mask-gradient activation), else opacus's hooks-mode
    ``GradSampleModule`` around the backbone. Either leaves each FiLM parameter's per-sample gradients in
    its ``grad_sample`` after a backward, is called as the backbone, and is undone by ``cleanup()``.

    opacus's validator refuses every trainable layer with buffers; the only ones that
    :func:`check_per_sample` lets through are :class:`FrozenBatchNorm` layers, whose buffers are
    the pre-trained model's constant statistics (no sample touches them), so it runs
    non-strict after that check. Undo with its public ``cleanup()``.
    """
    from opacus import GradSampleModule

    check_per_sample(backbone)
    if HookFreePerSample.applies(backbone):
        return HookFreePerSample(backbone)
    _register_grad_samplers()
    # non-strict mode logs the validator's errors (the frozen statistics, checked above) at INFO, with
    # every FrozenBatchNorm's repr, once per trained member: keep that out of job logs
    opacus_log = logging.getLogger("opacus.grad_sample.grad_sample_module")
    level = opacus_log.level
    opacus_log.setLevel(max(level, logging.WARNING))
    try:
        return GradSampleModule(
            backbone, batch_first=True, loss_reduction="sum", strict=False, force_functorch=False
        )
    finally:
        opacus_log.setLevel(level)
