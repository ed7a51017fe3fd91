"""What a reader sees: every series a legend lists is drawn with data and stays
visible where values coincide, legends sit off the data, and Non-CL gets a final-accuracy chart."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpcl.io import write_json
from dpcl.report import figures, plotting
from dpcl.report.figures import (
    plot_aggregation_comparison,
    plot_average_accuracy,
    plot_desai_comparison,
    plot_label_drop,
)
from dpcl.report.paper_figures import plot_fig5_release_fraction
from dpcl.stages.report import build_report


def report_modules():
    """Every module under dpcl.report (the figures call save_figure by the name they import)."""
    import importlib
    import pkgutil

    import dpcl.report

    return [
        importlib.import_module(f"dpcl.report.{m.name}") for m in pkgutil.iter_modules(dpcl.report.__path__)
    ]


METHODS = ["oracle", "base", "public-x1000", "release-f0.1"]
EPSILONS = ["1", "8", "inf"]


@pytest.fixture
def drawn(monkeypatch):
    """The figures the plotting functions save (still holding their artists after plt.close)."""
    figs = []
    save = plotting.save_figure

    def keep(fig, outputs):
        figs.append(fig)
        save(fig, outputs)

    for module in report_modules():
        if getattr(module, "save_figure", None) is save:
            monkeypatch.setattr(module, "save_figure", keep)
    return figs


def _legends(fig) -> list:
    return list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]


def _finite(values) -> bool:
    v = np.asarray(values, dtype=float)
    return bool(v.size) and bool(np.isfinite(v).any())


def _labels_with_data(fig) -> set[str]:
    """Labels of the artists that draw finite data (lines, bars, error bars) in any panel."""
    from matplotlib.container import BarContainer, ErrorbarContainer

    out = set()
    for ax in fig.axes:
        for line in ax.lines:
            if _finite(line.get_ydata()):
                out.add(line.get_label())
        for c in ax.containers:
            if isinstance(c, BarContainer) and _finite([p.get_height() for p in c.patches]):
                out.add(c.get_label())
            if (
                isinstance(c, ErrorbarContainer)
                and c.lines[0] is not None
                and _finite(c.lines[0].get_ydata())
            ):
                out.add(c.get_label())
    return out


def assert_legends_honest(fig) -> None:
    """Every legend entry names an artist with data, and no legend overlaps a panel's data area."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()  # plt.close left the figure without a canvas
    fig.draw(renderer)
    have = _labels_with_data(fig)
    legends = _legends(fig)
    assert legends, "no legend"
    for legend in legends:
        for text in legend.get_texts():
            assert text.get_text() in have, f"legend lists {text.get_text()!r}, nothing drawn with data"
        box = legend.get_window_extent(renderer)
        for ax in fig.axes:
            assert not box.overlaps(ax.get_window_extent(renderer)), "legend over a panel"


def _curve_records(final_only: bool = False) -> list[dict]:
    """Three seeds per (ε, label method) with the same curve for every method: the case where the
    lines coincide. ``final_only``: NaN before the last task (Non-CL)."""
    out = []
    for eps in EPSILONS:
        for m in METHODS:
            for seed in range(3):
                curve = [0.98 - 0.05 * t + 0.01 * seed for t in range(5)]
                if final_only:
                    curve = [math.nan] * 4 + curve[-1:]
                out.append(
                    {
                        "learner": "noncl_head" if final_only else "cosine",
                        "label_method": m,
                        "epsilon": eps,
                        "seed": seed,
                        "average_accuracy": curve,
                        "final_accuracy": curve[-1],
                        "final_forgetting": math.nan if final_only else 0.0,
                        "average_forgetting": [math.nan] * 5,
                        "released_labels": [2] * 5,
                    }
                )
    return out


def test_average_accuracy_shows_every_label_method_where_curves_coincide(tmp_path, drawn):
    plot_average_accuracy(_curve_records(), METHODS, "b: average accuracy per task", [tmp_path / "a.png"])
    (fig,) = drawn
    assert len(fig.axes) == len(EPSILONS)
    for ax in fig.axes:
        series = [ln for ln in ax.lines if not ln.get_label().startswith("_")]
        assert len(series) == len(METHODS)
        xs = {tuple(np.round(ln.get_xdata(), 6)) for ln in series}
        assert len(xs) == len(METHODS)  # each method a step apart in t: none hides another
        assert len({(ln.get_marker(), ln.get_linestyle()) for ln in series}) == len(METHODS)
        assert all(band.get_alpha() <= 0.1 for band in ax.collections)  # light bands
    assert_legends_honest(fig)


def test_non_cl_report_is_a_final_accuracy_chart(tmp_path, drawn):
    """build_report on Non-CL metrics files (NaN until the last task, stored as "nan"): one panel of
    bars, one per label method and ε, at the final accuracy; no curve over tasks."""
    paths = []
    for r in _curve_records(final_only=True):
        p = tmp_path / "runs" / f"seed{r['seed']}" / f"eps{r['epsilon']}" / r["label_method"] / "metrics.json"
        write_json(p, {**r, "epsilon": float(r["epsilon"])})
        paths.append(p)
    assert '"nan"' in paths[0].read_text()
    out = tmp_path / "b_noncl_head_avg_acc.png"
    build_report(paths, "b", METHODS, tmp_path / "t.csv", tmp_path / "t.md", [out])
    assert out.stat().st_size > 5000
    (fig,) = drawn
    (ax,) = fig.axes
    assert "final accuracy" in ax.get_ylabel() and "final accuracy" in fig.get_suptitle()
    assert not [ln for ln in ax.lines if not ln.get_label().startswith("_") and len(ln.get_xdata()) > 1]
    bars = [c for c in ax.containers if c.__class__.__name__ == "BarContainer"]
    assert [c.get_label() for c in bars] == [
        "Label Oracle (Baseline)",
        "Base Dataset (Baseline)",
        "Public Labels (1000x)",
        "Release Labels (10 %)",
    ]
    for c in bars:
        assert len(c.patches) == len(EPSILONS)
        assert [p.get_height() for p in c.patches] == pytest.approx([100 * (0.98 - 0.2 + 0.01)] * 3)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["ε = 1", "ε = 8", "non-DP"]
    assert_legends_honest(fig)


def test_fig5_shows_every_epsilon_where_released_totals_coincide(tmp_path, drawn):
    """Equal released-label totals at every ε: three distinct points on an axis from 0; accuracy
    points of every (learner, ε) apart on the f axis; legends under the panels."""
    recs = [
        {
            "learner": lr,
            "label_method": m,
            "epsilon": eps,
            "seed": s,
            "final_accuracy": 0.7 + 0.01 * s,
            "released_labels": [2] * 5,
        }
        for lr in ("cosine", "peft_head")
        for eps in EPSILONS
        for m in ("oracle", "release-f0.1")
        for s in range(3)
    ]
    plot_fig5_release_fraction({"b": recs}, [tmp_path / "f5.png"])
    (fig,) = drawn
    ax_acc, ax_lab = fig.axes
    for ax, n in ((ax_acc, 2 * len(EPSILONS)), (ax_lab, len(EPSILONS))):
        points = [c.lines[0] for c in ax.containers]
        assert len(points) == n
        assert len({float(p.get_xdata()[0]) for p in points}) == n  # none on top of another
    assert ax_lab.get_ylim()[0] == 0 and ax_lab.get_ylim()[1] > 10
    assert_legends_honest(fig)


def test_aggregation_and_fig3_and_privacy_figures_keep_legends_off_the_data(tmp_path, drawn):
    rules = ("argmax", "median", "entropy")
    agg = [
        {
            "label_method": m,
            "epsilon": eps,
            "final_accuracy_by_aggregation": {r: 0.6 + 0.01 * s for r in rules},
        }
        for m in ("oracle", "base")
        for eps in EPSILONS
        for s in range(3)
    ]
    plot_aggregation_comparison(agg, ["oracle", "base"], "b: aggregation", [tmp_path / "a2.png"], rules)
    fig3 = [
        {"learner": lr, "epsilon": eps, "average_accuracy": [0.9, 0.8, 0.7]}
        for lr in figures.fig3_learners()
        for eps in ("1", "8")
        for _ in range(3)
    ]
    plot_desai_comparison(fig3, "b: comparison", [tmp_path / "f3.png"])
    plot_label_drop([1.0, 8.0], [1e-5, 1e-7], 20, [tmp_path / "f2.png"])
    assert len(drawn) == 3
    for fig in drawn:
        assert_legends_honest(fig)
    lines3 = [c.lines[0] for c in drawn[1].axes[1].containers]  # Fig. 3 at ε = 8: a style per learner
    assert len(lines3) == len(figures.fig3_learners())
    assert len({(ln.get_marker(), ln.get_linestyle(), ln.get_color()) for ln in lines3}) == len(lines3)


def test_bar_panels_leave_no_empty_slot_for_a_method_a_learner_did_not_run(tmp_path, drawn):
    """Fig. 6 with Public Labels run for the Cosine Classifier only: the PEFT panel centres its two
    bars on each ε and names the method it lacks; the legend still lists what the other panel draws."""
    from dpcl.report.paper_figures import plot_fig6_public_labels

    recs = [
        {"learner": lr, "label_method": m, "epsilon": eps, "seed": s, "final_accuracy": 0.7}
        for lr, methods in (("cosine", METHODS[:3]), ("peft_head", METHODS[:2]))
        for m in methods
        for eps in EPSILONS
        for s in range(3)
    ]
    plot_fig6_public_labels({"b": recs}, [tmp_path / "f6.png"])
    (fig,) = drawn
    cos, peft = fig.axes
    assert "not run" not in cos.get_title() and "not run: Public Labels (1000x)" in peft.get_title()
    for ax, n in ((cos, 3), (peft, 2)):
        xs = sorted(p.get_x() + p.get_width() / 2 for c in ax.containers for p in getattr(c, "patches", []))
        assert len(xs) == n * len(EPSILONS)
        assert np.mean(xs[:n]) == pytest.approx(0)  # the bars of ε = 1 centred on their tick
    assert_legends_honest(fig)


def test_fig3_titles_carry_the_published_claims_verdicts(tmp_path, drawn):
    ar, d2 = "add/remove one individual (task-wise)", "[Desai2021] Def. 2 (...)"
    fig3 = [
        {
            "learner": lr,
            "epsilon": eps,
            "average_accuracy": [0.9, 0.8, 0.7],
            **(
                {
                    "published_claim": {
                        "verdicts": {ar: "violated" if (eps, s) == ("1", 0) else "certified", d2: "certified"}
                    }
                }
                if lr == "desai_head"
                else {}
            ),
        }
        for lr in figures.fig3_learners()
        for eps in ("1", "8")
        for s in range(3)
    ]
    plot_desai_comparison(fig3, "b: comparison", [tmp_path / "f3.png"])
    t1, t8 = (ax.get_title() for ax in drawn[0].axes[:2])
    assert "Desai Lemma 2: violated 1/3, certified 2/3 (add/remove); certified (Def. 2)" in t1.replace(
        "\n  ", " "
    )
    assert "Desai Lemma 2: certified (add/remove, Def. 2)" in t8
    assert_legends_honest(drawn[0])
