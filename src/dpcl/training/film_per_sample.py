"""FiLM's per-sample gradients: computed by the normalisation layers' own backward, or by opacus's hooks.

:func:`film_grad_sample_module` picks one of two ways to leave each FiLM parameter's per-sample gradients
(samples × the parameter's shape) in its ``grad_sample`` after a backward:

* **Without hooks** (:class:`HookFreePerSample`), on a backbone whose every FiLM layer is one of the
  classes in :func:`twin_rules` (dpcl's frozen BatchNorm, torch's and timm's GroupNorm and LayerNorm
  classes) with no activation or ReLU, ReLU6 or Hardtanh: a twin stands in for each such layer while the
  backbone trains (:class:`_Twin`: the same Parameter objects, hence the same names; the layers are put
  back by ``cleanup()``). In training mode the twin computes the layer as one autograd function
  (:class:`_NormAct`): the forward calls torch's own normalisation kernel, so the layer's output is the
  same; the backward returns the input's gradient (from torch's own backward kernel; for the frozen
  BatchNorm, whose statistics are constants, one product) and sets the parameters' ``grad_sample`` from
  the tensors it has anyway. This saves opacus's two hooks per layer and
  pass (Python calls), its captured activations and its samplers' recomputation of each layer's forward.
* **With opacus's hooks** (its ``GradSampleModule`` in hooks mode) on any other backbone, with the
  samplers of :mod:`dpcl.training.norm_samplers` and of the frozen BatchNorm registered through opacus's
  public ``register_grad_sampler``.

The per-sample sums, with z = γ·x̂ + β the affine map's output, x̂ the normalised input and ∂L/∂z the
gradient after the activation: ∂L/∂β_n = Σ_positions ∂L/∂z_n and ∂L/∂γ_n = Σ_positions ∂L/∂z_n · x̂_n. For a
channel-indexed norm whose statistics are constant over a sample's positions (the frozen BatchNorm: its
running mean μ and 1/√(σ² + ε) = ρ; a GroupNorm: the sample's group's), x̂ = (x − μ)·ρ gives
∂L/∂γ_n = ρ·(Σ ∂L/∂z_n·x − μ·∂L/∂β_n): a product and two sums over the activation, without forming x̂.
In float32 the subtraction costs bits where |μ| is large against the spread of x (about log2 of their
ratio); the rounded vector is still each sample's own, clipped as computed, so the sensitivity bound is
unchanged (as for :mod:`dpcl.training.precision`). A LayerNorm's statistics vary by position: it forms x̂.
The two ways agree to float32 rounding, not bit for bit (tested against one backward per sample).

The twins of GroupNorm and LayerNorm call torch's normalisation kernels directly, which autocast may
treat otherwise than the layers' functional calls; under ``bf16`` (autocast) only a backbone of frozen
BatchNorms (whose twin calls the layer's own ``F.batch_norm``) trains without hooks.
"""

from __future__ import annotations

import logging
import math
from functools import cache

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import norm_samplers
from .film_model import FrozenBatchNorm, check_per_sample, register_grad_samplers


def _add_grad_sample(param: nn.Parameter | None, per_sample: torch.Tensor) -> None:
    """``param.grad_sample`` (samples × the parameter's shape), as opacus keeps it: set, or added to when
    the layer ran more than once in the forward; nothing for a missing or frozen parameter."""
    if param is None or not param.requires_grad:
        return
    before = getattr(param, "grad_sample", None)
    param.grad_sample = per_sample if before is None else before + per_sample


def _channel_sums(t: torch.Tensor) -> torch.Tensor:
    """Σ over positions per sample and channel of a (N, C, ...) tensor: (N, C)."""
    return t.reshape(t.shape[0], t.shape[1], -1).sum(dim=2)


def _summable(g: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``g`` and ``x`` in float32 when lower (bfloat16): the per-sample sums and the cancellation of the
    frozen BatchNorm's and GroupNorm's ∂L/∂γ need float32's bits."""
    if g.dtype in (torch.float32, torch.float64):
        return g, x
    return g.float(), x.float()


def _constant_stats_per_sample(g, x, mean, rstd, weight, bias, *, overwrite: bool = False):
    """(∂L/∂γ, ∂L/∂β) per sample of a channel-indexed norm with statistics ``mean`` and ``rstd`` constant
    over each sample's positions ((C,) or (N, C)): ρ·(Σ g·x − μ·Σ g) and Σ g, without x̂; ``overwrite``:
    g may be overwritten (with g·x)."""
    g, x = _summable(g, x)
    ps_b = _channel_sums(g)
    ps_w = None
    if weight is not None:
        prod = g.mul_(x) if overwrite else g * x
        ps_w = (_channel_sums(prod) - mean * ps_b) * rstd
    return ps_w, ps_b if bias is not None else None


class _FrozenBatchNormRule:
    """A :class:`dpcl.training.film_model.FrozenBatchNorm`: the layer's own ``F.batch_norm`` call (its
    values, bit for bit, under autocast too); the running statistics are constants, so the input's gradient
    is ∂L/∂z·γ·ρ, one product (ATen's evaluation-mode BatchNorm backward, which autograd runs, takes 2-15x
    as long at Lite0's shapes on a CPU and rounds differently in the last bit)."""

    name = "frozen BatchNorm"
    autocast_ok = True

    @staticmethod
    def forward(norm, x):
        return norm.normalise(x), (x,)

    @staticmethod
    def backward(norm, g, saved, *, input_grad: bool, own: bool):
        (x,) = saved
        rstd = torch.rsqrt(norm.running_var + norm.eps)
        gx = None
        if input_grad:
            scale = rstd if norm.weight is None else norm.weight * rstd
            gx = g * scale.reshape((1, -1) + (1,) * (g.dim() - 2))
        ps_w, ps_b = _constant_stats_per_sample(
            g, x, norm.running_mean, rstd, norm.weight, norm.bias, overwrite=own
        )
        return gx, ps_w, ps_b


def _layout(x: torch.Tensor) -> torch.memory_format:
    """The memory format in which ``F.group_norm`` hands a CPU tensor to its kernel: channels-last for a
    4-d tensor stored so (and not also contiguous), else contiguous."""
    cl = x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous()
    return torch.channels_last if cl and x.device.type == "cpu" else torch.contiguous_format


class _GroupNormRule:
    """torch's and timm's GroupNorm classes (``F.group_norm``): ATen's ``native_group_norm``, which also
    returns each sample's group means and 1/std, and its backward for the input."""

    name = "GroupNorm"
    autocast_ok = False

    @staticmethod
    def _dims(norm, x):
        n, c = x.shape[0], x.shape[1]
        return n, c, math.prod(x.shape[2:]), norm.num_groups

    @classmethod
    def forward(cls, norm, x):
        x = x.contiguous(memory_format=_layout(x))
        n, c, hw, groups = cls._dims(norm, x)
        z, mean, rstd = torch.ops.aten.native_group_norm(
            x, norm.weight, norm.bias, n, c, hw, groups, norm.eps
        )
        return z, (x, mean, rstd)

    @classmethod
    def backward(cls, norm, g, saved, *, input_grad: bool, own: bool):
        x, mean, rstd = saved
        n, c, hw, groups = cls._dims(norm, x)
        g = g.contiguous(memory_format=_layout(x))
        gx = None
        if input_grad:
            mask = [True, False, False]
            gx = torch.ops.aten.native_group_norm_backward(
                g, x, mean, rstd, norm.weight, n, c, hw, groups, mask
            )[0]
        per_group = c // groups  # (N, G) statistics, one per channel: (N, C)
        mean, rstd = mean.repeat_interleave(per_group, dim=1), rstd.repeat_interleave(per_group, dim=1)
        ps_w, ps_b = _constant_stats_per_sample(g, x, mean, rstd, norm.weight, norm.bias, overwrite=own)
        return gx, ps_w, ps_b


class _LayerNormRule:
    """torch's and timm's LayerNorm classes over the last dimensions (``F.layer_norm``; ``channels_first``:
    timm's LayerNorm2d, over the channels of an NCHW input, which it permutes to NHWC and back): ATen's
    ``native_layer_norm``, which also returns each position's mean and 1/std, and its backward."""

    autocast_ok = False

    def __init__(self, *, channels_first: bool) -> None:
        self.channels_first = channels_first
        self.name = "LayerNorm2d" if channels_first else "LayerNorm"

    def _last(self, t: torch.Tensor) -> torch.Tensor:
        return t.permute(0, 2, 3, 1) if self.channels_first else t

    def _back(self, t: torch.Tensor) -> torch.Tensor:
        return t.permute(0, 3, 1, 2) if self.channels_first else t

    def forward(self, norm, x):
        x = self._last(x).contiguous()
        z, mean, rstd = torch.ops.aten.native_layer_norm(
            x, norm.normalized_shape, norm.weight, norm.bias, norm.eps
        )
        return self._back(z), (x, mean, rstd)

    def backward(self, norm, g, saved, *, input_grad: bool, own: bool):
        x, mean, rstd = saved
        g = self._last(g).contiguous()
        gx = None
        if input_grad:
            mask = [True, False, False]
            gx = torch.ops.aten.native_layer_norm_backward(
                g, x, norm.normalized_shape, mean, rstd, norm.weight, norm.bias, mask
            )[0]
            gx = self._back(gx)
        g, x = _summable(g, x)
        shape = tuple(norm.normalized_shape)
        n = x.shape[0]
        ps_b = g.reshape(n, -1, *shape).sum(dim=1) if norm.bias is not None else None
        ps_w = None
        if norm.weight is not None:
            xhat = torch.addcmul(-mean * rstd, x, rstd)  # (x − μ)·ρ with μ, ρ per position
            ps_w = xhat.mul_(g).reshape(n, -1, *shape).sum(dim=1)
        return gx, ps_w, ps_b


@cache
def twin_rules() -> dict[type, object]:
    """The classes a twin stands in for, by exact class (a subclass may compute something else): dpcl's
    frozen BatchNorm, torch's ``GroupNorm`` and ``LayerNorm``, and the timm classes of those whose
    forward is the same functional call (``GroupNorm``, ``GroupNorm1``, ``LayerNorm``, ``LayerNorm2d`` and
    their ``*Act`` variants), among those the installed timm has."""
    group, layer = _GroupNormRule(), _LayerNormRule(channels_first=False)
    rules: dict[type, object] = {
        FrozenBatchNorm: _FrozenBatchNormRule(),
        nn.GroupNorm: group,
        nn.LayerNorm: layer,
    }
    try:
        import timm.layers as tl
    except ImportError:
        return rules
    layer2d = _LayerNormRule(channels_first=True)
    timm = {
        "GroupNorm": group,
        "GroupNorm1": group,
        "GroupNormAct": group,
        "GroupNorm1Act": group,
        "LayerNorm": layer,
        "LayerNormAct": layer,
        "LayerNorm2d": layer2d,
        "LayerNormAct2d": layer2d,
    }
    rules.update({getattr(tl, k): r for k, r in timm.items() if isinstance(getattr(tl, k, None), type)})
    return rules


def _trains(module: nn.Module) -> bool:
    return any(p.requires_grad for p in module.parameters(recurse=False))


def twin_refusal(module: nn.Module, *, precision: str = "fp32") -> str | None:
    """Why no twin can stand in for ``module``, or None: a class without a rule, a stochastic drop layer, an
    activation other than none, ReLU, ReLU6 or Hardtanh, or autocast (``bf16``) for a rule that calls
    ATen's kernels directly."""
    rule = twin_rules().get(type(module))
    if rule is None:
        return f"{type(module).__name__} has no hook-free rule"
    if not norm_samplers.is_identity(getattr(module, "drop", None)):
        return f"{type(module).__name__} has a drop layer"
    if norm_samplers.activation_kind(getattr(module, "act", None)) is None:
        return f"{type(module).__name__}'s activation {type(module.act).__name__} is not a mask"
    if precision == "bf16" and not rule.autocast_ok:
        return f"{rule.name} under autocast (bf16)"
    return None


class _NormAct(torch.autograd.Function):
    """y = act(z), z = γ·x̂ + β of the layer a :class:`_Twin` stands in for, with its per-sample parameter
    gradients. Forward: the rule's normalisation (torch's kernel: the layer's values), the activation in
    place on z; it keeps what the rule's backward needs and, for ReLU and Hardtanh, y. Backward: ∂L/∂z from
    ∂L/∂y by ATen's activation backward kernels on y (torch's autograd runs them on z, and y lies strictly
    inside the linear range exactly when z does); the input's gradient from the rule (torch's backward
    kernel; the frozen BatchNorm's one product); the parameters' per-sample sums set as their ``grad_sample``, their batch gradients left
    unset (``None``: nothing reads them). With no activation it keeps no output, so a later in-place change
    of the output (a ResNet's ``x += shortcut``) is allowed."""

    @staticmethod
    def forward(ctx, x, weight, bias, twin):
        z, saved = twin.rule.forward(twin.norm, x)
        kind = twin.kind
        if kind == "relu":
            z = torch.relu_(z)
        elif kind == "hardtanh":
            z = F.hardtanh(z, twin.norm.act.min_val, twin.norm.act.max_val, inplace=True)
        ctx.save_for_backward(None if kind == "identity" else z, *saved)
        ctx.twin = twin
        return z

    @staticmethod
    def backward(ctx, g):
        y, *saved = ctx.saved_tensors
        twin = ctx.twin
        norm = twin.norm
        if twin.kind == "relu":
            g = torch.ops.aten.threshold_backward(g, y, 0.0)
        elif twin.kind == "hardtanh":
            g = torch.ops.aten.hardtanh_backward(g, y, norm.act.min_val, norm.act.max_val)
        gx, ps_w, ps_b = twin.rule.backward(
            norm, g, saved, input_grad=ctx.needs_input_grad[0], own=twin.kind != "identity"
        )
        _add_grad_sample(norm.weight, ps_w)
        _add_grad_sample(norm.bias, ps_b)
        return gx, None, None, None


class _Twin(nn.Module):
    """Stands in for a norm layer while :class:`HookFreePerSample` trains: its ``weight`` and ``bias`` are
    the layer's Parameter objects (the backbone's parameter names stay the same); in training mode with
    gradients on it computes :class:`_NormAct`, otherwise the layer itself."""

    def __init__(self, norm: nn.Module) -> None:
        super().__init__()
        self.weight, self.bias = norm.weight, norm.bias
        self.__dict__["norm"] = norm  # not a submodule: its parameters are registered here, once
        self.rule = twin_rules()[type(norm)]
        self.kind = norm_samplers.activation_kind(getattr(norm, "act", None))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training and torch.is_grad_enabled():
            return _NormAct.apply(x, self.weight, self.bias, self)
        return self.norm(x)

    def extra_repr(self) -> str:
        return f"hook-free twin of {type(self.norm).__name__}"


class HookFreePerSample:
    """Per-sample FiLM gradients without opacus's hooks (see the module's docstring): a twin stands in for
    every layer that owns a trainable parameter, each of which must have a rule (:func:`applies`). Called as
    the backbone; its ``cleanup()`` puts the layers back and removes every ``grad_sample``."""

    def __init__(self, backbone: nn.Module, *, precision: str = "fp32") -> None:
        why = self.refusal(backbone, precision=precision)
        if why is not None:
            raise ValueError(f"HookFreePerSample cannot train this backbone: {why}")
        self.backbone = backbone
        self._swapped: list[tuple[nn.Module, str, nn.Module]] = []
        twins: dict[int, _Twin] = {}  # a layer used in two places gets one twin
        for parent in list(backbone.modules()):
            for name, child in list(parent.named_children()):
                if _trains(child):
                    twin = twins.setdefault(id(child), _Twin(child))
                    setattr(parent, name, twin)
                    self._swapped.append((parent, name, child))

    @staticmethod
    def refusal(backbone: nn.Module, *, precision: str = "fp32") -> str | None:
        """Why not, or None: every module that owns a trainable parameter needs a twin
        (:func:`twin_refusal`), the backbone itself owns none, and one does."""
        if _trains(backbone):
            return f"the backbone {type(backbone).__name__} itself owns a trainable parameter"
        owners = [(n, m) for n, m in backbone.named_modules() if _trains(m)]
        if not owners:
            return "no module owns a trainable parameter"
        for name, module in owners:
            why = twin_refusal(module, precision=precision)
            if why is not None:
                return f"{name}: {why}"
        return None

    @classmethod
    def applies(cls, backbone: nn.Module, *, precision: str = "fp32") -> bool:
        return cls.refusal(backbone, precision=precision) is None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.backbone(x)

    def cleanup(self) -> None:
        for parent, name, child in reversed(self._swapped):
            setattr(parent, name, child)
        self._swapped = []
        for p in self.backbone.parameters():
            if hasattr(p, "grad_sample"):
                del p.grad_sample


def film_grad_sample_module(backbone: nn.Module, *, precision: str = "fp32"):
    """The per-sample FiLM gradients of ``backbone``: :class:`HookFreePerSample` where it applies, else
    opacus's hooks-mode ``GradSampleModule`` around the backbone. Either leaves each FiLM parameter's
    per-sample gradients in its ``grad_sample`` after a backward, is called as the backbone, and is undone
    by its public ``cleanup()``.

    opacus's validator refuses every trainable layer with buffers; the only ones that
    :func:`dpcl.training.film_model.check_per_sample` lets through are frozen BatchNorms, whose buffers
    are the pre-trained model's constant statistics (no sample touches them), so it runs non-strict after
    that check.
    """
    from opacus import GradSampleModule

    check_per_sample(backbone)
    if HookFreePerSample.applies(backbone, precision=precision):
        return HookFreePerSample(backbone, precision=precision)
    register_grad_samplers()
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
