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
