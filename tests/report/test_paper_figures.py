"""Figs. 4-7, A3-A9 ([LabelSpace] Sec. 6, App. E.1, F) from run metrics, and the self-contained HTML report page."""

from __future__ import annotations

import html
import math
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
import yaml

from dpcl.io import write_json, write_text
from dpcl.report.html import Section, build_html_report, caption, group_files, markdown_to_html
from dpcl.report.paper_figures import (
    best_release,
    blurry_groups,
    plot_fig4_label_methods,
    plot_fig5_release_fraction,
    plot_fig6_public_labels,
    plot_fig7_blurriness,
    plot_figA3_blurriness,
    plot_figA4_privacy_utility,
    plot_task_metric,
    public_multiplier,
    release_fraction,
    task_figure_ids,
    task_series,
)
from dpcl.seeding import rng
from dpcl.stages.paper_figures import paper_figures

FULL_METHODS = [
    "oracle",
    "base",
    "public-x10",
    "public-x100",
    "public-x1000",
    "release-f0.025",
    "release-f0.1",
    "release-f0.5",
    "release-laplace-f0.1",
]
BENCHMARKS = {
    "split_a": {"dataset": "ds", "backbone": "bb", "scenario": "disjoint", "n_tasks": 5},
    "blur_m25": {
        "dataset": "ds",
        "backbone": "bb",
        "scenario": "iblurry",
        "n_tasks": 5,
        "disjoint_pct": 50,
        "blurry_pct": 25,
    },
    "blur_m75": {
        "dataset": "ds",
        "backbone": "bb",
        "scenario": "iblurry",
        "n_tasks": 5,
        "disjoint_pct": 50,
        "blurry_pct": 75,
    },
}


def _accuracy(method: str, eps: str, blurry: float) -> float:
    """A made-up but structured final accuracy: release peaks at f = 0.1, noise shrinks with ε."""
    base = {"oracle": 0.80, "base": 0.70}.get(method, 0.72)
    rf = release_fraction(method)
    if rf:
        base = 0.78 - 0.3 * abs(math.log10(rf[1] / 0.1)) / 2
    return base - 0.05 * blurry / 100 - (0.05 if eps == "1" else 0.0)


def _record(bench: str, learner: str, eps: str, method: str, seed: int, n_tasks: int = 5) -> dict:
    blurry = float(BENCHMARKS.get(bench, {}).get("blurry_pct", 0))
    acc = (
        _accuracy(method, eps, blurry)
        + 0.01 * rng(seed, "test", bench, learner, eps, method).standard_normal()
    )
    rf = release_fraction(method)
    released = [2] * n_tasks if not rf or rf[1] >= 0.1 else [1] * n_tasks
    return {
        "learner": learner,
        "label_method": method,
        "epsilon": eps,
        "seed": seed,
        "delta": 1e-5,
        "final_accuracy": acc,
        "final_forgetting": 0.0,
        "average_accuracy": [acc] * n_tasks,
        "average_forgetting": [0.0] * n_tasks,
        "released_labels": released,
    }


def _records(
    bench: str, methods: list[str], learners=("cosine", "peft_head"), epsilons=("1", "8"), seeds=range(5)
):
    return [_record(bench, lr, e, m, s) for lr in learners for e in epsilons for m in methods for s in seeds]


def _assert_figure(stem: Path) -> None:
    """PNG and PDF exist, are real files of their format, and the PNG is not a blank canvas."""
    import matplotlib.image as mpimg

    png, pdf = stem.with_suffix(".png"), stem.with_suffix(".pdf")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    assert pdf.read_bytes()[:5] == b"%PDF-" and pdf.stat().st_size > 2000
    img = mpimg.imread(png)
    assert img.shape[0] > 200 and img.shape[1] > 200
    rgb = np.round(255 * img[..., :3]).astype(np.uint32)
    colours = np.unique(rgb[..., 0] << 16 | rgb[..., 1] << 8 | rgb[..., 2])  # packed: fast 1-D unique
    assert colours.size > 10  # drawn, not one colour


def _outs(tmp_path: Path, name: str) -> list[Path]:
    return [tmp_path / f"{name}.png", tmp_path / f"{name}.pdf"]


def test_method_tags_are_parsed():
    assert release_fraction("release-f0.025") == ("ktsgd", 0.025)
    assert release_fraction("release-laplace-f0.1") == ("laplace", 0.1)
    assert release_fraction("public-x10") is None
    assert public_multiplier("public-x1000") == 1000 and public_multiplier("base") is None


def test_best_release_takes_the_highest_median_fraction():
    recs = _records("split_a", FULL_METHODS)
    # Seed noise (sd 0.01) is far below the 0.05 gap between f = 0.1 and its neighbours.
    assert best_release(recs, "cosine", "1") == "release-f0.1"
    assert best_release(recs, "cosine", "1", mechanism="laplace") == "release-laplace-f0.1"
    assert best_release(_records("split_a", ["oracle"]), "cosine", "1") is None


def test_blurry_groups_join_the_disjoint_split_as_m0():
    groups = blurry_groups(BENCHMARKS)
    assert list(groups.values()) == [{0.0: "split_a", 25.0: "blur_m25", 75.0: "blur_m75"}]
    other = {**BENCHMARKS, "blur_other": {**BENCHMARKS["blur_m25"], "backbone": "other"}}
    assert len(blurry_groups(other)) == 2
    assert blurry_groups({"split_a": BENCHMARKS["split_a"]}) == {}


def test_full_sweep_figures_have_no_gaps(tmp_path):
    recs = {"split_a": _records("split_a", FULL_METHODS)}
    assert plot_fig4_label_methods(recs, _outs(tmp_path, "fig4")) == []
    assert plot_fig5_release_fraction(recs, _outs(tmp_path, "fig5")) == []
    assert plot_fig6_public_labels(recs, _outs(tmp_path, "fig6")) == []
    groups = {
        "g": {
            m: _records(b, FULL_METHODS)
            for m, b in blurry_groups(BENCHMARKS)[next(iter(blurry_groups(BENCHMARKS)))].items()
        }
    }
    assert plot_fig7_blurriness(groups, _outs(tmp_path, "fig7")) == []
    for n in (4, 5, 6, 7):
        _assert_figure(tmp_path / f"fig{n}")


def test_sparse_default_like_config_draws_what_exists_and_says_what_is_missing(tmp_path):
    """The embedded default: one release fraction, one Public Labels size, no i-Blurry benchmark."""
    methods = ["oracle", "base", "public-x1000", "release-f0.1"]
    recs = {"split_a": _records("split_a", methods, learners=("cosine",), epsilons=("1", "8", "inf"))}
    assert plot_fig4_label_methods(recs, _outs(tmp_path, "fig4")) == []
    notes5 = plot_fig5_release_fraction(recs, _outs(tmp_path, "fig5"))
    assert len(notes5) == 1 and "one release fraction (f = 10 %)" in notes5[0]
    notes6 = plot_fig6_public_labels(recs, _outs(tmp_path, "fig6"))
    assert "public-x10" in notes6[0]
    notes7 = plot_fig7_blurriness({}, _outs(tmp_path, "fig7"))
    assert "no i-Blurry benchmarks" in notes7[0] and "scenario: iblurry" in notes7[0]
    for n in (4, 5, 6, 7):
        _assert_figure(tmp_path / f"fig{n}")
    # a learner with no runs and a benchmark with no release runs: notes, not a crash
    notes = plot_fig5_release_fraction({"split_a": _records("split_a", ["oracle"])}, _outs(tmp_path, "f5b"))
    assert "no Release Labels runs" in notes[0]
    assert plot_fig4_label_methods({"split_a": []}, _outs(tmp_path, "f4b"))[0].startswith("no runs")
    _assert_figure(tmp_path / "f4b")


def test_stage_reads_metrics_files_and_writes_every_figure(tmp_path):
    """The workflow's stage on metrics.json files written in the runs layout."""
    runs = {}
    for bench in BENCHMARKS:
        paths = []
        for r in _records(bench, ["oracle", "base", "public-x1000", "release-f0.1"], seeds=range(3)):
            p = (
                tmp_path
                / "runs"
                / r["learner"]
                / bench
                / f"seed{r['seed']}"
                / f"eps{r['epsilon']}"
                / r["label_method"]
                / "metrics.json"
            )
            write_json(p, {**r, "epsilon": float(r["epsilon"])})
            paths.append(str(p))
        runs[bench] = paths
    outputs = {f"fig{n}": _outs(tmp_path / "fig", f"fig{n}") for n in (4, 5, 6, 7)}
    notes = paper_figures(runs, BENCHMARKS, outputs=outputs)
    assert notes["fig4"] == [] and notes["fig7"] == []
    for n in (4, 5, 6, 7):
        _assert_figure(tmp_path / "fig" / f"fig{n}")
    with pytest.raises(ValueError, match="not in the config"):
        paper_figures({"nope": []}, BENCHMARKS, outputs=outputs)


# --- Appendix figures A3-A9 ------------------------------------------------------------------

TASK_LEARNERS = ("cosine", "peft_head", "naive_head", "noncl_head")
TASK_BENCHMARKS = {
    **BENCHMARKS,
    "imr": {"dataset": "imagenet_r", "backbone": "bb", "scenario": "disjoint", "n_tasks": 5},
    "five": {"dataset": "five_datasets", "backbone": "bb", "scenario": "datasets", "n_tasks": 5},
}


def _task_record(bench: str, learner: str, eps: str, method: str, seed: int, n_tasks: int = 5) -> dict:
    """A run whose AA_t falls and AF_t grows with t; a Non-CL run is evaluated only after the
    last task (AA_t NaN before it, AF_t NaN throughout), as dpcl.metrics writes it."""
    r = _record(bench, learner, eps, method, seed, n_tasks)
    noise = 0.01 * rng(seed, "task-curve", bench, learner, eps, method).standard_normal(n_tasks)
    t = np.arange(n_tasks)
    aa = 0.9 - 0.04 * t - (0.1 if eps == "1" else 0.0) + noise
    af = np.where(t == 0, np.nan, 0.02 * t + np.abs(noise))
    if learner.startswith("noncl"):
        aa[:-1], af[:] = np.nan, np.nan
    return {
        **r,
        "average_accuracy": aa.tolist(),
        "average_forgetting": af.tolist(),
        "final_accuracy": aa[-1],
        "final_forgetting": af[-1],
    }


def _task_records(
    bench: str, methods=("oracle", "base"), learners=TASK_LEARNERS, epsilons=("1", "8", "inf"), seeds=range(5)
) -> list[dict]:
    return [
        _task_record(bench, lr, e, m, s) for lr in learners for e in epsilons for m in methods for s in seeds
    ]


def test_task_figure_ids_follow_the_appendix():
    assert task_figure_ids(BENCHMARKS["split_a"]) == ("A5", "A6")  # Split-CIFAR-100 and other disjoint splits
    assert task_figure_ids(TASK_BENCHMARKS["imr"]) == (
        "A7",
        None,
    )  # the paper has no ImageNet-R forgetting figure
    assert task_figure_ids({**TASK_BENCHMARKS["imr"], "dataset": "imagenet_r__seed1"}) == ("A7", None)
    assert task_figure_ids(TASK_BENCHMARKS["five"]) == ("A8", "A9")
    assert task_figure_ids(BENCHMARKS["blur_m25"]) == (None, None)


def test_task_series_is_median_min_max_over_seeds_and_skips_undefined_entries():
    """Hand-computed: three seeds, AF_1 undefined, a Non-CL run defined only at t = T."""
    base = [
        {"learner": "cosine", "epsilon": "1", "average_accuracy": [a, b], "average_forgetting": [math.nan, f]}
        for a, b, f in ((0.9, 0.5, 0.1), (0.7, 0.6, 0.3), (0.8, 0.4, 0.2))
    ]
    base += [
        {
            "learner": "noncl_head",
            "epsilon": "1",
            "average_accuracy": [math.nan, v],
            "average_forgetting": [math.nan, math.nan],
        }
        for v in (0.6, 0.8)
    ]
    acc = task_series(base, "accuracy")["1"]
    assert list(acc) == ["cosine", "noncl_head"]
    t, lo, med, hi = acc["cosine"]
    np.testing.assert_allclose(np.stack([t, lo, med, hi]), [[1, 2], [70, 40], [80, 50], [90, 60]])
    t, lo, med, hi = acc["noncl_head"]
    np.testing.assert_allclose([*t, *lo, *med, *hi], [2, 60, 70, 80])
    fgt = task_series(base, "forgetting")["1"]
    np.testing.assert_allclose(np.concatenate(fgt["cosine"]), [2, 10, 20, 30])
    assert fgt["noncl_head"][0].size == 0
    with pytest.raises(ValueError, match="different task counts"):
        task_series([*base, {**base[0], "average_accuracy": [0.5]}], "accuracy")


def test_per_task_figures_draw_every_learner_and_note_what_is_undefined(tmp_path):
    recs = _task_records("split_a")
    assert plot_task_metric(recs, "accuracy", "split_a", BENCHMARKS["split_a"], _outs(tmp_path, "acc")) == []
    notes = plot_task_metric(recs, "forgetting", "five", TASK_BENCHMARKS["five"], _outs(tmp_path, "fgt"))
    assert any("Non-CL (head-only): no finite average_forgetting" in n for n in notes)
    assert any("AF_1 is undefined" in n for n in notes)
    assert len(notes) == 2
    for stem in ("acc", "fgt"):
        _assert_figure(tmp_path / stem)
    with pytest.raises(ValueError, match="'accuracy' or 'forgetting'"):
        plot_task_metric(recs, "loss", "split_a", BENCHMARKS["split_a"], _outs(tmp_path, "x"))


def test_per_task_figures_without_base_runs_say_which_key_to_set(tmp_path):
    cfg = BENCHMARKS["split_a"]
    notes = plot_task_metric(
        _task_records("split_a", methods=("oracle",)), "accuracy", "split_a", cfg, _outs(tmp_path, "nobase")
    )
    assert notes == [notes[0]] and "label method 'base'" in notes[0] and "head_label_methods" in notes[0]
    # the Cosine Classifier ran Base Dataset, the DP-SGD learners did not (base not in head_label_methods)
    mixed = _task_records("split_a", learners=("cosine",)) + _task_records(
        "split_a", methods=("oracle",), learners=("peft_head",)
    )
    notes = plot_task_metric(mixed, "accuracy", "split_a", cfg, _outs(tmp_path, "mixed"))
    assert notes == ["no Base Dataset runs for PEFT Ensemble (head-only): add base to head_label_methods"]
    assert (
        "no runs for benchmark split_a"
        in plot_task_metric([], "forgetting", "split_a", cfg, _outs(tmp_path, "empty"))[0]
    )
    for stem in ("nobase", "mixed", "empty"):
        _assert_figure(tmp_path / stem)


def test_figA4_compares_learners_over_epsilon_per_benchmark(tmp_path):
    recs = {
        "split_a": _task_records("split_a"),
        "imr": _task_records("imr", learners=("cosine", "noncl_head")),
        "five": _task_records("five"),
    }
    assert plot_figA4_privacy_utility(recs, TASK_BENCHMARKS, _outs(tmp_path, "a4")) == []
    _assert_figure(tmp_path / "a4")
    sparse = {"split_a": _task_records("split_a", methods=("oracle",)), "imr": []}
    notes = plot_figA4_privacy_utility(sparse, TASK_BENCHMARKS, _outs(tmp_path, "a4s"))
    assert notes[0].startswith("split_a: no runs with label method 'base'") and notes[1] == "imr: no runs"
    only_blurry = plot_figA4_privacy_utility(
        {"blur_m25": _task_records("blur_m25")}, TASK_BENCHMARKS, _outs(tmp_path, "a4b")
    )
    assert only_blurry == ["no disjoint-split or 5-dataset benchmarks in this config"]
    for stem in ("a4s", "a4b"):
        _assert_figure(tmp_path / stem)


def test_figA3_bars_per_blurry_ratio_and_label_method(tmp_path):
    by_m = next(iter(blurry_groups(BENCHMARKS).values()))
    groups = {"g": {m: _records(b, FULL_METHODS) for m, b in by_m.items()}}
    assert plot_figA3_blurriness(groups, _outs(tmp_path, "a3")) == []
    notes = plot_figA3_blurriness({"g": {25.0: _records("blur_m25", ["base"])}}, _outs(tmp_path, "a3one"))
    assert notes == ["g: one blurry ratio (M = 25 %); add i-Blurry benchmarks with other blurry_pct values"]
    notes = plot_figA3_blurriness({}, _outs(tmp_path, "a3none"))
    assert "no i-Blurry benchmarks" in notes[0] and "scenario: iblurry" in notes[0]
    notes = plot_figA3_blurriness({"g": {25.0: _records("blur_m25", ["oracle"])}}, _outs(tmp_path, "a3or"))
    assert sum("no Base / Public / Release Labels runs" in n for n in notes) == 4  # 2 learners x 2 ε panels
    for stem in ("a3", "a3one", "a3none", "a3or"):
        _assert_figure(tmp_path / stem)


def test_stage_writes_appendix_figures_from_metrics_files(tmp_path):
    """The workflow's stage with every learner's metrics.json (NaN stored as "nan") and A3-A9 outputs."""
    runs = {}
    for bench in TASK_BENCHMARKS:
        paths = []
        for r in _task_records(
            bench, methods=("oracle", "base", "public-x1000", "release-f0.1"), seeds=range(3)
        ):
            p = (
                tmp_path
                / "runs"
                / r["learner"]
                / bench
                / f"seed{r['seed']}"
                / f"eps{r['epsilon']}"
                / r["label_method"]
                / "metrics.json"
            )
            write_json(p, {**r, "epsilon": float(r["epsilon"])})
            paths.append(str(p))
        runs[bench] = paths
    assert '"nan"' in Path(runs["split_a"][-1]).read_text()  # a Non-CL run: NaN rows on disk
    outputs = {f: _outs(tmp_path / "fig", f) for f in ("fig4", "fig5", "fig6", "fig7", "figA3", "figA4")}
    task = {
        b: {m: _outs(tmp_path / "fig", f"{b}_{m}") for m in ("accuracy", "forgetting")}
        for b in TASK_BENCHMARKS
    }
    notes = paper_figures(runs, TASK_BENCHMARKS, outputs=outputs, task_outputs=task)
    assert notes["figA3"] == [] and notes["figA4"] == [] and notes["fig4"] == []
    assert notes["imr_accuracy_per_task"] == [] and notes["five_accuracy_per_task"] == []
    assert any("Non-CL" in n for n in notes["five_forgetting_per_task"])
    for f in outputs:
        _assert_figure(tmp_path / "fig" / f)
    for b in TASK_BENCHMARKS:
        for m in ("accuracy", "forgetting"):
            _assert_figure(tmp_path / "fig" / f"{b}_{m}")
    with pytest.raises(ValueError, match="not in the config"):
        paper_figures({}, TASK_BENCHMARKS, outputs=outputs, task_outputs={"nope": {}})


# --- HTML report -----------------------------------------------------------------------------


class _Collector(HTMLParser):
    """Tags, attributes and text of a page; fails on unbalanced section/table/div tags."""

    VOID = {"img", "meta", "br", "hr", "link", "input"}

    def __init__(self):
        super().__init__()
        self.stack: list[str] = []
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, (
            f"</{tag}> closes <{self.stack[-1] if self.stack else None}>"
        )
        self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)


def _png(path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 1], [1, 0])
    fig.savefig(path)
    fig.savefig(path.with_suffix(".pdf"))
    plt.close(fig)


def test_html_report_shows_every_file_with_its_config(tmp_path):
    res = tmp_path / "results"
    (res / "figures" / "paper").mkdir(parents=True)
    (res / "tables").mkdir()
    figs = [
        res / "figures" / "bench_a_cosine_avg_acc.png",
        res / "figures" / "fig2_label_drop_probability.png",
        res / "figures" / "paper" / "fig4.png",
    ]
    for f in figs:
        _png(f)
    write_text(
        res / "tables" / "bench_a_cosine.md",
        "### bench_a: final accuracy (%)\n\n| ε | Classifier | Label Oracle |\n|---|---|---|\n"
        "| 1 | Cosine <b> | (75.0), 75.4, (75.6) |\n\nFinal average accuracy over 5 seeds.\n",
    )
    write_text(res / "tables" / "bench_a_cosine.csv", "learner,acc_median\ncosine,75.4\n")
    write_text(res / "tables" / "privacy_audit.csv", "mechanism,verdict\nlabel release (tsgd),consistent\n")
    files = [
        *figs,
        *(f.with_suffix(".pdf") for f in figs),
        res / "tables" / "bench_a_cosine.md",
        res / "tables" / "bench_a_cosine.csv",
        res / "tables" / "privacy_audit.csv",
    ]
    config = {
        "seeds": [0, 1],
        "epsilons": [1, "inf"],
        "delta": 1e-5,
        "label_methods": ["oracle"],
        "datasets": {"dsx": {"source": "local"}},
        "backbones": {"bbx": {"arch": "tiny_arch_name"}},
        "benchmarks": {
            "bench_a": {"dataset": "dsx", "backbone": "bbx", "scenario": "disjoint", "n_tasks": 5},
            "bench": {"dataset": "dsx", "backbone": "bbx", "scenario": "disjoint", "n_tasks": 2},
        },
    }
    sections = group_files(files, config)
    titles = [s.title for s in sections]
    assert titles[0] == "Benchmark bench_a"  # longest benchmark name wins over its prefix 'bench'
    assert "Benchmark bench" not in titles and any(t.startswith("Paper Figures") for t in titles)
    assert any(t.startswith("Privacy") for t in titles)
    assert sorted(f for s in sections for f in s.files) == sorted(files)
    out = res / "report.html"
    build_html_report(sections, config, out, version="9.9.9", date="2026-01-01")
    page = out.read_text()
    parser = _Collector()
    parser.feed(page)
    parser.close()
    assert parser.stack == []
    imgs = [a for t, a in parser.tags if t == "img"]
    assert len(imgs) == len(figs)
    assert all(a["src"].startswith("data:image/png;base64,") and len(a["src"]) > 1000 for a in imgs)
    # self-contained: nothing loaded from elsewhere
    assert not [a for t, a in parser.tags if t in ("script", "link") or (t != "a" and "href" in a)]
    text = " ".join(parser.text)
    for stem in (
        "bench_a_cosine_avg_acc",
        "fig2_label_drop_probability",
        "fig4",
        "bench_a_cosine",
        "privacy_audit",
    ):
        assert f"{stem}" in [d.strip() for d in parser.text], stem
    assert caption("fig4") in text and caption("fig2_label_drop_probability") in text
    assert "Cosine <b>" in text and "<b>" not in page.replace("&lt;b&gt;", "")  # escaped
    assert "(75.0), 75.4, (75.6)" in text and "label release (tsgd)" in text
    assert "9.9.9" in text and "2026-01-01" in text and "tiny_arch_name" in text
    full = page[page.index('id="config"') :]
    assert yaml.safe_load(html.unescape(full[full.index("<pre>") + 5 : full.index("</pre>")])) == config
    with pytest.raises(FileNotFoundError, match="missing"):
        build_html_report([Section("x", [res / "nope.png"])], config, tmp_path / "r.html")


def test_markdown_tables_drop_the_separator_row():
    out = markdown_to_html("### T\n\n| a | b |\n|---|:--:|\n| 1 | 2 |\ntext after\n")
    assert out.count("<tr>") == 2 and "<h5>T</h5>" in out and "<p>text after</p>" in out


# --- [Tobaben2024] Fig. 4: Not Blurry vs I-Blurry vs Si-Blurry -----------------------------------

TRIO = {
    **BENCHMARKS,
    "blur_m10": {**BENCHMARKS["blur_m25"], "blurry_pct": 10},
    "si": {**BENCHMARKS["blur_m25"], "scenario": "siblurry", "blurry_pct": 10},
}
LABELS = np.repeat(np.arange(10), 30)  # 10 classes x 30 training samples, indices 0..299


def test_samples_per_task_splits_disjoint_and_blurry_classes():
    from dpcl.data.scenarios import make_scenario, samples_per_task

    d, b = samples_per_task(make_scenario("disjoint", LABELS, 5, 0).train_indices, LABELS)
    assert d.tolist() == [60] * 5 and b.tolist() == [0] * 5
    sc = make_scenario("iblurry", LABELS, 5, 0, disjoint_pct=50, blurry_pct=10)
    d, b = samples_per_task(sc.train_indices, LABELS)  # one disjoint class of 30 per task, blurry ones spread
    assert (
        d.tolist() == [30] * 5 and (d + b).tolist() == [len(i) for i in sc.train_indices] and b.sum() == 150
    )
    sc = make_scenario("siblurry", LABELS, 5, 0, disjoint_pct=50, blurry_pct=10)
    d, b = samples_per_task(sc.train_indices, LABELS)
    # the five disjoint classes stay disjoint; a "blurry" class of which no sample moved is in one task: disjoint
    assert (d + b).tolist() == [len(i) for i in sc.train_indices] and d.sum() >= 150 and 0 < b.sum() <= 150


def test_blurry_comparisons_take_iblurry_50_10_and_group_by_data_set():
    from dpcl.report.paper_figures import blurry_comparisons, blurry_trios

    assert blurry_comparisons(BENCHMARKS) == {
        "ds / bb, 5 tasks": {"disjoint": "split_a"}
    }  # M = 25, 75: not 10
    assert blurry_trios(BENCHMARKS) == {}
    trio = {"disjoint": "split_a", "iblurry": "blur_m10", "siblurry": "si"}
    assert blurry_trios(TRIO) == {"ds / bb, 5 tasks": trio}
    other = {**TRIO, "si_other": {**TRIO["si"], "backbone": "other"}}
    assert blurry_comparisons(other)["ds / other, 5 tasks"] == {"siblurry": "si_other"}
    assert list(blurry_trios(other)) == ["ds / bb, 5 tasks"]


def _trio_groups(learners=("cosine", "peft_film")):
    from dpcl.data.scenarios import make_scenario, samples_per_task
    from dpcl.report.paper_figures import BlurrySetting

    out = {}
    for setting, bench in (("disjoint", "split_a"), ("iblurry", "blur_m10"), ("siblurry", "si")):
        sc = make_scenario(setting, LABELS, 5, 0, disjoint_pct=50, blurry_pct=10)
        recs = _records(bench, ["base", "oracle"], learners=learners, epsilons=("1", "8", "inf"))
        out[setting] = BlurrySetting(bench, recs, samples_per_task(sc.train_indices, LABELS), 0)
    return {"ds / bb, 5 tasks": out}


def test_p003_fig4_draws_samples_and_accuracy_for_a_trio_and_a_note_otherwise(tmp_path):
    from dpcl.report.paper_figures import plot_p003_fig4_blurry

    assert plot_p003_fig4_blurry(_trio_groups(), _outs(tmp_path, "p003")) == []
    _assert_figure(tmp_path / "p003")
    groups = _trio_groups(learners=("cosine",))
    groups["ds / bb, 5 tasks"]["siblurry"].records = []
    groups["ds / bb, 5 tasks"]["siblurry"].samples = None
    notes = plot_p003_fig4_blurry(groups, _outs(tmp_path, "p003s"))
    assert notes == ["si: no scenario file given", "no Base Dataset runs of Cosine Classifier on si"]
    _assert_figure(tmp_path / "p003s")
    notes = plot_p003_fig4_blurry({}, _outs(tmp_path, "p003n"))
    assert "i-Blurry (disjoint_pct 50, blurry_pct 10)" in notes[0] and "Si-Blurry" in notes[0]
    _assert_figure(tmp_path / "p003n")
    assert caption("p003_fig4_blurry").startswith("[Tobaben2024] Fig. 4")


def test_stage_draws_p003_fig4_from_scenario_files_only_for_a_trio(tmp_path, monkeypatch):
    """The stage reads each benchmark's scenario file and the data set's labels (here a stub)."""
    from types import SimpleNamespace

    from dpcl.data.scenarios import make_scenario

    loads = []

    def subset(name, root, split, cfg):
        loads.append((name, Path(root).name, split))
        return SimpleNamespace(labels=LABELS), np.arange(len(LABELS))

    monkeypatch.setattr("dpcl.stages.paper_figures.dataset_subset", subset)
    runs, scenarios = {}, {}
    for bench, cfg in TRIO.items():
        runs[bench] = []
        for r in _records(bench, ["base"], learners=("cosine", "peft_head"), seeds=range(3)):
            p = tmp_path / "runs" / r["learner"] / bench / f"s{r['seed']}e{r['epsilon']}" / "metrics.json"
            write_json(p, {**r, "epsilon": float(r["epsilon"])})
            runs[bench].append(str(p))
        sc = make_scenario(
            cfg["scenario"], LABELS, 5, 0, disjoint_pct=50, blurry_pct=cfg.get("blurry_pct", 0)
        )
        write_json(tmp_path / "scenarios" / f"{bench}.json", sc.to_dict())
        scenarios[bench] = tmp_path / "scenarios" / f"{bench}.json"
    outputs = {f: _outs(tmp_path / "fig", f) for f in ("fig4", "fig5", "fig6", "fig7", "p003_fig4_blurry")}
    notes = paper_figures(
        runs, TRIO, outputs=outputs, scenarios=scenarios, resources=tmp_path, datasets={"ds": {}}
    )
    assert notes["p003_fig4_blurry"] == [] and loads == [
        ("ds", "ds", "train")
    ]  # labels read once per data set
    _assert_figure(tmp_path / "fig" / "p003_fig4_blurry")
    # no trio (i-Blurry M = 25, 75 only): the note figure, no scenario file or data set read
    loads.clear()
    notes = paper_figures({b: runs[b] for b in BENCHMARKS}, BENCHMARKS, outputs=outputs, scenarios=scenarios)
    assert "no data set with a disjoint" in notes["p003_fig4_blurry"][0] and loads == []
    _assert_figure(tmp_path / "fig" / "p003_fig4_blurry")
