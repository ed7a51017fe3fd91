"""The A-GEM projection ([Chaudhry2019]; [LabelSpace] App. D.4, Eq. A102), shared by the head
engine's DP-A-GEM (numpy) and the FiLM engine (torch): post-processing of two DP gradient releases."""

from __future__ import annotations

import numpy as np


def project(g: np.ndarray, g_ref: np.ndarray) -> tuple[np.ndarray, bool]:
    """A-GEM projection (Eq. A102): g − (gᵀg_ref / g_refᵀg_ref) g_ref if gᵀg_ref < 0, else g."""
    dot = float(g.ravel() @ g_ref.ravel())
    if dot >= 0.0:
        return g, False
    return g - (dot / float(g_ref.ravel() @ g_ref.ravel())) * g_ref, True


def project_parts_(g: list[np.ndarray], g_ref: list[np.ndarray]) -> bool:
    """:func:`project` on a gradient held in parts (a head's weight and bias), in place on ``g`` without
    concatenating: the inner products are sums over the parts. ``g_ref`` is overwritten (scratch).
    Returns whether it projected."""
    dot = sum(float(a.ravel() @ r.ravel()) for a, r in zip(g, g_ref, strict=True))
    if dot >= 0.0:
        return False
    scale = dot / sum(float(r.ravel() @ r.ravel()) for r in g_ref)
    for a, r in zip(g, g_ref, strict=True):
        r *= scale
        a -= r
    return True
