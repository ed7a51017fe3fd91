"""FM-A-GEM: a sound functional-mechanism variant of L2DP-ML ([Lai2022], Sec. 4, Alg. 1-2).

L2DP-ML perturbs the Taylor coefficients of its losses with Laplace noise drawn **once** and
added to every example of every task, and keeps the perturbed data in an A-GEM memory. That
is not DP (x̄_a − x̄_b = x_a − x_b exactly). This module keeps the idea - train a
head on a noisy polynomial surrogate of the loss, with A-GEM against past tasks - and makes
it sound:

1. **Public projection.** A PCA (:func:`dpcl.public_pca.fit_projection`) fitted on *public* features maps
   x ∈ R^D to z = P(x − μ) ∈ R^dim and scales z to ‖z‖ ≤ 1 (z / max(1, ‖z‖)). Both steps are
   data-independent functions of one record, so every record has ‖z‖ ≤ 1.
2. **Per-task functional mechanism, fresh noise.** For task t with label space O_t (K = K_t
   outputs, record r's row y_r = position of its label in sorted O_t) the softmax cross-entropy
   of a linear head W (K × dim) at logits u = W z is ℓ(u) = log Σ_k e^{u_k} − u_y; at u = 0,
   ∇_u ℓ = 1/K − e_y and ∇²_u ℓ = H_K := I/K − 11ᵀ/K² (softmax Jacobian at uniform p). Summed
   over D_t the second-order expansion at W = 0 is

       Σ_r ℓ(W z_r) ≈ n log K − ⟨b_t, W⟩ + ½ tr(Wᵀ H_K W A_t),
       b_t = Σ_r (e_{y_r} − 1/K) z_rᵀ  (K × dim),     A_t = Σ_r z_r z_rᵀ  (dim × dim),

   (the constant n log K is not needed and not released). :func:`release_coefficients` adds
   N(0, σ²) to every entry of b_t and of the upper triangle (diagonal included) of A_t,
   mirrored, with σ = ``gaussian_sigma(ε, δ, SENSITIVITY)`` for the task's training budget.
3. **Training on released coefficients only.** One head W over the label universe. Task t
   runs ``steps`` gradient steps on L̂_t(W) = −⟨b̃_t, W_{O_t}⟩ + ½ tr(W_{O_t}ᵀ H_K W_{O_t} Ã_t),
   ∇ = −b̃_t + H_K W_{O_t} Ã_t, from the current W. The memory is the list of past releases
   (Ã_s, b̃_s, O_s); g_ref = ∇ Σ_{s<t} L̂_s(W), and g is projected (A-GEM, Eq. A102) when
   gᵀg_ref < 0. Everything after the release is post-processing: rereading the memory costs
   nothing, so the tasks compose in parallel ([LabelSpace] Thm B.7) and each task's ledger holds
   one Gaussian entry. In a disjoint class-incremental scenario the task surrogates touch
   disjoint rows of W, so gᵀg_ref = 0 and the projection never fires; it acts when label
   spaces overlap (Base Dataset and public label spaces, blurry scenarios). For the same
   reason no surrogate contrasts labels of different tasks: cross-task calibration of the
   logits is left to the early stopping (see :class:`FMConfig`).

**Sensitivity** (add/remove one record, ‖z‖ ≤ 1). The released vector is v = (triu A_t,
vec b_t) (:func:`released_vector`). One record changes b_t by (e_y − 1/K) zᵀ, whose Frobenius norm is
‖e_y − 1/K‖·‖z‖ = √((1 − 1/K)² + (K − 1)/K²)·‖z‖ = √(1 − 1/K)·‖z‖, and the upper triangle of A_t
by that of z zᵀ, whose squared norm is Σ_{i≤j} z_i² z_j² = ½(‖z‖⁴ + Σ_i z_i⁴) ≤ ‖z‖⁴ (equality
iff z lies on a coordinate axis). So ‖Δv‖² ≤ (1 − 1/K) + 1 = 2 − 1/K < 2, and the bound
√(2 − 1/K) is attained by z = ±e_i. The ledger's query ``taylor_coefficients_projected_features``
uses the K-free bound √2 (:data:`SENSITIVITY`); it is within 10 % of the attained value for
K ≥ 3 (√(5/3)/√2 = 0.913) and loose by √(4/3) at K = 2 and √2 at K = 1 (where b_t ≡ 0 carries no
data at all). A K-dependent query would be sound (K_t = |O_t| is public) but is not what the
ledger knows.

**Post-processing of a release** (:func:`postprocess`, no privacy cost): Ã is projected onto
the PSD cone (negative eigenvalues set to 0), so the surrogate is convex; b̃'s columns are
centred, because every column of the true b_t sums to 0 (Σ_k (e_y − 1/K)_k = 0). The centring
removes the noise component along 1, which would otherwise shift all of O_t's logits together
and bias the comparison with other tasks' labels at prediction time.

**Empty label space** (K_t = 0): no record is in the task's release (the caller drops labels
outside O_t), but the task still releases a noisy Ã_t (b̃_t is 0 × dim), so the ledger keeps
its one Gaussian training entry per task and whether O_t is empty changes nothing about the
ledger. Such a release (and any with K_t = 1, whose surrogate is constant) trains nothing.

**Step size.** Step = ``lr`` / L_t with L_t = λ_max(Ã_t⁺)/K_t the largest curvature of L̂_t
(λ_max(H_K) = 1/K for K ≥ 2): a function of the release, so post-processing. Plain gradient
descent on a convex quadratic converges for lr < 2; with a finite ``steps`` it is early-stopped
in low-curvature (noise-dominated) directions, which acts as a regulariser. A release whose
PSD part is 0 (pure noise on an empty task) has no curvature and is not trained on.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, fields

import numpy as np

from ..privacy import releases
from ..privacy.gaussian import gaussian_sigma
from ..privacy.verify import EntrySpec, LedgerSpec
from ..public_pca import Projection
from ..seeding import rng
from ..sorted_ints import isin
from ..training.projection import project
from .aggregation import aggregate
from .registry import LearnerAudit, LearnerSpec

#: the ledger each run writes per task (checked by dpcl.privacy.verify against the plan): the Gaussian
#: functional-mechanism release of the loss's Taylor coefficients on projected features, Δ = √2
LEDGER_SPEC = LedgerSpec(training=(EntrySpec("gaussian", query="taylor_coefficients_projected_features"),))

LEARNER = "fm_agem"

#: the registry's entries (dpcl.learners.registry)
SPECS = (
    LearnerSpec(
        name="fm_agem",
        display="FM-A-GEM (sound variant)",
        adapter="functional",
        job="projected",
        methods="projected",
        module="fm_agem",
        fig3="compared",
        config_blocks=("fm_agem",),
        run="dpcl.learners.fm_agem:run",
        audit=LearnerAudit(
            function="dpcl.audits.fm_agem_audits:audit_canary", name="FM-A-GEM learner (sound variant)"
        ),
        whitebox=LearnerAudit(function="dpcl.audits.fm_agem_audits:audit_release", name="FM-A-GEM"),
        resources={"mem_mb": 2000, "runtime": 30},
    ),
)
#: the ledger's query (dpcl.privacy.ledger.QUERY_SENSITIVITY) and its L2 sensitivity (module docstring)
QUERY = "taylor_coefficients_projected_features"
SENSITIVITY = math.sqrt(2.0)
#: how FM-A-GEM's tuned values are chosen (privacy.json "hyperparameters"; :func:`tune_fm_agem`)
FM_SEARCH = (
    "grid search over (dim, lr, steps) of FM-A-GEM's two-task loop in the run's label space at its "
    "training budget"
)
#: how FMConfig's defaults were chosen: with private data (an untuned run with them says so)
FM_DEFAULTS_CHOSEN = (
    "fm_agem's defaults (dim 32, lr 0.5, steps 5) were chosen by measuring final accuracy on the "
    "embedded default benchmark's training and test data (Split-Fashion-MNIST; dpcl.learners.fm_agem."
    "FMConfig), outside the accountant"
)
#: keys of the config block that belong to the workflow, not to the learner
WORKFLOW_KEYS = frozenset({"label_methods"})


@dataclass(frozen=True)
class FMConfig:
    """Settings of FM-A-GEM.

    ``lr`` is relative to the stable step 1/L_t of the task's surrogate (module docstring), so
    it does not depend on the task's size. With ``tuning.enabled`` (the default) the workflow
    does not use these values: it picks (dim, lr, steps) per run from :data:`GRID` on the tuning
    set (:func:`tune_fm_agem`). The defaults here are what an untuned run uses, and they were
    chosen WITH PRIVATE DATA: measured on the embedded default benchmark's training and test data
    (Split-Fashion-MNIST, 5 tasks × 2 classes, EfficientNet-Lite0 features, 600
    records per task, PCA on the public tuning split, 2-3 seeds), so an untuned run with them
    lists that choice under ``unaccounted_uses`` (:func:`hyperparameters_note`). Final average accuracy with
    lr = 0.5 and steps = 3 / 5 / 10 / 20 / 40 was 0.65 / 0.66 / 0.65 / 0.63 / 0.61 at ε = ∞ and
    0.64 / 0.64 / 0.60 / 0.50 / 0.35 at ε = 1 (dim = 32): near the exact surrogate minimiser
    W_O = K b̃ Ã⁻¹ the noise (and the Taylor error) is amplified along low-curvature directions,
    and heads trained task by task lose their cross-task calibration, so a few steps - an
    early-stopped, curvature-scaled class-sum classifier - generalise best. ``dim`` = 32 was as
    good as 64 and 128 (within 0.01-0.02) and costs 528 noisy entries of Ã instead of 8256.
    On the synthetic clusters of the tests every setting learns (accuracy 1.0 at ε = ∞).
    """

    dim: int = 32
    lr: float = 0.5
    steps: int = 5

    def validate(self) -> None:
        """Raise with the key named (``fm_agem.<key>``) if a value is out of range."""
        if isinstance(self.dim, bool) or not isinstance(self.dim, (int, np.integer)) or self.dim < 1:
            raise ValueError(f"fm_agem.dim must be a positive integer, got {self.dim!r}")
        if isinstance(self.lr, bool) or not isinstance(self.lr, (int, float)) or not 0.0 < self.lr < 2.0:
            raise ValueError(
                f"fm_agem.lr must lie in (0, 2) (relative to the surrogate's curvature), got {self.lr!r}"
            )
        if isinstance(self.steps, bool) or not isinstance(self.steps, (int, np.integer)) or self.steps < 0:
            raise ValueError(f"fm_agem.steps must be a non-negative integer, got {self.steps!r}")

    @classmethod
    def from_config(cls, block: dict) -> FMConfig:
        """From the config's ``fm_agem`` block; workflow-only keys (:data:`WORKFLOW_KEYS`) are ignored,
        any other unknown key is an error naming it."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(block) - known - WORKFLOW_KEYS)
        if unknown:
            raise ValueError(
                f"unknown key(s) {', '.join('fm_agem.' + k for k in unknown)}; allowed: "
                f"{', '.join('fm_agem.' + k for k in sorted(known))}"
            )
        cfg = cls(**{k: v for k, v in block.items() if k in known})
        cfg.validate()
        return cfg


def coefficients(z: np.ndarray, rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact Taylor coefficients (A_t, b_t) of the summed softmax cross-entropy at W = 0 (module docstring).

    ``z`` (n × dim) must have ‖z_r‖ ≤ 1 (the sensitivity rests on it); ``rows`` are the records'
    positions in the task's sorted label space, 0..k−1.
    """
    z = np.asarray(z, dtype=np.float64)
    rows = np.asarray(rows, dtype=np.int64)
    if z.ndim != 2 or rows.shape != (z.shape[0],):
        raise ValueError(f"need z of shape (n, dim) and rows of shape (n,), got {z.shape} and {rows.shape}")
    if not np.isfinite(z).all():  # NaN compares false: the norm check below would pass it
        raise ValueError("records must be finite (a NaN or inf entry would make the release NaN)")
    if z.size and float(np.max(np.einsum("ij,ij->i", z, z))) > 1.0 + 1e-9:
        raise ValueError("records must have ‖z‖ ≤ 1 (apply the public Projection first)")
    if k < 0 or (rows.size and (rows.min() < 0 or rows.max() >= k)):
        raise ValueError(
            f"rows must lie in 0..{k - 1}: records with a label outside O_t are not in the release"
        )
    a = z.T @ z
    b = np.zeros((k, z.shape[1]))
    if k:
        np.add.at(b, rows, z)  # Σ_r e_{y_r} z_rᵀ
        b -= z.sum(axis=0) / k  # − (1/K) 1 (Σ_r z_r)ᵀ
    return a, b


def released_vector(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The vector the Gaussian mechanism releases: the upper triangle of A (diagonal included), then vec b."""
    return np.concatenate([a[np.triu_indices(a.shape[0])], np.asarray(b).ravel()])


def release_coefficients(
    z: np.ndarray, rows: np.ndarray, k: int, sigma: float, gen: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """(Ã_t, b̃_t): the Taylor coefficients plus N(0, σ²) on every entry of b_t and of A_t's upper
    triangle (mirrored, so Ã_t is symmetric). One σ for the whole vector: L2 sensitivity √2.

    The noise is drawn in a fixed order (upper triangle row by row, then b) from ``gen``, the
    task's own generator; σ = 0 releases the exact coefficients (non-private).
    """
    if not (sigma >= 0 and math.isfinite(sigma)):
        raise ValueError(f"sigma must be finite and >= 0, got {sigma!r}")
    a, b = coefficients(z, rows, k)
    if sigma > 0:
        dim = a.shape[0]
        iu = np.triu_indices(dim)
        tri = sigma * gen.standard_normal(len(iu[0]))
        noise = np.zeros((dim, dim))
        noise[iu] = tri
        noise = noise + np.triu(noise, 1).T
        a = a + noise
        b = b + sigma * gen.standard_normal(b.shape)
    if releases.listening():  # an audit sees every release, and may replay it (dpcl.privacy.releases)
        iu = np.triu_indices(a.shape[0])
        a, b = releases.publish(
            "taylor_coefficients",
            (a, b),
            rows=z,
            sensitivity=SENSITIVITY,
            noise_scale=sigma,
            value=np.concatenate([a[iu], np.ravel(b)]),
            attribution=taylor_attribution(a.shape[0], k) if k else None,
        )
    return a, b


def taylor_attribution(dim: int, k: int):
    """``(rows, labels, value) -> (dots, norms)`` of a release (:mod:`dpcl.privacy.releases`) for records
    (``rows``: projected, ‖z‖ ≤ 1, as the release reads them; ``labels``: their rows in the task's sorted
    label space): record i's contribution to b_t's own row, (1 − 1/K) z_iᵀ, projected on that row of
    the released b̃_t (the flat ``value``: A's upper triangle, then b row by row), and its norm
    (1 − 1/K)‖z_i‖. A_t's block and b_t's other rows are left out: every record adds to them (z zᵀ,
    −z/K), so their projections would carry the other records' contributions, a term shared by every
    canary of the release; a canary with a label of its own has a row of its own."""
    n_a = dim * (dim + 1) // 2

    def attribution(rows: np.ndarray, labels: np.ndarray, value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        z = np.asarray(rows, dtype=np.float64)
        own = np.asarray(value, dtype=np.float64)[n_a:].reshape(k, dim)[np.asarray(labels, dtype=np.int64)]
        scale = 1.0 - 1.0 / k
        return scale * np.einsum("ij,ij->i", z, own), scale * np.linalg.norm(z, axis=1)

    return attribution


def psd_project(a: np.ndarray) -> np.ndarray:
    """Nearest PSD matrix in Frobenius norm: eigenvalues clipped at 0 (post-processing of a release)."""
    a = 0.5 * (a + a.T)
    lam, vec = np.linalg.eigh(a)
    if lam.size == 0 or lam[0] >= 0:
        return a
    out = (vec * np.maximum(lam, 0.0)) @ vec.T
    return 0.5 * (out + out.T)


@dataclass(frozen=True)
class ReleasedTask:
    """One task's released, post-processed surrogate: Ã (PSD, dim × dim), b̃ (K × dim), its label rows.

    This is all the memory keeps of a task: functions of the DP release only, never features or labels.
    """

    a: np.ndarray
    b: np.ndarray
    labels: np.ndarray  # sorted O_t (public)

    @property
    def k(self) -> int:
        return int(len(self.labels))

    def curvature(self) -> float:
        """L = λ_max(Ã)·λ_max(H_K): the largest eigenvalue of the surrogate's Hessian (0 if K < 2)."""
        if self.k < 2 or self.a.size == 0:
            return 0.0
        return float(np.linalg.eigvalsh(self.a)[-1]) / self.k

    def gradient(self, w: np.ndarray) -> np.ndarray:
        """∇_W L̂(W) over the whole head (rows outside O_t are 0): −b̃ + H_K W_O Ã, H_K W = (W − mean_rows W)/K."""
        g = np.zeros_like(w)
        if self.k:
            wo = w[self.labels]
            g[self.labels] = -self.b + ((wo - wo.mean(axis=0)) / self.k) @ self.a
        return g

    def loss(self, w: np.ndarray) -> float:
        """L̂(W) = −⟨b̃, W_O⟩ + ½ tr(W_Oᵀ H_K W_O Ã) (the Taylor expansion without its constant n log K)."""
        if not self.k:
            return 0.0
        wo = w[self.labels]
        hw = (wo - wo.mean(axis=0)) / self.k
        return float(-np.sum(self.b * wo) + 0.5 * np.sum((hw @ self.a) * wo))


def postprocess(a_tilde: np.ndarray, b_tilde: np.ndarray, labels: np.ndarray) -> tuple[ReleasedTask, int]:
    """(the released surrogate, number of negative eigenvalues clipped): Ã onto the PSD cone and b̃'s
    columns centred (the true b_t's columns sum to 0). Post-processing: no privacy cost."""
    neg = int(np.sum(np.linalg.eigvalsh(0.5 * (a_tilde + a_tilde.T)) < 0)) if a_tilde.size else 0
    b = np.asarray(b_tilde, dtype=np.float64)
    if b.shape[0]:
        b = b - b.mean(axis=0)
    return ReleasedTask(a=psd_project(a_tilde), b=b, labels=np.asarray(sorted(labels), dtype=np.int64)), neg


class FMHead:
    """The head W (labels × dim) and the memory of released surrogates; nothing else is kept."""

    def __init__(self, n_labels: int, dim: int) -> None:
        self.w = np.zeros((n_labels, dim))
        self.seen = np.zeros(n_labels, dtype=bool)
        self.memory: list[ReleasedTask] = []

    def learn_task(
        self,
        z: np.ndarray,
        y: np.ndarray,
        label_space: list[int],
        sigma: float,
        gen: np.random.Generator,
        cfg: FMConfig,
    ) -> dict:
        """Release task t's coefficients (fresh noise from ``gen``), train on them with A-GEM against the
        memory, then append the release to the memory. Returns non-private diagnostics."""
        labels = np.asarray(sorted(label_space), dtype=np.int64)
        y = np.asarray(y, dtype=np.int64)
        if y.size and not isin(y, labels).all():
            raise ValueError(
                "training labels outside the task's output label space: drop or remap them first"
            )
        a_t, b_t = release_coefficients(z, np.searchsorted(labels, y), len(labels), sigma, gen)
        task, negative = postprocess(a_t, b_t, labels)
        del a_t, b_t
        self.seen[labels] = True
        curv = task.curvature()
        step = cfg.lr / curv if curv > 0 else 0.0
        projected = 0
        if step > 0:
            for _ in range(cfg.steps):
                g = task.gradient(self.w)
                if self.memory:
                    g_ref = sum(m.gradient(self.w) for m in self.memory)
                    flat, did = project(g.ravel(), g_ref.ravel())
                    g, projected = flat.reshape(g.shape), projected + did
                self.w -= step * g
        self.memory.append(task)
        return {
            "outputs": int(len(labels)),
            "negative_eigenvalues_clipped": negative,
            "step_size": step,
            "trained": step > 0,
            "projected_fraction": projected / cfg.steps if cfg.steps and step > 0 else 0.0,
            "surrogate_loss": task.loss(self.w),
        }

    def predict(self, z: np.ndarray) -> np.ndarray:
        """Argmax of z Wᵀ over the labels seen so far (−1 if none)."""
        ids = np.flatnonzero(self.seen)
        if not ids.size:
            return np.full(len(z), -1, dtype=np.int64)
        return aggregate([z @ self.w[ids].T], [ids])


#: the search space of :func:`tune_fm_agem`: public constants, wider than the measurements behind the
#: untuned defaults (FMConfig: dim 32-128, lr 0.5, steps 3-40), lr over the whole stable range (0, 2)
GRID = {"dim": (16, 32, 64), "lr": (0.25, 0.5, 1.0, 1.5), "steps": (1, 3, 5, 10, 20, 40)}
#: noise draws per grid point (the same draws for every point of a dim: common random numbers)
TUNING_REPEATS = 3


def grid_configs(grid: dict | None = None) -> list[FMConfig]:
    """Every (dim, lr, steps) of ``grid`` (default :data:`GRID`), validated, in grid order."""
    g = GRID if grid is None else grid
    cfgs = [FMConfig(dim=d, lr=lr, steps=s) for d in g["dim"] for lr in g["lr"] for s in g["steps"]]
    for c in cfgs:
        c.validate()
    return cfgs


def tune_fm_agem(
    x: np.ndarray,
    y: np.ndarray,
    tasks: list[list[int]] | tuple[tuple[int, ...], ...],
    label_space: str,
    epsilon: float,
    delta: float,
    *,
    seed: int,
    projection_for: Callable[[int], Projection],
    grid: dict | None = None,
    repeats: int = TUNING_REPEATS,
    max_dim: int | None = None,
) -> dict:
    """Grid search of (dim, lr, steps) on a tuning set (features ``x``, labels ``y``) split 70:30
    (:func:`dpcl.training.tuning.split_tuning_set`), the same protocol as the DP-SGD learners' Optuna
    search (App. D.1; :mod:`dpcl.training.tuning_protocol` picks the set: the public tuning split or,
    as the paper, private training data).

    Each grid point runs FM-A-GEM's own loop on the 70 % part: the two ``tasks`` (classes of ``y``;
    the workflow passes the benchmark's first two tasks) in ``label_space`` ("task": O_t = the
    task's classes, Label Oracle / Release Labels; "base": every tuning class at every task), each
    task's coefficients released at (ε, δ) (the run's training budget, fresh noise per task), and
    is scored by the final accuracy on the 30 % of both tasks, averaged over ``repeats`` noise draws
    (the same draws for every point of a dim). ``projection_for(dim)`` is the run's public PCA, which
    has at most ``max_dim`` axes (min(D, public records − 1)): larger dims of the grid are left out.
    The search is :func:`dpcl.training.grid_search.grid_search`; this function supplies its score.
    Returns the best point (the first of equals in grid order), the grid searched and every point's
    score."""
    from ..training.grid_search import grid_search
    from ..training.tuning import split_tuning_set
    from ..training.tuning_protocol import TUNING_LABEL_SPACES

    if label_space not in TUNING_LABEL_SPACES:
        raise ValueError(f"label_space must be one of {TUNING_LABEL_SPACES}, got {label_space!r}")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be a positive integer, got {repeats!r}")
    classes, yy = np.unique(np.asarray(y), return_inverse=True)
    tasks = [[int(c) for c in t] for t in tasks]
    if len(tasks) != 2 or not all(tasks) or sorted(c for t in tasks for c in t) != classes.tolist():
        raise ValueError(
            f"FM-A-GEM's tuning needs two tasks of classes covering the tuning set's {classes.tolist()}, "
            f"got {tasks}"
        )
    grid = {k: list(v) for k, v in (GRID if grid is None else grid).items()}
    if max_dim is not None:
        grid["dim"] = [d for d in grid["dim"] if d <= max_dim]
        if not grid["dim"]:
            raise ValueError(f"no fm_agem grid dim fits the public PCA's {max_dim} axes")
    rows = [np.searchsorted(classes, t) for t in tasks]
    spaces = [r.tolist() for r in rows] if label_space == "task" else [list(range(len(classes)))] * 2
    tr, va = split_tuning_set(yy, seed, LEARNER)
    parts = [tr[np.isin(yy[tr], r)] for r in rows]
    sigma = fm_sigma(epsilon, delta)
    points = [{"dim": c.dim, "lr": c.lr, "steps": c.steps} for c in grid_configs(grid)]  # validated
    by_dim: dict[int, tuple] = {}

    def score(point: dict) -> float:  # FM-A-GEM's own two-task loop, averaged over the noise draws
        cfg = FMConfig(**point)
        if cfg.dim not in by_dim:
            proj = projection_for(cfg.dim)
            by_dim[cfg.dim] = ([proj.apply(x[p]) for p in parts], proj.apply(x[va]))
        z_tasks, z_va = by_dim[cfg.dim]
        accs = []
        for r in range(repeats):
            gen = rng(seed, "tuning", LEARNER, label_space, "repeat", r, cfg.dim)
            head = FMHead(len(classes), cfg.dim)
            for z, p, space in zip(z_tasks, parts, spaces, strict=True):
                head.learn_task(z, yy[p], space, sigma, gen, cfg)
            accs.append(float(np.mean(head.predict(z_va) == yy[va])))
        return float(np.mean(accs))

    best, trials = grid_search(points, score)
    return {
        "learner": LEARNER,
        "best": {k: best[k] for k in ("dim", "lr", "steps")},
        "best_validation_accuracy": best["accuracy"],
        "grid": grid,
        "repeats": repeats,
        "label_space": label_space,
        "tasks": tasks,
        "tuning_set": {"n": int(len(y)), "train": int(len(tr)), "validation": int(len(va))},
        "epsilon": epsilon,
        "delta": delta,
        "trials": trials,
    }


def fm_sigma(epsilon: float, delta: float) -> float:
    """σ of a task's release for its training budget (ε, δ) at sensitivity √2; 0 if ε = ∞."""
    if math.isinf(epsilon):
        return 0.0
    return gaussian_sigma(epsilon, delta, SENSITIVITY)


def task_record(t: int, sigma: float, epsilon: float, delta: float, dim: int, samples: int) -> dict:
    """Raw record of task t's release: public fields (ledger) plus ``samples`` (a diagnostic that
    :func:`dpcl.privacy.ledger.split_public` moves out of the ledger)."""
    private = sigma > 0
    return {
        "mechanism": "gaussian" if private else "nonprivate",
        "query": QUERY,
        "sensitivity": SENSITIVITY,
        "sigma": float(sigma),
        "epsilon": float(epsilon) if private else math.inf,
        "delta": float(delta) if private else 0.0,
        "dimension": int(dim),
        "data": f"features of D_{t} (projected)",
        "note": "functional mechanism: second-order Taylor coefficients (b_t, upper triangle of A_t) of the "
        "softmax cross-entropy at W = 0 on publicly PCA-projected features clipped to norm 1, fresh "
        "Gaussian noise per task; the A-GEM memory holds only released coefficients (post-processing)",
        "samples": int(samples),
    }


def run_fm_agem(
    task_data: list[tuple[np.ndarray, np.ndarray]],
    test_sets: list[tuple[np.ndarray, np.ndarray]],
    label_spaces: list[list[int]],
    n_universe: int,
    projection: Projection,
    cfg: FMConfig,
    *,
    epsilon: float,
    delta: float,
    rng_for: Callable[[int, str], np.random.Generator],
) -> tuple[list[list[np.ndarray]], list[dict], list[dict]]:
    """Train FM-A-GEM through the tasks: (predictions[t][i], one record per task, task stats).

    ``task_data[t]`` = (features, labels in O_t); ``test_sets[i]`` = (features, labels);
    ``projection`` is fitted on public data (:func:`dpcl.public_pca.fit_projection`); (ε, δ) is each task's
    training budget (ε = ∞: non-private); ``rng_for(t, "coefficients")`` gives task t's noise.
    predictions[t][i] are labels for task i's test set after task t, over the labels seen so far.
    """
    cfg.validate()
    if projection.dim != cfg.dim:
        raise ValueError(f"the projection has {projection.dim} components but fm_agem.dim is {cfg.dim}")
    if len(label_spaces) != len(task_data):
        raise ValueError(f"{len(task_data)} tasks but {len(label_spaces)} label spaces")
    sigma = fm_sigma(epsilon, delta)
    head = FMHead(n_universe, cfg.dim)
    test_z = [projection.apply(x) for x, _ in test_sets]
    preds: list[list[np.ndarray]] = []
    records: list[dict] = []
    stats: list[dict] = []
    for t, (x, y) in enumerate(task_data):
        info = head.learn_task(
            projection.apply(x), y, label_spaces[t], sigma, rng_for(t, "coefficients"), cfg
        )
        records.append(task_record(t, sigma, epsilon, delta, cfg.dim, len(y)))
        stats.append({"task": t, "samples": int(len(y)), **info})
        preds.append([head.predict(z) for z in test_z[: t + 1]])
    return preds, records, stats


def run(inputs):
    """One run of FM-A-GEM, the learner contract (:mod:`dpcl.learners.api`), on the ``projected`` job's
    PCA-projected features (``inputs.job``: its :class:`dpcl.stages.projected.ProjectedJob`;
    ``inputs.options``: the learner's config block). With the job's tuning enabled its (dim, lr, steps)
    are a grid search per (training budget, label space) on the job's tuning set (:func:`tune_fm_agem`),
    whose values replace the block's."""
    from ..io import log
    from ..training.tuning_protocol import hyperparameters_note, tuning_label_space
    from .api import RunResult

    eps, delta, block, job, learner = inputs.epsilon, inputs.delta, inputs.options, inputs.job, LEARNER
    test_sets = inputs.test_sets
    tuned = None
    if job.tuning and job.tuning.get("enabled", True):
        space = tuning_label_space(inputs.label_method)
        key = (learner, "tuned", eps, delta, space)
        if key not in job.cache:
            t0 = time.perf_counter()
            xs, ys, rows, plan = job.tuning_data()
            job.cache[key] = r = tune_fm_agem(
                xs[rows],
                ys[rows],
                plan.tasks,
                space,
                eps,
                delta,
                seed=inputs.seed,
                projection_for=job.projection,
                max_dim=min(job.tune_x.shape[1], len(job.tune_x) - 1),  # the public PCA's axes
            )
            log(
                f"tuned {learner} seed {inputs.seed} eps {eps:g} ({space} label space, "
                f"{job.tuning.get('protocol', 'public')} protocol): {r['best']}, validation accuracy "
                f"{100 * r['best_validation_accuracy']:.1f} % ({time.perf_counter() - t0:.1f} s)"
            )
        tuned = job.cache[key]
        block = {**block, **tuned["best"]}
        values = {**tuned["best"], "label_space": space, "grid": tuned["grid"], "repeats": tuned["repeats"]}
        note = hyperparameters_note(values, job.tuning.get("protocol", "public"), FM_SEARCH)
    else:
        block = dict(block)
        fixed, measured = FMConfig.from_config(block), FMConfig()
        # any value left at (or set to) a measured default was chosen with private data
        private = (
            FM_DEFAULTS_CHOSEN
            if any(getattr(fixed, k) == getattr(measured, k) for k in ("dim", "lr", "steps"))
            else None
        )
        note = hyperparameters_note(block, None, fixed_with_private_data=private)
    cfg = FMConfig.from_config(block)
    preds, records, stats = run_fm_agem(
        [(t.x, t.y) for t in inputs.tasks],
        list(test_sets),
        [list(t.label_space) for t in inputs.tasks],
        inputs.n_universe,
        job.projection(cfg.dim),
        cfg,
        epsilon=eps,
        delta=delta,
        rng_for=inputs.rng_for,
    )
    return RunResult(
        predictions=preds,
        records=records,
        extra={learner: block},
        hyperparameters=note,
        diagnostics={f"{learner}_tasks": stats, **({f"{learner}_tuning": tuned} if tuned else {})},
    )
