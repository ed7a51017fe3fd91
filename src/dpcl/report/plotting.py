"""What every figure shares: the Agg backend (:func:`pyplot`), one style per series and
:func:`save_figure`, which writes PNG/PDF files that depend on the figure alone."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..io import atomic_path

# One style per series (colour, marker, line style) so that series with equal values stay
# distinguishable: the markers differ and each series sits a small step apart on the x axis.
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LINESTYLES = ("-", "--", "-.", ":")


def pyplot():
    """matplotlib.pyplot on the non-interactive Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def series_style(k: int) -> dict:
    """Colour, marker and line style of the ``k``-th series of a figure."""
    return {
        "color": f"C{k % 10}",
        "marker": MARKERS[k % len(MARKERS)],
        "linestyle": LINESTYLES[k % len(LINESTYLES)],
    }


def series_offsets(n: int, step: float) -> np.ndarray:
    """x offsets of ``n`` series centred on 0, ``step`` apart (overlapping points stay visible)."""
    return (np.arange(n) - (n - 1) / 2) * step


def save_figure(fig, outputs: Sequence[str | Path]) -> None:
    """Write ``fig`` to each output (format from the suffix): PNG/PDF files that depend on the figure
    alone, no creation date (the same config gives the same bytes)."""
    for out in outputs:
        out = Path(out)
        fmt = out.suffix.lstrip(".")
        meta = {"CreationDate": None} if fmt == "pdf" else {}
        with atomic_path(out, suffix=out.suffix) as tmp:
            fig.savefig(tmp, dpi=150, format=fmt, metadata=meta)
