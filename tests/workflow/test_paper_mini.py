"""The miniature paper run: config/paper_mini.yaml only shrinks config/paper.yaml,
`dpcl fixtures paper-mini` writes every paper data set in its official format where the
overlay reads it (checked through the real obtain and load code), and the checks CI runs
on the finished miniature (dpcl.miniature) catch what they must."""

import copy
import csv
import html
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import yaml

from dpcl.cli import main
from dpcl.config import validate_config
from dpcl.data.registry import load_dataset
from dpcl.miniature import check_miniature, finished_jobs, planned_jobs, unfilled_cells
from dpcl.report.paper_tables import MINIATURE_NOTE
from dpcl.stages.data import obtain_dataset

REPO = Path(__file__).resolve().parents[2]


def _leaves(d, prefix=()):
    for k, v in d.items():
        if isinstance(v, dict) and v:
            yield from _leaves(v, (*prefix, k))
        else:
            yield (*prefix, k)


def _merge(base, over):
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(base[k], v) if isinstance(v, dict) and isinstance(base.get(k), dict) else v
    return out


PAPER = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())
MINI = yaml.safe_load((REPO / "config" / "paper_mini.yaml").read_text())


def test_overlay_shrinks_sizes_and_keeps_the_grid():
    # every key the overlay sets is a size, a location, the tiny backbone or the miniature flag
    allowed_top = {"results", "resources", "miniature", "seeds"}
    allowed = {
        ("dpsgd", "epochs"),
        ("film", "dpsgd", "epochs"),
        ("film", "physical_batch"),
        ("film", "device"),
        ("film", "threads"),
        ("tuning", "trials"),
        ("benchmarks", "five_datasets", "seeds"),
        *(("benchmarks", f"iblurry_cifar100_m{m}", "seeds") for m in (25, 50, 75, 100)),
        ("audit", "trials"),
        ("audit", "learner_trials"),
        ("audit", "whitebox_runs"),
        ("audit", "whitebox_canaries"),
        ("audit", "whitebox_bias_trials"),
        ("audit", "canary_runs"),
        ("audit", "canary_count"),
    }
    for path in _leaves(MINI):
        if len(path) == 1:
            assert path[0] in allowed_top, path
        elif path[0] == "datasets":
            assert path[1] in PAPER["datasets"], f"the overlay declares a data set the paper has not: {path}"
            assert path[2] in {
                "source",
                "local_dir",
                "verify",
                "image_size",
                "nominal_train_size",
                "test_per_class",
            }, path
        elif path[0] == "backbones":
            assert path[1] in PAPER["backbones"], path  # the paper's backbone name, a tiny random model
        else:
            assert path in allowed, path
    merged = validate_config(_merge(copy.deepcopy(PAPER), MINI))
    paper = validate_config(copy.deepcopy(PAPER))
    # the grid: the same benchmarks with the same scenarios, learners, methods, epsilons
    for key in (
        "learners",
        "label_methods",
        "epsilons",
        "head_label_methods",
        "nonprivate_label_methods",
        "baseline_label_methods",
        "agem",
    ):
        assert merged[key] == paper[key], key
    assert merged["benchmarks"].keys() == paper["benchmarks"].keys()
    for name, bench in paper["benchmarks"].items():
        mini = merged["benchmarks"][name]
        assert {k: v for k, v in mini.items() if k != "seeds"} == {
            k: v for k, v in bench.items() if k != "seeds"
        }
    assert merged["benchmarks"]["five_datasets"]["seeds"] == [0, 1] and merged["seeds"] == [0, 1]
    # one seed only where another benchmark of the same scenario kind keeps two
    single = {n for n, b in merged["benchmarks"].items() if len(b.get("seeds") or merged["seeds"]) < 2}
    assert single == {f"iblurry_cifar100_m{m}" for m in (25, 50, 75, 100)}
    for name in single:
        kind = paper["benchmarks"][name]["scenario"]
        assert any(
            b["scenario"] == kind and len(b.get("seeds") or merged["seeds"]) >= 2
            for b in merged["benchmarks"].values()
        ), name
    assert merged["backbones"]["vit_b16"]["weights"] == "random" and merged["miniature"] is True
    assert merged["tuning"]["protocol"] == PAPER["tuning"]["protocol"] == "paper"


def test_fixtures_are_read_by_the_real_obtain_and_load_code(tmp_path, capsys):
    raw = tmp_path / "raw"
    main(["fixtures", "paper-mini", str(raw)])
    assert "cifar100: 1 files" in capsys.readouterr().out
    cfg = validate_config(_merge(copy.deepcopy(PAPER), MINI))
    expect = {"cifar100": (100, 8, 4), "five_datasets": (50, 24, 4)}
    for name in ("cifar100", "five_datasets", "imagenet_r__seed0"):
        dcfg = dict(cfg["datasets"][name])
        dcfg["local_dir"] = str(raw / Path(dcfg["local_dir"]).name)  # the overlay's folder, written here
        dest = tmp_path / "res" / name
        dest.mkdir(parents=True)
        obtain_dataset(name, dest / "MANIFEST.json", dcfg)
        kind = name.split("__")[0]
        train, test = load_dataset(kind, dest, "train"), load_dataset(kind, dest, "test")
        if kind in expect:
            n, per_train, per_test = expect[kind]
            assert len(train.classes) == n
            assert set(Counter(train.labels.tolist()).values()) == {per_train}
            assert set(Counter(test.labels.tolist()).values()) == {per_test}
        else:  # ImageNet-R: 200 classes, 1,600 readable JPEGs (+1 broken, skipped), split 80/20 at random
            assert train.images.shape[1:] == (32, 32, 3)
            assert len(np.unique(np.concatenate([train.labels, test.labels]))) == 200
            assert len(train.labels) + len(test.labels) == 200 * 8 + 1  # the wide test image of class 0
            assert abs(len(test.labels) / 1601 - 0.2) < 0.01


def _table_csv(path, rows):
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(
            fh,
            fieldnames=[
                "table",
                "benchmark",
                "setting",
                "epsilon",
                "learner",
                "label_method",
                "metric",
                "statistic",
                "ours",
                "published",
            ],
        )
        w.writeheader()
        for r in rows:
            w.writerow(r)


DRYRUN = """Building DAG of jobs...
Job stats:
job              count
-------------  -------
film_ensemble       30
paper_tables         1
all                  1
total               32

Job stats:
job              count
"""


def test_miniature_check_names_rules_that_never_ran_and_unfilled_cells(tmp_path):
    assert planned_jobs(DRYRUN) == Counter({"film_ensemble": 30, "paper_tables": 1, "all": 1})
    log = "Finished jobid: 3 (Rule: film_ensemble)\nFinished jobid: 4 (Rule: film_ensemble)\nFinished jobid: 0 (Rule: all)\n"
    assert finished_jobs(log) == Counter({"film_ensemble": 2, "all": 1})
    tables = tmp_path / "res" / "tables" / "paper"
    tables.mkdir(parents=True)
    row = {
        "table": "A3",
        "benchmark": "b",
        "setting": "disjoint",
        "epsilon": "1",
        "learner": "cosine",
        "label_method": "base",
        "metric": "aa",
        "statistic": "median",
    }
    _table_csv(
        tables / "table_A3.csv",
        [
            {**row, "ours": "50.0", "published": "60.1"},
            {**row, "label_method": "oracle", "ours": "", "published": "70.2"},
            {**row, "label_method": "x", "ours": "", "published": ""},
        ],
    )
    (tables / "table_A3.md").write_text("| a |\n\nNotes: something else\n")
    missing, filled = unfilled_cells(tables)
    assert filled == 1 and len(missing) == 1 and "label_method=oracle" in missing[0]
    rep = check_miniature(tmp_path / "res", log, DRYRUN)
    text = "\n".join(rep.problems)
    assert not rep.ok
    assert "never ran: paper_tables" in text and "label_method=oracle" in text
    assert "does not say it is a miniature" in text and "report.html was not built" in text
    # all fixed: OK
    _table_csv(tables / "table_A3.csv", [{**row, "ours": "50.0", "published": "60.1"}])
    (tables / "table_A3.md").write_text(f"| a |\n\n{MINIATURE_NOTE}\n")
    (tmp_path / "res" / "report.html").write_text(f"<p>{MINIATURE_NOTE}</p>")
    rep = check_miniature(tmp_path / "res", log + "Finished jobid: 9 (Rule: paper_tables)\n", DRYRUN)
    assert rep.ok, rep.problems
    assert "OK" in rep.summary() and "3 rules" in rep.summary()


def test_planned_jobs_refuses_output_without_a_table():
    with pytest.raises(ValueError, match="Job stats"):
        planned_jobs("Nothing to be done.")


def test_report_header_and_paper_tables_say_miniature(tmp_path):
    from dpcl.report.html import build_html_report
    from dpcl.stages.paper_tables import build_paper_tables

    build_html_report([], {"miniature": True}, tmp_path / "mini.html")
    build_html_report([], {"miniature": False}, tmp_path / "real.html")
    assert html.escape(MINIATURE_NOTE) in (tmp_path / "mini.html").read_text()  # its apostrophe is escaped
    assert "Miniature run" not in (tmp_path / "real.html").read_text()
    written = build_paper_tables({}, {}, tmp_path / "tables", {"enabled": False}, miniature=True)
    md = [p for p in written if p.suffix == ".md"]
    assert len(md) == 10 and all(p.read_text().count(MINIATURE_NOTE) == 1 for p in md)
    plain = build_paper_tables({}, {}, tmp_path / "plain", {"enabled": False})
    assert not any("Miniature run" in p.read_text() for p in plain if p.suffix == ".md")
