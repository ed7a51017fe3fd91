"""A PCA of PUBLIC features (the public tuning split): the projection the functional-mechanism learners
apply to every record before their release, z = (x − mean) @ components, clipped to ‖z‖ ≤ 1.

Private data must never be fitted here: the projection is applied to every record without accounting.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Projection:
    """A public PCA: z = (x − mean) @ components, then z / max(1, ‖z‖) so that ‖z‖ ≤ 1."""

    mean: np.ndarray  # (D,)
    components: np.ndarray  # (D, dim), orthonormal columns

    @property
    def dim(self) -> int:
        return int(self.components.shape[1])

    def apply(self, x: np.ndarray) -> np.ndarray:
        """Projected, norm-clipped features (n × dim); each row depends only on its own record."""
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.mean.shape[0]:
            raise ValueError(f"features must be (n, {self.mean.shape[0]}), got {x.shape}")
        if not np.isfinite(x).all():  # NaN would pass the norm clip below (max(1, NaN) is NaN)
            raise ValueError("features must be finite (a NaN or inf entry would make the release NaN)")
        z = (x - self.mean) @ self.components
        return z / np.maximum(1.0, np.linalg.norm(z, axis=1, keepdims=True))


def fit_projection(public_x: np.ndarray, dim: int) -> Projection:
    """PCA of PUBLIC features (the public tuning split): mean and the top ``dim`` principal axes.

    Deterministic: the SVD's sign ambiguity is fixed by making each axis's largest-magnitude
    coordinate positive. Private data must never be passed here: the projection is applied to
    every record without accounting.
    """
    return PublicPCA(public_x).projection(dim)


class PublicPCA:
    """One SVD of PUBLIC features, from which :meth:`projection` cuts the top ``dim`` axes for any
    dim (what :func:`fit_projection` returns, without an SVD per dim)."""

    def __init__(self, public_x: np.ndarray) -> None:
        x = np.asarray(public_x, dtype=np.float64)
        if x.ndim != 2:
            raise ValueError(f"public features must be a 2-d array, got shape {x.shape}")
        if not np.isfinite(x).all():
            raise ValueError("public features must be finite (NaN or inf in the PCA's input)")
        self.n, self.d = x.shape
        self.mean = x.mean(axis=0)
        self._vt = np.linalg.svd(x - self.mean, full_matrices=False)[2] if self.n > 1 else None
        self._cache: dict[int, Projection] = {}

    def projection(self, dim: int) -> Projection:
        n, d = self.n, self.d
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or not 1 <= dim <= min(d, n - 1):
            raise ValueError(
                f"the projection's dim must lie in 1..min(D, n_public − 1) = {min(d, n - 1)}, got {dim!r}"
            )
        if dim not in self._cache:
            comp = self._vt[:dim].T.copy()  # (D, dim)
            lead = np.abs(comp).argmax(axis=0)
            comp *= np.where(comp[lead, np.arange(dim)] < 0, -1.0, 1.0)
            self._cache[dim] = Projection(mean=self.mean, components=comp)
        return self._cache[dim]
