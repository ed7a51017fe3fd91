"""DP cosine classifier ([LabelSpace] Sec. 5.1, Alg. 1, Eq. 9-10).

At task t, for **every** o ∈ O_t (with data in D_t or not)::

    s_o ← s_o + Σ_{x ∈ D_{t,o}} f(x)/‖f(x)‖ + N(0, σ²I).

Summands have unit norm, so adding or removing one individual changes exactly one sum
by a vector of norm ≤ 1: L2 sensitivity Δ = 1 for the whole per-task release, and σ is
the analytic-Gaussian σ(ε, δ, Δ = 1). Sums, not means: class counts are never released.
Prediction: argmax over ∪_{k≤t} O_k of cos(f(x*), s_o).
"""

from __future__ import annotations

import math

import numpy as np

from ..privacy.class_sums import SENSITIVITY, noisy_class_sums, normalize_rows
from ..privacy.gaussian import gaussian_sigma
from ..privacy.verify import EntrySpec, LedgerSpec
from ..sorted_ints import sorted_distinct
from .registry import LearnerAudit, LearnerSpec

#: the ledger each run writes per task (checked by dpcl.privacy.verify against the plan): the noisy
#: class sums of unit-norm features (Alg. 1, Eq. 9), Δ = 1
LEDGER_SPEC = LedgerSpec(training=(EntrySpec("gaussian", query="class_sums_of_unit_norm_features"),))

#: the registry's entry (dpcl.learners.registry)
SPECS = (
    LearnerSpec(
        name="cosine",
        display="Cosine Classifier",
        adapter="prototypes",
        job="prototypes",
        run="dpcl.learners.cosine:run",
        methods="label_methods",
        module="cosine",
        fig3="ours",
        whitebox=LearnerAudit(
            function="dpcl.audits.cosine_whitebox:audit_prototypes", name="DP cosine classifier"
        ),
        resources={"mem_mb": 2000, "runtime": 30},
    ),
)


def cosine_sigma(epsilon: float, delta: float) -> float:
    """Noise σ of the per-task class sums for a training budget (ε, δ); 0 if non-private."""
    if np.isinf(epsilon):
        return 0.0
    return gaussian_sigma(epsilon, delta, SENSITIVITY)


class CosineClassifier:
    """Cumulative noisy class-feature sums over a fixed label universe ``0..n_labels-1``."""

    def __init__(self, n_labels: int, dim: int) -> None:
        # float32 storage: sums of unit vectors and noise need no more precision, and the
        # ×1000 public label spaces (10^4-10^5 labels) stay small and fast to score.
        self.sums = np.zeros((n_labels, dim), dtype=np.float32)
        self.seen = np.zeros(n_labels, dtype=bool)  # ∪_k O_k so far

    def update(
        self,
        features: np.ndarray,
        labels: np.ndarray,
        label_space: list[int] | np.ndarray,
        sigma: float,
        rng: np.random.Generator,
    ) -> dict:
        """Add one task's noisy class sums (Eq. 9). Every label in O_t gets noise.

        ``labels`` must already be remapped into O_t (samples outside O_t dropped by the
        caller); a label outside O_t is a bug and raises.
        """
        o_t = sorted_distinct(label_space)
        if o_t.size and (o_t[0] < 0 or o_t[-1] >= len(self.sums)):
            raise ValueError(f"label space exceeds the classifier's universe of {len(self.sums)} labels")
        o_t, task_sums = noisy_class_sums(features, labels, o_t, sigma, rng, dim=self.sums.shape[1])
        if o_t.size and o_t[-1] - o_t[0] + 1 == len(o_t):  # contiguous ids: update a slice in place
            self.sums[o_t[0] : o_t[-1] + 1] += task_sums
        else:
            self.sums[o_t] += task_sums
        self.seen[o_t] = True
        return {
            "mechanism": "gaussian" if sigma > 0 else "nonprivate",
            "sigma": float(sigma),
            "query": "class_sums_of_unit_norm_features",
            "sensitivity": SENSITIVITY,
            "noised_labels": int(len(o_t)),
            "dimension": int(self.sums.shape[1]),
            "note": "noisy class-feature sums, unit-norm summands ([LabelSpace] Alg. 1, Eq. 9)",
        }

    def predict(
        self, features: np.ndarray, max_block_bytes: int = 64 << 20, screen: str = "auto"
    ) -> np.ndarray:
        """Argmax cosine similarity over the seen labels (Eq. 10), in memory-bounded blocks.

        Two passes, so that no (samples × labels) matrix is ever held and the answer does not
        depend on the BLAS: (1) block by block, a fast low-precision score (bfloat16 on CPUs
        with AVX512-BF16, else float32) keeps every label within twice its error bound of the
        row's running maximum; (2) those few candidates are rescored exactly (float64 dot
        products of the stored float32 vectors) and the best wins. The true argmax always
        survives (1): |screen − exact| ≤ e for every label, so it scores ≥ max − 2e.
        Prototypes with zero norm carry no information and score −inf. Ties go to the smaller
        label id. With no usable label (e.g. label release dropped every class) the
        prediction is −1: always wrong.
        """
        labels = np.flatnonzero(self.seen)
        protos = self.sums if labels.size == len(self.sums) else self.sums[labels]
        norms = np.sqrt(np.einsum("ij,ij->i", protos, protos))  # float32: a float64 cast would copy all sums
        valid = norms > 0
        if not valid.all():
            labels, protos, norms = labels[valid], protos[valid], norms[valid]
        protos = protos / norms[:, None]
        x = normalize_rows(features).astype(np.float32)
        n = len(x)
        arg = np.full(n, -1, dtype=np.int64)
        if labels.size == 0 or n == 0:
            return arg
        zero = ~np.any(x, axis=1)  # a zero feature ties every label: the smallest id wins, as in argmax
        if zero.any():
            arg[zero] = labels[0]
            live = np.flatnonzero(~zero)
            arg[live] = self._predict_rows(x[live], labels, protos, max_block_bytes, screen)
            return arg
        return self._predict_rows(x, labels, protos, max_block_bytes, screen)

    @staticmethod
    def _predict_rows(
        x: np.ndarray, labels: np.ndarray, protos: np.ndarray, max_block_bytes: int, screen: str
    ) -> np.ndarray:
        """The two-pass argmax of :meth:`predict` for non-zero unit rows ``x``."""
        n = len(x)
        arg = np.full(n, -1, dtype=np.int64)
        if n == 0:
            return arg
        mode = _screen_mode(screen, protos.size)
        margin = 2 * _screen_error(mode, protos.shape[1])
        rows = max(1, min(n, max_block_bytes // (4 * min(len(labels), 8192))))
        cols = max(1, max_block_bytes // (4 * rows))
        screen_block = _bf16_block(protos) if mode == "bf16" else _fp32_block(protos)
        for r0 in range(0, n, rows):
            xr = x[r0 : r0 + rows]
            top = np.full(len(xr), -np.inf, dtype=np.float32)
            cand_r, cand_j, cand_s = [], [], []
            for c0 in range(0, len(labels), cols):
                r, j, sc = screen_block(xr, c0, cols, top, margin)  # updates ``top`` in place
                cand_r.append(r)
                cand_j.append(j + c0)
                cand_s.append(sc)
            r, j, sc = np.concatenate(cand_r), np.concatenate(cand_j), np.concatenate(cand_s)
            keep = sc >= top[r] - margin  # drop those left behind by a later, larger maximum
            r, j = r[keep], j[keep]
            exact = np.empty(len(r))
            for k in range(0, len(r), 16384):  # exact rescoring in bounded chunks (16384 x dim float64)
                sl = slice(k, k + 16384)
                exact[sl] = np.einsum(
                    "ij,ij->i", xr[r[sl]].astype(np.float64), protos[j[sl]].astype(np.float64)
                )
            order = np.lexsort((j, -exact, r))  # per row: best exact score first, then smaller label
            first = np.ones(len(order), dtype=bool)
            first[1:] = r[order][1:] != r[order][:-1]
            win = order[first]
            arg[r0 + r[win]] = labels[j[win]]
        return arg


def _fp32_block(protos: np.ndarray):
    """Screen of one (rows × cols) block in float32 (numpy BLAS): candidates (r, j, score)."""

    def block(xr, c0, cols, top, margin):
        scores = xr @ protos[c0 : c0 + cols].T
        np.maximum(top, scores.max(axis=1), out=top)
        r, j = np.nonzero(scores >= (top - margin)[:, None])
        return r, j, scores[r, j]

    return block


def _bf16_block(protos: np.ndarray):
    """Screen of one block in bfloat16 (torch, AVX512-BF16): the product, row maxima and the
    candidate mask stay in bfloat16 (half the memory traffic); only candidates leave."""
    import torch

    p_low = torch.from_numpy(protos).to(torch.bfloat16)

    def block(xr, c0, cols, top, margin):
        s = torch.from_numpy(xr).to(torch.bfloat16) @ p_low[c0 : c0 + cols].T
        np.maximum(top, s.amax(dim=1).float().numpy(), out=top)
        # a bfloat16 threshold at most the float one (rounding moves a value <= 1 by <= 2^-9)
        thr = torch.from_numpy(top - margin - 2.0**-8).to(torch.bfloat16)
        idx = (s >= thr[:, None]).nonzero()
        r, j = idx[:, 0], idx[:, 1]
        return r.numpy(), j.numpy(), s[r, j].float().numpy()

    return block


def _screen_mode(screen: str, size: int) -> str:
    """bfloat16 screening where the CPU multiplies bfloat16 natively and the prototype matrix is
    large enough (>= 2^25 entries, e.g. 50,000 x 768) for the faster product to outweigh the
    wider margin's extra exact rescoring; float32 otherwise."""
    if screen not in ("auto", "bf16", "fp32"):
        raise ValueError(f"screen must be auto, bf16 or fp32, got {screen!r}")
    if screen != "auto":
        return screen
    return "bf16" if size >= 2**25 and _native_bf16() else "fp32"


def _native_bf16() -> bool:
    try:
        flags = open("/proc/cpuinfo").read()
    except OSError:
        return False
    return " avx512_bf16" in flags or " amx_bf16" in flags


def _screen_error(mode: str, dim: int) -> float:
    """Bound e on |screened − exact| cosine of unit vectors (Cauchy–Schwarz: Σ|x_i p_i| ≤ 1).

    bf16 (unit roundoff u = 2^-8): both inputs rounded, 2u + u²; the bf16 result rounded
    again, u·(1 + e); float32 accumulation over ``dim`` terms, dim·2^-24·(1 + 3u). float32:
    inputs exact, accumulation dim·2^-24 plus the result's rounding. A 25 % slack on top.
    """
    acc = dim * 2.0**-24 * 1.02
    if mode == "bf16":
        u = 2.0**-8
        return 1.25 * (2 * u + u * u + u * 1.05 + acc)
    return 1.25 * (acc + 2.0**-24)


def run(inputs):
    """One DP cosine-classifier run through all tasks (the learner contract, :mod:`dpcl.learners.api`):
    per task the noisy class sums of R_t^task(D_t) over O_t; σ and the class sums go to the run's
    privacy.json and model arrays."""
    from .api import RunResult

    t_eps, delta = inputs.epsilon, inputs.delta
    sigma = cosine_sigma(t_eps, delta)
    clf = CosineClassifier(inputs.n_universe, inputs.tasks[0].x.shape[1])
    test_sets = inputs.test_sets
    preds: list[list[np.ndarray]] = []
    records = []
    for t, task in enumerate(inputs.tasks):  # R_t^task(D_t), Eq. 8
        rec = clf.update(task.x, task.y, list(task.label_space), sigma, inputs.rng_for(t, "gaussian"))
        rec.update(
            epsilon=t_eps,
            delta=delta if math.isfinite(t_eps) else 0.0,
            data=f"features of R_task(D_{t})",
            samples=int(len(task.y)),
            dropped=task.dropped,
        )
        records.append(rec)
        if not inputs.shared_inputs:  # every test set through its own task's permutation
            preds.append([clf.predict(xt) for xt, _ in test_sets[: t + 1]])
            continue
        pred = clf.predict(np.concatenate([xt for xt, _ in test_sets[: t + 1]]))  # one pass over all seen
        bounds = np.cumsum([len(yt) for _, yt in test_sets[: t + 1]])[:-1]
        preds.append(np.split(pred, bounds))
    return RunResult(
        predictions=preds,
        records=records,
        extra={"sigma": sigma},
        privacy_extra={"sigma": sigma},
        model={"sums": clf.sums, "seen": clf.seen},
    )
