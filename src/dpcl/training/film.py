"""The FiLM DP-SGD engine ([LabelSpace] Sec. 5.2, Alg. 2, App. D, D.1): FiLM members, their
swap into one shared backbone, and :func:`train_film`, which the FiLM learners drive
(:func:`dpcl.learners.peft.run_film_learner`: ensemble, Naive, Non-CL; with a
:class:`BufferMechanism`, the DP-A-GEM step of :mod:`dpcl.learners.agem_film`). One concept in
one module: the per-sample clipping hooks, the noise and the member format belong together.

FiLM here (App. D): every normalisation layer's scale and bias of the pre-trained backbone
(LayerNorm, GroupNorm, BatchNorm) plus a zero-initialised linear head over O_t are trainable,
everything else is frozen; for ViT-B/16 that is 25 LayerNorms × 2 × 768 = 38,400 FiLM
parameters + 768·|O_t| + |O_t|, for EfficientNet-Lite0 49 BatchNorms with 42,016 + 1280·|O_t| +
|O_t|. BatchNorms train only with frozen running statistics (:func:`freeze_batchnorm`,
:class:`FrozenBatchNorm`): a fixed per-channel affine map in which no sample influences
another; a BatchNorm that would use the batch's statistics is refused (:func:`check_per_sample`).
A member stores only these tensors (:class:`FilmMember`); predictions swap a member's
values into the one shared backbone (:func:`film_logits`), so T tasks never need T copies.

DP-SGD: per logical step every sample is taken independently with probability
q (Poisson sampling, from the task's seeded generator); the logical batch is processed in
physical chunks of at most ``physical_batch`` images (bounded memory); opacus's *hooks*
grad-sample mode (``GradSampleModule(force_functorch=False)`` around the backbone, which
hooks only the trainable normalisation layers, so timm's fused attention is fine; a frozen
BatchNorm's sampler is registered here) gives the FiLM
parameters' per-sample gradients and the head's per-sample norms come in closed form (ghost
clipping, :func:`clipped_grad_sum`); each sample's gradient is clipped to L2 norm C over all
trainable parameters jointly; the clipped sum
gets N(0, σ²C²) noise from a seeded CPU ``torch.Generator`` (drawn at *every* step, also
when the sampled batch is empty) and is divided by the PUBLIC constant ``cfg.normaliser``
before an Adam step. Steps = ``cfg.steps`` = round(epochs / q), independent of the private
data size, so the release is exactly the Poisson-subsampled Gaussian mechanism composed
``steps`` times, as accounted by :mod:`dpcl.privacy.sgd_accounting`. An empty task still
releases a proper (noise-only) classifier (App. B, Prop. B.6).
"""

from __future__ import annotations

import contextlib
import logging
import math
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ..backbones import Preprocessing
from ..features import preprocess_batch
from ..io import progress_stream
from ..privacy import releases
from .heads import DPSGDConfig
from .projection import project


class FrozenBatchNorm(nn.Module):
    """A BatchNorm with frozen running statistics: a fixed per-channel affine map (FiLM, App. D).

    ``y = act(drop(γ · (x − μ) / √(σ² + ε) + β))`` with the running mean μ and variance σ² as
    buffers, in training *and* evaluation mode (it is ``F.batch_norm(..., training=False)``,
    bit for bit what an eval-mode BatchNorm computes), so no sample's output depends on
    another's and the per-sample gradients of γ (``weight``) and β (``bias``) are well defined.
    ``act`` and ``drop`` keep the activation of timm's ``BatchNormAct2d`` (Identity for a plain
    BatchNorm). Made by :func:`freeze_batchnorm`, which keeps the parameter names, so a member's
    FiLM names are the same on the original and the frozen backbone. Its per-sample gradients
    come from :func:`_frozen_batchnorm_grad_sample`, registered with opacus.
    """

    def __init__(self, bn: nn.modules.batchnorm._BatchNorm) -> None:
        super().__init__()
        if not bn.track_running_stats or bn.running_mean is None or bn.running_var is None:
            raise ValueError(
                f"{type(bn).__name__} without running statistics (track_running_stats=False) always "
                "normalises with the batch's statistics: it cannot be frozen for FiLM"
            )
        drop = getattr(bn, "drop", None)
        if drop is not None and not _is_identity(drop):
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


def _is_identity(module: nn.Module) -> bool:
    return isinstance(module, nn.Identity) or (isinstance(module, nn.Dropout) and module.p == 0)


def _frozen_batchnorm_grad_sample(layer: FrozenBatchNorm, activations, backprops):
    """Per-sample gradients of a :class:`FrozenBatchNorm`'s γ and β (opacus hooks mode).

    ``backprops`` is the gradient at the layer's output, after its activation: it is first
    pulled back through the elementwise activation (one vector-Jacobian product on the
    recomputed pre-activation, sample by sample independent), then γ's gradient of sample n,
    channel c is Σ over positions of g · x̂ and β's is Σ g, as in opacus's GroupNorm sampler.
    """
    x = activations[0]
    g = backprops
    if not _is_identity(layer.act):
        with torch.enable_grad():
            z = layer.normalise(x).detach().requires_grad_(True)
            (g,) = torch.autograd.grad(layer.act(z.clone()), z, g)  # clone: activations may be in-place
    ret = {}
    if layer.weight is not None and layer.weight.requires_grad:
        ret[layer.weight] = torch.einsum("ni...->ni", g * layer.normalise(x, affine=False))
    if layer.bias is not None and layer.bias.requires_grad:
        ret[layer.bias] = torch.einsum("ni...->ni", g)
    return ret


def _register_grad_sampler() -> None:
    from opacus.grad_sample import register_grad_sampler

    register_grad_sampler(FrozenBatchNorm)(_frozen_batchnorm_grad_sample)


def freeze_batchnorm(model: nn.Module) -> int:
    """Replace every BatchNorm in ``model`` (in place; timm's ``BatchNormAct2d`` with its
    activation) by a :class:`FrozenBatchNorm` with its running statistics and the *same*
    weight and bias parameters; returns how many. Eval-mode outputs are unchanged bit for bit;
    in training mode the layer no longer mixes samples through batch statistics. Idempotent.
    """
    if isinstance(model, nn.modules.batchnorm._BatchNorm):
        raise ValueError("freeze_batchnorm replaces submodules: pass the model that contains the BatchNorm")
    count = 0
    for parent in list(model.modules()):
        for child_name, child in list(parent.named_children()):
            if isinstance(child, nn.modules.batchnorm._BatchNorm):
                setattr(parent, child_name, FrozenBatchNorm(child))
                count += 1
    return count


NORM_TYPES = (nn.LayerNorm, nn.GroupNorm, nn.modules.batchnorm._BatchNorm, FrozenBatchNorm)
"""Normalisation layers whose affine parameters are FiLM's (subclasses included: timm's)."""


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
        if isinstance(m, nn.modules.batchnorm._BatchNorm) or running:
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


def _feature_dim(backbone) -> int:
    dim = getattr(backbone, "num_features", None)
    if not isinstance(dim, int) or dim <= 0:
        raise ValueError(
            f"backbone {type(backbone).__name__} does not expose num_features (a timm model does)"
        )
    return dim


@dataclass
class FilmMember:
    """One released PEFT-ensemble member Z_t: FiLM values and the head over O_t (CPU float32)."""

    film: dict[str, torch.Tensor]  # parameter name -> LayerNorm weight or bias
    weight: torch.Tensor  # (n_out, dim)
    bias: torch.Tensor  # (n_out,)

    @property
    def n_out(self) -> int:
        return int(self.weight.shape[0])

    def n_parameters(self) -> int:
        """Trainable parameter count: FiLM + |O_t|·dim + |O_t| (App. D)."""
        return sum(t.numel() for t in self.film.values()) + self.weight.numel() + self.bias.numel()

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Flat name → array mapping for ``.npz``/safetensors files (``film/<name>``, ``head/*``)."""
        out = {f"film/{k}": v.detach().cpu().numpy() for k, v in self.film.items()}
        out["head/weight"] = self.weight.detach().cpu().numpy()
        out["head/bias"] = self.bias.detach().cpu().numpy()
        return out

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> FilmMember:
        """Inverse of :meth:`to_arrays`."""
        for key in ("head/weight", "head/bias"):
            if key not in arrays:
                raise ValueError(f"member arrays lack {key!r}; found {sorted(arrays)[:5]}")
        film = {
            k[len("film/") :]: torch.as_tensor(np.array(v))
            for k, v in arrays.items()
            if k.startswith("film/")
        }
        return cls(
            film,
            torch.as_tensor(np.array(arrays["head/weight"])),
            torch.as_tensor(np.array(arrays["head/bias"])),
        )


def pretrained_member(backbone, n_out: int) -> FilmMember:
    """The starting point of Alg. 2: the backbone's pre-trained FiLM values and a zero head over n_out."""
    if not isinstance(n_out, int | np.integer) or n_out < 0:
        raise ValueError(f"n_out must be a non-negative integer, got {n_out!r}")
    params = dict(backbone.named_parameters())
    film = {n: params[n].detach().to("cpu", torch.float32).clone() for n in film_parameter_names(backbone)}
    dim = _feature_dim(backbone)
    return FilmMember(film, torch.zeros(int(n_out), dim), torch.zeros(int(n_out)))


def _resolve_device(device: str):
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


class FilmNet(nn.Module):
    """Backbone features → linear head over O_t (the model of one ensemble member)."""

    def __init__(self, backbone: nn.Module, head: nn.Linear) -> None:
        super().__init__()
        self.backbone = backbone
        self.head = head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(x))


@contextlib.contextmanager
def film_net(backbone, member: FilmMember, device: str = "auto", trainable: bool = False) -> Iterator:
    """The shared ``backbone`` with ``member``'s FiLM values swapped in, plus its head.

    Inside the context only the FiLM parameters and the head require gradients when
    ``trainable``; on exit the backbone's own FiLM values and ``requires_grad`` flags are
    restored, so one backbone serves every member (no T copies). The backbone is moved to
    ``device`` ("auto": CUDA if available) and stays there.
    """

    dev = _resolve_device(device)
    backbone.to(dev)
    params = dict(backbone.named_parameters())
    names = film_parameter_names(backbone)
    if set(member.film) != set(names):
        missing = sorted(set(names) - set(member.film))[:3]
        extra = sorted(set(member.film) - set(names))[:3]
        raise ValueError(
            f"member's FiLM parameters do not fit the backbone (missing {missing}, extra {extra})"
        )
    dim = _feature_dim(backbone)
    if member.weight.shape != (member.n_out, dim) or member.bias.shape != (member.n_out,):
        raise ValueError(
            f"member head has shape {tuple(member.weight.shape)}; expected ({member.n_out}, {dim})"
        )
    saved = {n: params[n].detach().clone() for n in names}
    flags = {n: p.requires_grad for n, p in params.items()}
    mode = backbone.training
    # values come from the member: skip the random init (it would consume the global torch RNG)
    with warnings.catch_warnings():  # an empty O_t gives a (0, dim) head: a valid, empty classifier
        warnings.filterwarnings("ignore", message="Initializing zero-element tensors")
        head = nn.utils.skip_init(nn.Linear, dim, member.n_out, device=dev)
    try:
        with torch.no_grad():
            for n in names:
                params[n].copy_(member.film[n])
            head.weight.copy_(member.weight)
            head.bias.copy_(member.bias)
        for n, p in params.items():
            p.requires_grad_(trainable and n in member.film)
        head.requires_grad_(trainable)
        yield FilmNet(backbone, head)
    finally:
        with torch.no_grad():
            for n in names:
                params[n].copy_(saved[n])
        for n, p in params.items():
            p.requires_grad_(flags[n])
        backbone.train(mode)


def _member_from_net(net) -> FilmMember:
    """Snapshot of the trainable FiLM values and head of a :func:`film_net` module (CPU float32)."""
    params = dict(net.backbone.named_parameters())
    film = {
        n: params[n].detach().to("cpu", torch.float32).clone() for n in film_parameter_names(net.backbone)
    }
    return FilmMember(film, net.head.weight.detach().cpu().clone(), net.head.bias.detach().cpu().clone())


def _trainable(net) -> list:
    """FiLM parameters then the head's, in a fixed order (noise is drawn in this order)."""
    params = dict(net.backbone.named_parameters())
    return [params[n] for n in film_parameter_names(net.backbone)] + [net.head.weight, net.head.bias]


def _masked_logits(logits, active):
    """Restrict the softmax to ``active`` outputs (Naive baseline, Alg. A1)."""
    if active is None:
        return logits
    return logits.masked_fill(~active, -math.inf)


def clipped_grad_sum(
    gsm: nn.Module,
    head: nn.Linear,
    params: list[torch.Tensor],
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    clip: float,
    active: torch.Tensor | None = None,
) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Σ_i min(1, C/‖g_i‖) g_i over one physical chunk and the per-sample norms ‖g_i‖.

    ``gsm`` is an opacus ``GradSampleModule`` (hooks mode, ``loss_reduction="sum"``) around the
    *backbone*: its hooks give the FiLM parameters' per-sample gradients. The ``head``'s are
    never materialised (ghost clipping): sample i's head gradient is the outer product of its
    logit gradient e_i and its features f_i (weight) and e_i (bias), so its squared norm is
    ‖e_i‖²(‖f_i‖² + 1) and its clipped sum Σ_i c_i e_i f_iᵀ is one matrix product. That is the
    same number as materialising it, in B × |O_t| memory instead of B × |O_t| × d (Public Labels
    ×1000: 100,000 outputs × 769 × 32 samples would be 10 GB per chunk for ViT-B/16).
    ``params`` are the FiLM parameters followed by the head's weight and bias; ‖g_i‖ is the
    L2 norm over all of them jointly, so no sample changes the sum by more than C (DP-SGD's
    sensitivity).
    """
    feats = gsm(x)
    # the head's weights enter detached: autograd then skips their gradient (B x |O_t| x d
    # multiply-adds and a |O_t| x d write per chunk, never used: the clipped sum below is ghost)
    logits = F.linear(feats, head.weight.detach(), head.bias.detach())
    if not logits.requires_grad:  # no FiLM parameter in the graph: the logits are the only leaf
        logits.requires_grad_()
    logits.retain_grad()
    loss = F.cross_entropy(_masked_logits(logits, active), y, reduction="sum")
    with warnings.catch_warnings():
        # "Full backward hook is firing ... no inputs require gradients": the input is data, as expected.
        warnings.filterwarnings("ignore", message="Full backward hook is firing")
        loss.backward()
    film, (w, b) = params[:-2], params[-2:]
    if w is not head.weight or b is not head.bias:
        raise ValueError("params must end with the head's weight and bias")
    grads = []
    for p in film:
        gs = p.grad_sample
        if gs is None:  # no hook fired: the parameter is outside this loss's graph, zero gradient
            gs = torch.zeros((len(y), *p.shape), device=p.device, dtype=p.dtype)
        grads.append(gs.reshape(len(y), -1))
        p.grad_sample = None
        p.grad = None
    e, f = logits.grad, feats.detach()  # (B, |O_t|) logit gradients, (B, d) features
    w.grad = b.grad = None
    sq = e.pow(2).sum(dim=1) * (f.pow(2).sum(dim=1) + 1.0)
    for g in grads:
        sq = sq + g.pow(2).sum(dim=1)
    norms = torch.sqrt(sq)
    factor = torch.clamp(clip / torch.clamp(norms, min=1e-12), max=1.0)
    sums = [torch.einsum("i,ij->j", factor, g).reshape(p.shape) for g, p in zip(grads, film, strict=True)]
    ce = e * factor[:, None]
    return sums + [ce.T @ f, ce.sum(dim=0)], norms


def gaussian_noise_like(
    tensors: list[torch.Tensor], std: float, generator: torch.Generator
) -> list[torch.Tensor]:
    """N(0, std²) noise shaped like ``tensors``, drawn on the CPU from ``generator`` (device-independent)."""
    return [
        (torch.randn(t.shape, generator=generator, dtype=torch.float32) * std).to(t.device, t.dtype)
        for t in tensors
    ]


def _check_inputs(images: np.ndarray, rows: np.ndarray, n_out: int) -> tuple[np.ndarray, np.ndarray]:
    images = np.asarray(images)
    rows = np.asarray(rows, dtype=np.int64)
    if images.dtype != np.uint8 or images.ndim not in (3, 4):
        raise ValueError(
            f"images must be uint8 arrays (N, H, W) or (N, H, W, C); got {images.dtype} {images.shape}"
        )
    if len(images) != len(rows):
        raise ValueError(f"{len(images)} images but {len(rows)} labels")
    if len(rows) and (rows.min() < 0 or rows.max() >= n_out):
        raise ValueError(f"labels must be row indices into the head's {n_out} outputs")
    return images, rows


@dataclass
class BufferMechanism:
    """DP-A-GEM's second DP gradient g_ref (App. D.4): a Poisson sample of the memory buffer."""

    images: np.ndarray  # raw buffer images (uint8), the documented non-DP state of the baseline
    rows: np.ndarray  # their output rows
    sample_rate: float  # q_ref
    noise_multiplier: float  # σ_ref
    rng: np.random.Generator  # its own generator: sampling and noise never shared with g's


def _poisson_grad_sum(
    net,
    gsm,
    params: list[torch.Tensor],
    images: np.ndarray,
    rows: np.ndarray,
    rate: float,
    clip: float,
    rng: np.random.Generator,
    pre: Preprocessing,
    act_t,
    physical_batch: int,
) -> tuple[list[torch.Tensor], np.ndarray, int]:
    """(Σ of clipped per-sample gradients, the sample's indices, clipped count) of one Poisson sample at
    ``rate`` (``gsm is None``: the non-private twin, plain gradient sum), chunk by chunk."""
    n = len(rows)
    dev = net.head.weight.device
    batch = np.flatnonzero(rng.random(n) < rate) if n else np.zeros(0, np.int64)
    sums = [torch.zeros_like(p) for p in params]
    n_clipped = 0
    for start in range(0, batch.size, physical_batch):
        idx = batch[start : start + physical_batch]
        x = preprocess_batch(images[idx], pre).to(dev)
        y = torch.as_tensor(rows[idx], device=dev)
        if gsm is not None:
            chunk, norms = clipped_grad_sum(gsm, net.head, params, x, y, clip=clip, active=act_t)
            n_clipped += int((norms > clip).sum())
        else:
            loss = F.cross_entropy(_masked_logits(net(x), act_t), y, reduction="sum")
            chunk = torch.autograd.grad(loss, params, allow_unused=True)
            chunk = [torch.zeros_like(p) if g is None else g for g, p in zip(chunk, params, strict=True)]
        for s, g in zip(sums, chunk, strict=True):
            s.add_(g)
    return sums, batch, n_clipped


def noisy_grad_sum(
    net,
    gsm,
    params: list[torch.Tensor],
    images: np.ndarray,
    rows: np.ndarray,
    *,
    rate: float,
    clip: float,
    std: float,
    rng: np.random.Generator,
    gen: torch.Generator | None,
    pre: Preprocessing,
    act_t,
    physical_batch: int,
) -> tuple[list[torch.Tensor], int, int]:
    """One release of FiLM DP-SGD, the mechanism primitive of :func:`train_film`: the clipped gradient sum
    of a Poisson sample at ``rate`` (drawn from ``rng``) plus N(0, ``std``² I) from ``gen`` (none when
    ``std`` is 0), one tensor per trainable parameter; also the sample's size and clipped count
    (diagnostics, not private). The release is reported to an audit that listens
    (:mod:`dpcl.privacy.releases`: the images read, the clipping bound, the noise, the released value
    flat in parameter order), whatever the caller does with it."""
    sums, batch, n_clipped = _poisson_grad_sum(
        net, gsm, params, images, rows, rate, clip, rng, pre, act_t, physical_batch
    )
    grads = (
        sums
        if std <= 0
        else [s + z for s, z in zip(sums, gaussian_noise_like(params, std, gen), strict=True)]
    )
    if releases.listening():
        releases.report(
            "film_clipped_gradient_sum",
            rows=images[batch],
            sensitivity=clip,
            noise_scale=std,
            value=torch.cat([g.detach().reshape(-1).to("cpu", torch.float64) for g in grads]).numpy(),
        )
    return grads, int(batch.size), n_clipped


def film_grad_sample_module(backbone: nn.Module):
    """opacus's hooks-mode ``GradSampleModule`` around the backbone (per-sample FiLM gradients).

    opacus's validator refuses every trainable layer with buffers; the only ones that
    :func:`check_per_sample` lets through are :class:`FrozenBatchNorm` layers, whose buffers are
    the pre-trained model's constant statistics (no sample touches them), so it runs
    non-strict after that check. Undo with its public ``cleanup()``.
    """
    from opacus import GradSampleModule

    check_per_sample(backbone)
    _register_grad_sampler()
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


def train_film(
    backbone,
    images: np.ndarray,
    rows: np.ndarray,
    n_out: int,
    cfg: DPSGDConfig,
    *,
    noise_multiplier: float,
    rng: np.random.Generator,
    pre: Preprocessing,
    physical_batch: int = 32,
    init: FilmMember | None = None,
    active: np.ndarray | None = None,
    device: str = "auto",
    progress: bool = False,
    buffer: BufferMechanism | None = None,
) -> tuple[FilmMember, dict]:
    """Train one FiLM member with DP-SGD (σ = 0 and clip = inf: the non-private twin).

    ``images`` are uint8 images preprocessed chunk by chunk with ``pre``; ``rows`` index
    the head's ``n_out`` outputs. ``init`` (default: pre-trained FiLM values, zero head;
    Alg. 2) is where training starts (the Naive baseline passes its previous model);
    ``active`` (bool per output) restricts the softmax. ``rng`` drives the Poisson sampling
    and seeds the noise generator. Returns the member and its run record.

    ``buffer`` (DP-A-GEM, App. D.4): every step also computes g_ref from a Poisson sample of
    the buffer with its own noise (drawn even when that sample is empty, so emptiness is
    never revealed), flattens g and g_ref over all trainable parameters and projects g
    with :func:`dpcl.learners.agem.project` when gᵀg_ref < 0, before the normaliser and Adam.

    Every release (g, and g_ref with a ``buffer``) is made, and reported to an audit that listens, by
    the mechanism primitive :func:`noisy_grad_sum`, before any projection, the normaliser and Adam.
    """
    cfg.validate()
    if not (noise_multiplier >= 0 and math.isfinite(noise_multiplier)):
        raise ValueError(f"noise_multiplier must be finite and >= 0, got {noise_multiplier}")
    if noise_multiplier > 0 and math.isinf(cfg.clip):
        raise ValueError("a private run (noise_multiplier > 0) needs a finite clipping bound cfg.clip")
    if not isinstance(physical_batch, int) or physical_batch < 1:
        raise ValueError(f"physical_batch must be a positive integer, got {physical_batch!r}")
    images, rows = _check_inputs(images, rows, n_out)
    check_per_sample(backbone)  # a BatchNorm in training mode would mix samples
    member = init if init is not None else pretrained_member(backbone, n_out)
    if member.n_out != n_out:
        raise ValueError(f"init member has {member.n_out} outputs but n_out = {n_out}")
    if active is not None:
        active = np.asarray(active, dtype=bool)
        if active.shape != (n_out,):
            raise ValueError(f"active must be a bool mask of length {n_out}, got shape {active.shape}")
        if len(rows) and not active[rows].all():
            raise ValueError("every label must be an active output")
    if buffer is not None:
        sr, nm = buffer.sample_rate, buffer.noise_multiplier
        if not 0.0 < sr <= 1.0:
            raise ValueError(f"buffer sample_rate must lie in (0, 1], got {sr!r}")
        if not (nm >= 0 and math.isfinite(nm)) or (nm > 0 and math.isinf(cfg.clip)):
            raise ValueError(f"buffer noise_multiplier must be finite, >= 0 and need a finite clip, got {nm}")
        buf_images, buf_rows = _check_inputs(buffer.images, buffer.rows, n_out)
        if active is not None and len(buf_rows) and not active[buf_rows].all():
            raise ValueError("every buffer label must be an active output")
    noise_seed = int(rng.integers(0, 2**63 - 1))
    torch_seed = int(rng.integers(0, 2**63 - 1))
    gen = torch.Generator(device="cpu").manual_seed(noise_seed)
    private = math.isfinite(cfg.clip)
    std = noise_multiplier * cfg.clip if private else 0.0
    if buffer is not None:
        gen_ref = torch.Generator(device="cpu").manual_seed(int(buffer.rng.integers(0, 2**63 - 1)))
        std_ref = buffer.noise_multiplier * cfg.clip if private else 0.0
    clipped = 0.0
    sampled = sampled_ref = projected = 0
    from tqdm.auto import tqdm

    with (
        film_net(backbone, member, device=device, trainable=True) as net,
        torch.random.fork_rng(devices=[]),
    ):
        torch.manual_seed(torch_seed)  # any stochastic layer (drop-path) is seeded too
        dev = net.head.weight.device
        params = _trainable(net)
        act_t = torch.as_tensor(active, device=dev) if active is not None else None
        gsm = film_grad_sample_module(net.backbone) if private else None
        net.train()  # opacus captures activations only in training mode
        opt = torch.optim.Adam(params, lr=cfg.lr, betas=cfg.betas, eps=cfg.adam_eps)
        try:
            bar_out = progress_stream()  # the terminal only, never a job's log file
            common = {"pre": pre, "act_t": act_t, "physical_batch": physical_batch, "clip": cfg.clip}
            for _ in tqdm(
                range(cfg.steps), desc="FiLM DP-SGD", disable=not progress or bar_out is None, file=bar_out
            ):
                grads, size, step_clipped = noisy_grad_sum(
                    net, gsm, params, images, rows, rate=cfg.sample_rate, std=std, rng=rng, gen=gen, **common
                )
                sampled += size
                if size:
                    clipped += step_clipped / size
                if buffer is not None:  # g_ref and the A-GEM projection (App. D.4, Eq. A102)
                    ref, size, _ = noisy_grad_sum(
                        net,
                        gsm,
                        params,
                        buf_images,
                        buf_rows,
                        rate=buffer.sample_rate,
                        std=std_ref,
                        rng=buffer.rng,
                        gen=gen_ref,
                        **common,
                    )
                    sampled_ref += size
                    flat, did = project(
                        torch.cat([g.reshape(-1) for g in grads]), torch.cat([r.reshape(-1) for r in ref])
                    )
                    projected += did
                    grads = [
                        c.view_as(p)
                        for c, p in zip(flat.split([p.numel() for p in params]), params, strict=True)
                    ]
                for p, g in zip(params, grads, strict=True):
                    p.grad = g / cfg.normaliser
                opt.step()
                opt.zero_grad(set_to_none=True)
        finally:
            if gsm is not None:
                gsm.cleanup()  # public: removes the hooks and every opacus attribute from the shared backbone
        out = _member_from_net(net)
    info = {
        "steps": cfg.steps,
        "sample_rate": cfg.sample_rate,
        "clip": cfg.clip,
        "noise_multiplier": float(noise_multiplier),
        "normaliser": cfg.normaliser,
        "mean_clipped_fraction": clipped / cfg.steps,
        "mean_batch_size": sampled / cfg.steps,
        "accountant_history": [[float(noise_multiplier), cfg.sample_rate, cfg.steps]],
        "trainable_parameters": out.n_parameters(),
    }
    if buffer is not None:
        info.update(
            buffer_noise_multiplier=float(buffer.noise_multiplier),
            buffer_sample_rate=buffer.sample_rate,
            mean_buffer_batch_size=sampled_ref / cfg.steps,
            projected_fraction=projected / cfg.steps,
        )
    return out, info


def film_logits(
    backbone,
    member: FilmMember,
    images: np.ndarray,
    pre: Preprocessing,
    batch_size: int = 128,
    device: str = "auto",
) -> np.ndarray:
    """Logits (n × |O_t|, float32) of one member, its FiLM values swapped into the shared backbone."""
    return next(film_logits_each(backbone, member, [images], pre, batch_size, device))


def film_logits_each(
    backbone,
    member: FilmMember,
    image_sets: list[np.ndarray],
    pre: Preprocessing,
    batch_size: int = 128,
    device: str = "auto",
) -> Iterator[np.ndarray]:
    """:func:`film_logits` of one member on each image set in turn, its values swapped in once
    (one set's logits in memory at a time: 100,000 labels × 1,000 images is 400 MB)."""
    with film_net(backbone, member, device=device) as net, torch.inference_mode():
        net.eval()
        dev = net.head.weight.device
        for images in image_sets:
            images = np.asarray(images)
            out = np.empty((len(images), member.n_out), dtype=np.float32)
            for start in range(0, len(images), batch_size):
                x = preprocess_batch(images[start : start + batch_size], pre).to(dev)
                out[start : start + len(x)] = net(x).float().cpu().numpy()
            yield out
