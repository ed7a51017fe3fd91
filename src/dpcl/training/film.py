"""FiLM DP-SGD ([LabelSpace] Sec. 5.2, Alg. 2, App. D, D.1): :func:`train_film`, the engine the FiLM
learners drive (:func:`dpcl.learners.peft.run_film`: ensemble, Naive, Non-CL; with a
:class:`BufferMechanism`, the DP-A-GEM step of :mod:`dpcl.learners.agem_film`), and its mechanism
primitives (per-sample clipping, the noise, the noisy clipped sum).

The FiLM parameters are :mod:`dpcl.training.film_model`'s, their per-sample gradients
:mod:`dpcl.training.film_per_sample`'s; a trained
member's format and its swap into the shared backbone are :mod:`dpcl.training.film_member`'s;
predictions are :mod:`dpcl.training.film_inference`'s.

DP-SGD: per logical step every sample is taken independently with probability
q (Poisson sampling, from the task's seeded generator); the logical batch is processed in
physical chunks of at most ``physical_batch`` images (bounded memory);
:func:`dpcl.training.film_per_sample.film_grad_sample_module` gives the FiLM parameters' per-sample
gradients (on a backbone whose FiLM layers are all frozen BatchNorms, GroupNorms or LayerNorms their
own backward, without hooks; on any other opacus's *hooks* grad-sample mode,
``GradSampleModule(force_functorch=False)`` around the backbone, which hooks only the trainable
normalisation layers, so timm's fused attention is fine) and the
head's per-sample norms come in closed form (ghost clipping, :func:`clipped_grad_sum`); each
sample's gradient is clipped to L2 norm C over all trainable parameters jointly; the clipped sum
gets N(0, σ²C²) noise from a seeded CPU ``torch.Generator`` (drawn at *every* step, also
when the sampled batch is empty) and is divided by the PUBLIC constant ``cfg.normaliser``
before an Adam step. Steps = ``cfg.steps`` = round(epochs / q), independent of the private
data size, so the release is exactly the Poisson-subsampled Gaussian mechanism composed
``steps`` times, as accounted by :mod:`dpcl.privacy.sgd_accounting`. An empty task still
releases a proper (noise-only) classifier (App. B, Prop. B.6).
"""

from __future__ import annotations

import math
import warnings
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ..backbones import Preprocessing
from ..devices import resolve_device
from ..io import progress_stream
from ..privacy import releases, sampling
from .clipped_sum import CLIP_MARGIN
from .film_input import StepInputs, gaussian_noise_like
from .film_member import FilmMember, film_net, member_from_net, pretrained_member, trainable_parameters
from .film_model import check_per_sample, private_training
from .film_per_sample import HookFreePerSample, film_grad_sample_module
from .heads import DPSGDConfig
from .precision import check_precision, full_precision, reduced_precision
from .projection import project

IN_PLACE_OUTPUT = (
    "this backbone modifies a normalisation layer's output in place (timm's ResNets add the shortcut with "
    "`x += shortcut`), which opacus's per-sample hooks cannot follow. FiLM DP-SGD trains such a backbone "
    "without hooks when every FiLM layer is a frozen BatchNorm, GroupNorm or LayerNorm with no activation or "
    "ReLU, ReLU6 or Hardtanh (dpcl.training.film_per_sample); this one keeps the hooks because {why}"
)


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
    precision: str = "fp32",
) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Σ_i min(1, C′/‖g_i‖) g_i over one physical chunk and the per-sample norms ‖g_i‖, with
    C′ = C·(1 − 2⁻²⁰) (the margin for float32 rounding, :data:`dpcl.training.clipped_sum.CLIP_MARGIN`).

    ``gsm`` is :func:`dpcl.training.film_per_sample.film_grad_sample_module`'s (or an opacus
    ``GradSampleModule`` in hooks mode, ``loss_reduction="sum"``) around the *backbone*: it leaves the
    FiLM parameters' per-sample gradients in their ``grad_sample``. The ``head``'s are
    never materialised (ghost clipping): sample i's head gradient is the outer product of its
    logit gradient e_i and its features f_i (weight) and e_i (bias), so its squared norm is
    ‖e_i‖²(‖f_i‖² + 1) and its clipped sum Σ_i c_i e_i f_iᵀ is one matrix product. That is the
    same number as materialising it, in B × |O_t| memory instead of B × |O_t| × d (Public Labels
    ×1000: 100,000 outputs × 769 × 32 samples would be 10 GB per chunk for ViT-B/16).
    ``params`` are the FiLM parameters followed by the head's weight and bias; ‖g_i‖ is the
    L2 norm over all of them jointly, so no sample changes the sum by more than C (DP-SGD's
    sensitivity). The backbone's passes run at ``precision`` (:mod:`dpcl.training.precision`); the head,
    the norms and the clipped sums in full precision whatever it is.
    """
    g, e, f, factor, norms = clipped_parts(
        gsm, head, params, x, y, clip=clip, active=active, precision=precision
    )
    film = params[:-2]
    with full_precision(x.device):
        flat = factor @ g
        sums = [s.view_as(p) for s, p in zip(flat.split([p.numel() for p in film]), film, strict=True)]
        ce = e * factor[:, None]
        return sums + [ce.T @ f, ce.sum(dim=0)], norms


def clipped_parts(
    gsm: nn.Module,
    head: nn.Linear,
    params: list[torch.Tensor],
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    clip: float,
    active: torch.Tensor | None = None,
    precision: str = "fp32",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The parts of one chunk's clipped per-sample gradients (:func:`clipped_grad_sum`): the FiLM
    parameters' per-sample gradients g (B × P, in parameter order), the logit gradients e (B × |O_t|)
    and features f (B × d) whose outer products are the head's, the clipping factors
    min(1, C′/‖g_i‖) and the norms ‖g_i‖ (in g's type)."""
    dev = x.device
    with reduced_precision(precision, dev):
        feats = gsm(x)
    with full_precision(dev):
        # the head's weights enter detached: autograd then skips their gradient (B x |O_t| x d
        # multiply-adds and a |O_t| x d write per chunk, never used: the clipped sum below is ghost)
        feats = feats.to(head.weight.dtype)  # float32 (the tests' float64 models: float64)
        logits = F.linear(feats, head.weight.detach(), head.bias.detach())
        if not logits.requires_grad:  # no FiLM parameter in the graph: the logits are the only leaf
            logits.requires_grad_()
        logits.retain_grad()
        loss = F.cross_entropy(_masked_logits(logits, active), y, reduction="sum")
    with warnings.catch_warnings(), reduced_precision(precision, dev, forward=False):
        # "Full backward hook is firing ... no inputs require gradients": the input is data, as expected.
        warnings.filterwarnings("ignore", message="Full backward hook is firing")
        loss.backward()
    film, (w, b) = params[:-2], params[-2:]
    if w is not head.weight or b is not head.bias:
        raise ValueError("params must end with the head's weight and bias")
    n = len(y)
    grads = []
    for p in film:
        gs = getattr(p, "grad_sample", None)
        if gs is None:  # no per-sample gradient: the parameter is outside this loss's graph, zero gradient
            gs = torch.zeros((n, *p.shape), device=p.device, dtype=p.dtype)
        grads.append(gs.reshape(n, -1).to(p.dtype))
        p.grad_sample = None
        p.grad = None
    with full_precision(dev):
        # one (B, P) matrix of the FiLM parameters' per-sample gradients: their squared norms and their
        # clipped sum are one kernel each, not two per parameter tensor
        g = torch.cat(grads, dim=1) if grads else torch.zeros((n, 0), device=dev, dtype=w.dtype)
        del grads
        e, f = logits.grad, feats.detach()  # (B, |O_t|) logit gradients, (B, d) features
        w.grad = b.grad = None
        # squares in float32 (each rounded by at most 2⁻²⁴), sums in float64: the norms are exact to a
        # relative 2⁻²⁵, which the clipping margin covers with the roundings of the factor and the products
        sq = _sq_sum(e) * (_sq_sum(f) + 1.0) + _sq_sum(g)
        norms = torch.sqrt(sq)
        factor = torch.clamp((clip * CLIP_MARGIN) / torch.clamp(norms, min=1e-12), max=1.0).to(g.dtype)
        return g, e, f, factor, norms.to(g.dtype)


def _sq_sum(t: torch.Tensor) -> torch.Tensor:
    """Row-wise sums of squares of a (B, k) tensor, accumulated in float64."""
    return (t * t).sum(dim=1, dtype=torch.float64)


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
    inputs: StepInputs,
    precision: str,
) -> tuple[list[torch.Tensor], np.ndarray, torch.Tensor]:
    """(Σ of clipped per-sample gradients, the sample's indices, clipped count) of one Poisson sample at
    ``rate`` (``gsm is None``: the non-private twin, plain gradient sum), chunk by chunk from ``inputs``.
    The count is a tensor on the model's device, summed there: reading it per chunk would wait for the
    device."""
    n = len(rows)
    dev = net.head.weight.device
    batch = sampling.by_coins(rng, n, rate, population=images)  # drawn and reported by the primitive
    sums = [torch.zeros_like(p) for p in params]
    n_clipped = torch.zeros((), dtype=torch.int64, device=dev)
    for x, y in inputs.chunks(images, rows, batch, pre=pre, physical_batch=physical_batch):
        if gsm is not None:
            try:
                chunk, norms = clipped_grad_sum(
                    gsm, net.head, params, x, y, clip=clip, active=act_t, precision=precision
                )
            except RuntimeError as err:
                if "BackwardHookFunction is a view and is being modified inplace" not in str(err):
                    raise
                why = HookFreePerSample.refusal(net.backbone, precision=precision)
                raise RuntimeError(IN_PLACE_OUTPUT.format(why=why)) from err
            n_clipped += (norms > clip).sum()
        else:
            with reduced_precision(precision, dev):
                logits = net(x)
            loss = F.cross_entropy(
                _masked_logits(logits.to(net.head.weight.dtype), act_t), y, reduction="sum"
            )
            with reduced_precision(precision, dev, forward=False):
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
    inputs: StepInputs | None = None,
    precision: str = "fp32",
) -> tuple[list[torch.Tensor], int, torch.Tensor]:
    """One release of FiLM DP-SGD, the mechanism primitive of :func:`train_film`: the clipped gradient sum
    of a Poisson sample at ``rate`` (drawn from ``rng``) plus N(0, ``std``² I) from ``gen`` (none when
    ``std`` is 0; one draw over all parameters, :func:`dpcl.training.film_input.gaussian_noise_like`),
    one tensor per trainable parameter; also the sample's size and clipped count (diagnostics, not
    private; the count a 0-dim tensor on the model's device). ``inputs`` prepares the chunks and the
    noise (default: in this thread); the backbone computes at ``precision``. The release is reported to
    an audit that listens (:mod:`dpcl.privacy.releases`: the images read, the clipping bound, the noise,
    the released value flat in parameter order), whatever the caller does with it."""
    with (
        nullcontext(inputs)
        if inputs is not None
        else StepInputs(net.head.weight.device, prefetch=False) as io
    ):
        noise = io.noise(params, std, gen, draw=gaussian_noise_like) if std > 0 else None
        sums, batch, n_clipped = _poisson_grad_sum(
            net, gsm, params, images, rows, rate, clip, rng, pre, act_t, physical_batch, io, precision
        )
        grads = sums if noise is None else [s + z for s, z in zip(sums, noise(), strict=True)]
    if releases.listening():  # an audit sees every release, and may replay it (dpcl.privacy.releases)
        read = images[batch]
        canaries = releases.canaries_read(read) if gsm is not None else None
        grads = releases.publish(
            "film_clipped_gradient_sum",
            grads,
            rows=read,
            sensitivity=clip,
            noise_scale=std,
            attribution=None
            if canaries is None
            else film_attribution(
                net,
                gsm,
                params,
                canaries,
                clip=clip,
                pre=pre,
                act_t=act_t,
                physical_batch=physical_batch,
                precision=precision,
            ),
        )
    return grads, int(batch.size), n_clipped


def film_attribution(
    net,
    gsm,
    params: list[torch.Tensor],
    canaries: tuple[np.ndarray, np.ndarray],
    *,
    clip: float,
    pre: Preprocessing,
    act_t,
    physical_batch: int,
    precision: str,
):
    """``(rows, labels, value) -> (dots, norms)`` of a release for an audit's ``canaries`` (images, output
    rows; :func:`dpcl.privacy.releases.canaries_read`), computed now, at the release's state (the model
    changes after every step): the head-weight block of each canary's clipped per-sample gradient,
    c_k = min(1, C′/‖g_k‖)·e_k f_kᵀ (the factor from the joint norm, as :func:`clipped_grad_sum` clips;
    e_k the logit gradient, f_k the features), projected on the weight block of the flat release
    ``value`` (FiLM parameters, then the head's weight row by row, then its bias: the release's layout),
    and its norm min(1, C′/‖g_k‖)·‖e_k‖‖f_k‖. The FiLM and bias blocks are left out, as
    :func:`dpcl.training.clipped_sum.head_attribution` leaves out the bias: every record adds to them,
    so their projections would carry the other records' gradients, a term shared by every canary of the
    release; a canary with an output of its own has a weight block nearly orthogonal to every other
    record's (its own row). Kept per canary: e_k, f_k and the factor, so the projection is on whatever
    value the audit passes. None where a canary's row lies outside this release's outputs or is inactive
    (nothing to attribute)."""
    images, labels = canaries
    n_out = net.head.weight.shape[0]
    if labels.min() < 0 or labels.max() >= n_out or (act_t is not None and not bool(act_t[labels].all())):
        return None
    parts = []
    with StepInputs(net.head.weight.device, prefetch=False) as io:
        for x, y in io.chunks(images, labels, np.arange(len(labels)), pre=pre, physical_batch=physical_batch):
            _g, e, f, factor, _norms = clipped_parts(
                gsm, net.head, params, x, y, clip=clip, active=act_t, precision=precision
            )
            parts.append([t.detach().to("cpu", torch.float64) for t in (e, f, factor)])
    e, f, factor = (torch.cat(ts).numpy() for ts in zip(*parts, strict=True))
    n_w = net.head.weight.numel()
    n_film = sum(p.numel() for p in params[:-2])
    norms = factor * np.linalg.norm(e, axis=1) * np.linalg.norm(f, axis=1)
    rows_given, labels_given = images, labels

    def attribution(rows: np.ndarray, labels: np.ndarray, value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if not (np.array_equal(rows, rows_given) and np.array_equal(labels, labels_given)):
            raise ValueError("a FiLM release attributes the canaries of its recording only (release time)")
        v_w = np.asarray(value[n_film : n_film + n_w], dtype=np.float64).reshape(n_out, -1)
        return factor * np.einsum("kd,kd->k", e @ v_w, f), norms

    return attribution


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
    precision: str = "fp32",
    prefetch: bool | None = None,
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

    ``precision`` is the backbone's passes' (:mod:`dpcl.training.precision`: fp32, tf32 on CUDA, bf16);
    ``prefetch`` prepares the chunks and the noise in background threads
    (:class:`dpcl.training.film_input.StepInputs`; None: on CUDA only). Neither changes the privacy
    guarantee; prefetching changes no bit.
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
    check_precision(precision, resolve_device(device))
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
    clipped = None  # the clipped fractions' sum, on the device: read once, after training
    sampled = sampled_ref = projected = 0
    from tqdm.auto import tqdm

    with (
        film_net(backbone, member, device=device, trainable=True) as net,
        private_training(net.backbone)
        if private
        else nullcontext(),  # opacus's hooks refuse in-place outputs
        torch.random.fork_rng(devices=[]),
        StepInputs(net.head.weight.device, prefetch=prefetch) as inputs,
    ):
        torch.manual_seed(torch_seed)  # any stochastic layer (drop-path) is seeded too
        dev = net.head.weight.device
        params = trainable_parameters(net)
        act_t = torch.as_tensor(active, device=dev) if active is not None else None
        gsm = film_grad_sample_module(net.backbone, precision=precision) if private else None
        net.train()  # opacus captures activations only in training mode
        opt = torch.optim.Adam(params, lr=cfg.lr, betas=cfg.betas, eps=cfg.adam_eps)
        try:
            bar_out = progress_stream()  # the terminal only, never a job's log file
            common = {
                "pre": pre,
                "act_t": act_t,
                "physical_batch": physical_batch,
                "clip": cfg.clip,
                "inputs": inputs,
                "precision": precision,
            }
            for _ in tqdm(
                range(cfg.steps), desc="FiLM DP-SGD", disable=not progress or bar_out is None, file=bar_out
            ):
                grads, size, step_clipped = noisy_grad_sum(
                    net, gsm, params, images, rows, rate=cfg.sample_rate, std=std, rng=rng, gen=gen, **common
                )
                sampled += size
                if size:
                    frac = step_clipped.double() / size
                    clipped = frac if clipped is None else clipped + frac
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
        out = member_from_net(net)
    info = {
        "steps": cfg.steps,
        "sample_rate": cfg.sample_rate,
        "clip": cfg.clip,
        "noise_multiplier": float(noise_multiplier),
        "normaliser": cfg.normaliser,
        "mean_clipped_fraction": (0.0 if clipped is None else float(clipped)) / cfg.steps,
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
