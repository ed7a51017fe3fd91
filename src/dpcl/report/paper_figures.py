"""The paper's Figures 4-7, A3-A9 ([LabelSpace] Sec. 6.1-6.2, App. E-F) and [Tobaben2024] Fig. 4 (Sec. 7.2:
Not Blurry vs I-Blurry vs Si-Blurry, ``plot_p003_fig4_blurry``) from the configured runs.
(One concept in one module: every paper figure shares the panel layout, order statistics and notes.)

Each figure draws what the runs provide and writes a short note ("no runs for …") in a
panel whose axis the config does not sweep, instead of failing: the embedded default has one
release fraction and no i-Blurry benchmark, the paper's config has all of them. Points are
the median over seeds with error bars from the 2nd worst to the 2nd best seed (the paper's
"2nd/4th best seed" of five; min/max below three seeds, see ``tables.order_stats``); [Tobaben2024]
plots "the min, median and max seed" (Sec. 7), and so does its Fig. 4 here.

The figures live in one module per family: :mod:`.fig_label_methods` (Figs. 4-6), :mod:`.fig_blurry`
(Figs. 7, A3, [Tobaben2024] Fig. 4), :mod:`.fig_tasks` (Figs. A4-A9) and their shared parts in
:mod:`.fig_common`; this module gathers them.
"""

from .fig_blurry import (
    BLURRY_SETTINGS,
    IBLURRY_NM,
    BlurrySetting,
    blurry_comparisons,
    blurry_groups,
    blurry_trios,
    plot_fig7_blurriness,
    plot_figA3_blurriness,
    plot_p003_fig4_blurry,
)
from .fig_common import best_release, fig_learners, min_median_max, public_multiplier, release_fraction
from .fig_label_methods import plot_fig4_label_methods, plot_fig5_release_fraction, plot_fig6_public_labels
from .fig_tasks import (
    TASK_METHOD,
    plot_figA4_privacy_utility,
    plot_task_metric,
    task_figure_ids,
    task_learners,
    task_series,
)

__all__ = [
    "BLURRY_SETTINGS",
    "IBLURRY_NM",
    "TASK_METHOD",
    "BlurrySetting",
    "best_release",
    "blurry_comparisons",
    "blurry_groups",
    "blurry_trios",
    "fig_learners",
    "min_median_max",
    "plot_fig4_label_methods",
    "plot_fig5_release_fraction",
    "plot_fig6_public_labels",
    "plot_fig7_blurriness",
    "plot_figA3_blurriness",
    "plot_figA4_privacy_utility",
    "plot_p003_fig4_blurry",
    "plot_task_metric",
    "public_multiplier",
    "release_fraction",
    "task_figure_ids",
    "task_learners",
    "task_series",
]
