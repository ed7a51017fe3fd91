"""Per-sample gradients of normalisation layers' scale and shift, as opacus grad samplers (FiLM, App. D).

opacus's hooks mode looks a layer's sampler up by its *exact* class: timm's subclasses of ``LayerNorm``
and ``GroupNorm`` (``timm.layers.LayerNorm``, the ViTs' norm) have none, so opacus computes them with
functorch, one vmap per layer and call, which is correct but about doubles a small ViT's private step.
:func:`timm_samplers` lists a sampler for each timm norm class whose forward this module has checked
(``tests/training/test_film_norms.py`` compares every one with one backward pass per sample), and
:func:`register` hands them to opacus's public ``register_grad_sampler``. A class not listed (a future
timm class, a user's) keeps opacus's functorch fallback: slower, never wrong.

Every sampler here has the same shape (:func:`norm_sampler`). With x̂ the layer's input normalised
without its affine map, z = γ·x̂ + β and the layer's output act(z), a sample's gradients are
∂L/∂γ = Σ_positions (∂L/∂z)·x̂ and ∂L/∂β = Σ_positions ∂L/∂z. opacus hands the sampler ∂L/∂output; a
layer with an activation (timm's ``*Act`` classes, the frozen BatchNorm of ``BatchNormAct2d``) first
pulls it back through the elementwise activation on the recomputed z (one vector-Jacobian product).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

#: ``normalise(layer, x) -> x̂``: the layer's input normalised without its affine map
Normalise = Callable[[nn.Module, torch.Tensor], torch.Tensor]


def is_identity(module: nn.Module | None) -> bool:
    """No module, ``nn.Identity`` or a dropout of probability 0: the layer computes nothing there."""
    return (
        module is None
        or isinstance(module, nn.Identity)
        or (isinstance(module, nn.Dropout) and module.p == 0)
    )


def activation_kind(act: nn.Module | None) -> str | None:
    """``"identity"``, ``"relu"`` or ``"hardtanh"`` (ReLU6 included) for the activations whose gradient
    is a mask computed by torch's own backward kernels; None for any other."""
    if is_identity(act):
        return "identity"
    if type(act) is nn.ReLU:
        return "relu"
    if type(act) in (nn.ReLU6, nn.Hardtanh):
        return "hardtanh"
    return None


def pull_back(layer: nn.Module, z: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """∂L/∂z from ∂L/∂act(drop(z)) for ``layer.act`` (and an identity ``layer.drop``): one
    vector-Jacobian product of the activation at z. ReLU, ReLU6 and Hardtanh run as their out-of-place
    functions (timm builds them in place); any other activation runs on a copy of z."""
    act = getattr(layer, "act", None)
    if not is_identity(getattr(layer, "drop", None)):
        raise ValueError(f"{type(layer).__name__} has a stochastic drop layer: no per-sample gradient")
    kind = activation_kind(act)
    if kind == "identity":
        return g
    with torch.enable_grad():
        z = z.detach().requires_grad_(True)
        if kind == "relu":
            out = F.relu(z)
        elif kind == "hardtanh":
            out = F.hardtanh(z, act.min_val, act.max_val)
        else:
            out = act(z.clone())  # clone: an in-place activation would overwrite the leaf z
        (gz,) = torch.autograd.grad(out, z, g)
    return gz


def norm_sampler(normalise: Normalise, *, channels: str, act: bool = False):
    """An opacus grad sampler for a norm layer whose parameters index the input's dimension 1
    (``channels="first"``: BatchNorm, GroupNorm, LayerNorm2d) or its last dimensions
    (``channels="last"``: LayerNorm); ``act``: the layer applies ``layer.act`` after its affine map."""
    if channels not in ("first", "last"):
        raise ValueError(f"channels must be 'first' or 'last', got {channels!r}")

    def affine_shape(layer, x):
        if channels == "first":
            return (1, -1) + (1,) * (x.dim() - 2)
        return tuple(layer.weight.shape)

    def per_sample_sums(a: torch.Tensor, b: torch.Tensor | None, n: int) -> torch.Tensor:
        """Σ over positions of a·b (or of a, b None) per sample and parameter: (B, *param shape). A product
        and a sum: on the CPU 1.1-10x faster than torch.einsum's batched dot products at FiLM's shapes."""
        ab = a if b is None else a * b
        if channels == "first":
            return ab.reshape(a.shape[0], a.shape[1], -1).sum(dim=2)
        shape = a.shape[a.dim() - n :]
        return ab.reshape(a.shape[0], -1, *shape).sum(dim=1)

    def sampler(layer: nn.Module, activations: list[torch.Tensor], backprops: torch.Tensor) -> dict:
        x, g = activations[0], backprops
        weight, bias = layer.weight, layer.bias
        n = weight.dim() if weight is not None else bias.dim()
        xhat = normalise(layer, x)
        if act:
            w = weight.detach().reshape(affine_shape(layer, x)) if weight is not None else 1.0
            z = (
                xhat * w
                if bias is None
                else torch.addcmul(bias.detach().reshape(affine_shape(layer, x)), xhat, w)
            )
            g = pull_back(layer, z, g)
        ret = {}
        if weight is not None and weight.requires_grad:
            ret[weight] = per_sample_sums(g, xhat, n)
        if bias is not None and bias.requires_grad:
            ret[bias] = per_sample_sums(g, None, n)
        return ret

    return sampler


def _layer_norm(layer, x):
    return F.layer_norm(x, layer.normalized_shape, eps=layer.eps)


def _layer_norm_2d(layer, x):
    return F.layer_norm(x.permute(0, 2, 3, 1), layer.normalized_shape, eps=layer.eps).permute(0, 3, 1, 2)


def _group_norm(layer, x):
    return F.group_norm(x, layer.num_groups, eps=layer.eps)


def timm_samplers() -> dict[type, Callable]:
    """A sampler for each timm normalisation class whose forward is the math named here, among those
    the installed timm has: ``LayerNorm``, ``LayerNorm2d``
    (a LayerNorm over channels of an NCHW input), ``GroupNorm`` and ``GroupNorm1``, and the ``*Act``
    variants with their activation (the ``*Fp32`` variants, which cast to float32, are left to functorch).
    None when timm is not installed."""
    try:
        import timm.layers as tl
    except ImportError:
        return {}
    table = {
        "LayerNorm": norm_sampler(_layer_norm, channels="last"),
        "LayerNorm2d": norm_sampler(_layer_norm_2d, channels="first"),
        "GroupNorm": norm_sampler(_group_norm, channels="first"),
        "GroupNorm1": norm_sampler(_group_norm, channels="first"),
        "LayerNormAct": norm_sampler(_layer_norm, channels="last", act=True),
        "LayerNormAct2d": norm_sampler(_layer_norm_2d, channels="first", act=True),
        "GroupNormAct": norm_sampler(_group_norm, channels="first", act=True),
        "GroupNorm1Act": norm_sampler(_group_norm, channels="first", act=True),
    }
    return {getattr(tl, name): s for name, s in table.items() if isinstance(getattr(tl, name, None), type)}


def register(samplers: dict[type, Callable]) -> None:
    """Hand ``samplers`` (class -> sampler) to opacus's public ``register_grad_sampler``."""
    from opacus.grad_sample import register_grad_sampler

    for cls, sampler in samplers.items():
        register_grad_sampler(cls)(sampler)
