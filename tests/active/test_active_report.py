"""Tables and figures of DP active learning ([Schwethelm2025]) from a synthetic summary CSV and real schedules."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpcl.report.active import (
    MISSING,
    PUBLISHED,
    TABLE1_ROWS,
    active_tables,
    main_setting,
)
from dpcl.report.active_figures import group_epsilon_curves, group_privacy_figure, selection_epsilon_figure

SEEDS = (0, 1, 2)
POOLS = ("balanced", "imbalanced")
MODES = ("paper", "sound")


def _parts(method: str) -> tuple[str, str, str]:
    bits = method.split("-")
    sched = {
        "nal": "single",
        "naive": "naive",
        "sa": "step_amplification",
        "cl": "continual",
        "nr": "noise_reduction",
    }[bits[-1]]
    return bits[0], ("random" if len(bits) == 2 else bits[1]), sched


def _acc(method: str, pool: str, mode: str, eps: float, sel: float, seed: int) -> float:
    """A deterministic, distinct accuracy per run (so that means and sds are checkable)."""
    base = 0.70 + 0.01 * (zlib.crc32(f"{method}/{pool}/{mode}".encode()) % 7) + 0.005 * eps + 0.002 * sel
    return round(base + 0.01 * (seed - 1) * (1 + (pool == "imbalanced")), 6)


def _summary(
    tmp_path: Path, methods_at: dict[tuple[float, float], list[str]], pools=POOLS, modes=MODES, seeds=SEEDS
) -> Path:
    rows = []
    for (eps, sel), methods in methods_at.items():
        for m in methods:
            acq, selection, sched = _parts(m)
            s = sel if selection == "dp" else 0.0
            for pool in pools:
                for mode in modes:
                    for seed in seeds:
                        rows.append(
                            {
                                "pool": pool,
                                "mode": mode,
                                "method": m,
                                "acquisition": acq,
                                "selection": selection,
                                "schedule": sched,
                                "epsilon": eps,
                                "selection_epsilon": s,
                                "seed": seed,
                                "final_accuracy": _acc(m, pool, mode, eps, s, seed),
                                "guarantee_holds": mode == "sound" and selection != "nondp",
                            }
                        )
    path = tmp_path / "summary.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


ALL_T1 = [m for m, *_ in TABLE1_ROWS]
FULL = {
    (8.0, 2.0): ALL_T1 + ["entropy-dp-cl", "entropy-dp-nr"],
    (8.0, 1.0): ["entropy-dp-sa"],
    (8.0, 4.0): ["entropy-dp-sa"],
    (3.0, 1.0): ["random-nal", "entropy-dp-sa"],
}


def _md_table(path: Path) -> list[list[str]]:
    lines = [ln for ln in path.read_text().splitlines() if ln.startswith("|")]
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in lines]


def test_published_transcription():
    assert PUBLISHED["table1"]["random-nal"]["CIFAR-10 ResNet-9"] == (66.58, 0.94)
    assert PUBLISHED["table1"]["margin-nondp-sa"]["RetinalOCT ResNet-9"] == (80.73, 3.57)
    assert PUBLISHED["table1"]["bald-dp-sa"]["CIFAR-10 ResNet-9"] == (66.12, 0.94)
    assert PUBLISHED["table2"]["entropy-dp-sa"][(16.0, 4.0)] == (71.93, 0.48)
    assert PUBLISHED["table2"]["random-nal"][(3.0, 1.0)] == (57.73, 0.85)
    assert PUBLISHED["table5"]["entropy-dp-cl"] == (63.94, 0.98)
    assert PUBLISHED["table5"]["entropy-dp-sa"] == PUBLISHED["table1"]["entropy-dp-sa"]["CIFAR-10 ResNet-9"]
    assert PUBLISHED["table2"]["entropy-dp-sa"][(8.0, 2.0)] == PUBLISHED["table5"]["entropy-dp-sa"]


def test_main_setting(tmp_path):
    from dpcl.report.active import load_summary

    df = load_summary(_summary(tmp_path, FULL))
    assert main_setting(df) == (8.0, 2.0)  # every ε_Sel has 12 entropy-dp-sa runs: most runs overall
    df2 = load_summary(
        _summary(tmp_path, {(8.0, 2.0): ["entropy-dp-sa"], (5.0, 1.0): ["entropy-dp-sa"]}, seeds=(0, 1))
    )
    extra = load_summary(_summary(tmp_path, {(5.0, 1.0): ["entropy-dp-sa"]}, seeds=(5,)))
    assert main_setting(pd.concat([df2, extra])) == (5.0, 1.0)
    assert main_setting(load_summary(_summary(tmp_path, {(4.0, 0.0): ["random-nal"]}))) == (4.0, None)


def _expected(method, pool, mode, eps, sel):
    v = 100 * np.array([_acc(method, pool, mode, eps, sel, s) for s in SEEDS])
    return f"{v.mean():.2f} ± {v.std(ddof=1):.2f} ({len(v)})"


def test_tables_full(tmp_path):
    summary = _summary(tmp_path, FULL)
    paths = active_tables(summary, tmp_path / "out")
    names = sorted(p.name for p in paths)
    assert names == sorted(f"table{i}.{e}" for i in (1, 2, 5) for e in ("csv", "md"))
    assert all(p.stat().st_size > 0 for p in paths)

    # Table I: paper's row order, pool × mode columns then the two published columns
    t1 = _md_table(tmp_path / "out" / "table1.md")
    header, body = t1[0], t1[2:]
    assert header[:3] == ["Method", "SA", "DP"]
    assert header[3:7] == [
        "balanced pool, paper mode",
        "balanced pool, sound mode",
        "imbalanced pool, paper mode",
        "imbalanced pool, sound mode",
    ]
    assert "CIFAR-10 ResNet-9" in header[7] and "RetinalOCT ResNet-9" in header[8] and len(header) == 9
    assert [r[0] for r in body] == [name for _, name, *_ in TABLE1_ROWS]
    assert [r[2] for r in body] == ["✓"] * 3 + ["×"] * 4 + ["✓"] * 4
    for (method, *_), row in zip(TABLE1_ROWS, body, strict=True):
        sel = 2.0 if "-dp-" in method else 0.0
        assert row[3] == _expected(method, "balanced", "paper", 8.0, sel)
        assert row[6] == _expected(method, "imbalanced", "sound", 8.0, sel)
        c, o = (
            PUBLISHED["table1"][method]["CIFAR-10 ResNet-9"],
            PUBLISHED["table1"][method]["RetinalOCT ResNet-9"],
        )
        assert row[7] == f"{c[0]:.2f} ± {c[1]:.2f}" and row[8] == f"{o[0]:.2f} ± {o[1]:.2f}"
    md = (tmp_path / "out" / "table1.md").read_text()
    assert "ε = 8, ε_Sel = 2" in md
    assert "holds for sound mode with dp selection, sound mode with random selection" in md
    assert "does not hold for paper mode with dp selection" in md and "sound mode with nondp selection" in md
    assert "paper mode has no end-to-end guarantee" in md

    # tidy CSV: numbers behind the cells
    csv = pd.read_csv(tmp_path / "out" / "table1.csv")
    r = csv[
        (csv["method"] == "entropy-dp-sa") & (csv["pool"] == "imbalanced") & (csv["mode"] == "paper")
    ].iloc[0]
    v = 100 * np.array([_acc("entropy-dp-sa", "imbalanced", "paper", 8.0, 2.0, s) for s in SEEDS])
    assert r["n"] == 3 and r["mean"] == pytest.approx(v.mean(), abs=1e-3)
    assert r["sd"] == pytest.approx(v.std(ddof=1), abs=1e-3) and r["guarantee_holds"] == 0
    pub = csv[(csv["source"] == "[Schwethelm2025]") & (csv["method"] == "random-naive")]
    assert sorted(pub["mean"]) == [63.40, 69.84]

    # Table II: settings as columns (ours ∪ the paper's), Random / Entropy rows per pool × mode, then published
    t2 = _md_table(tmp_path / "out" / "table2.md")
    cols = t2[0][2:]
    assert cols == [f"ε (ε_Sel) = {s}" for s in ("3 (1)", "5 (1)", "8 (1)", "8 (2)", "8 (4)", "16 (4)")]
    rows = t2[2:]
    assert len(rows) == 4 * 2 + 2
    assert rows[0][:2] == ["balanced pool, paper mode", "Random"] and rows[1][:2] == ["", "Entropy"]
    assert rows[0][2] == _expected("random-nal", "balanced", "paper", 3.0, 0.0)
    assert rows[0][3] == MISSING  # no runs at ε = 5
    assert rows[0][5] == rows[0][4] == rows[0][6] == _expected("random-nal", "balanced", "paper", 8.0, 0.0)
    assert rows[1][4] == _expected("entropy-dp-sa", "balanced", "paper", 8.0, 1.0)
    assert rows[1][6] == _expected("entropy-dp-sa", "balanced", "paper", 8.0, 4.0)
    assert rows[-2][1] == "Random" and "[Schwethelm2025]" in rows[-2][0]
    assert rows[-2][2] == "57.73 ± 0.85" and rows[-2][4] == MISSING and rows[-1][7] == "71.93 ± 0.48"

    # Table II restricted to the configured settings (the config's table2_settings; a Fig. 5 sweep adds no column)
    active_tables(summary, tmp_path / "only", table2_settings=[[3, 1], [16, 4]], prefix="active_")
    only = _md_table(tmp_path / "only" / "active_table2.md")
    assert only[0][2:] == ["ε (ε_Sel) = 3 (1)", "ε (ε_Sel) = 16 (4)"]
    assert only[-1][-1] == "71.93 ± 0.48"

    # Table V
    t5 = _md_table(tmp_path / "out" / "table5.md")
    assert [r[0] for r in t5[2:]] == ["Continual learning", "Noise reduction", "Step amplification"]
    assert t5[2][1] == _expected("entropy-dp-cl", "balanced", "paper", 8.0, 2.0)
    assert [r[-1] for r in t5[2:]] == ["63.94 ± 0.98", "66.83 ± 0.72", "67.30 ± 0.82"]


def test_tables_skip_and_missing(tmp_path):
    # Random baselines only: Table I (with "–" for every AL row) and Table II; no Table V
    summary = _summary(
        tmp_path, {(8.0, 2.0): ["random-nal", "random-sa"]}, pools=("balanced",), modes=("sound",), seeds=(0,)
    )
    paths = active_tables(summary, tmp_path / "out")
    assert sorted(p.name for p in paths) == ["table1.csv", "table1.md", "table2.csv", "table2.md"]
    assert not (tmp_path / "out" / "table5.md").exists()
    t1 = _md_table(tmp_path / "out" / "table1.md")
    assert t1[0][3:4] == ["balanced pool, sound mode"] and len(t1[0]) == 6
    body = {r[0] + r[2]: r for r in t1[2:]}
    v = 100 * _acc("random-nal", "balanced", "sound", 8.0, 0.0, 0)
    assert body["Random✓"][3] == f"{v:.2f} (1)"  # one run: no sd
    assert body["Entropy✓"][3] == MISSING and body["Random Naive AL✓"][3] == MISSING
    assert body["Entropy✓"][4] == "67.30 ± 0.82"  # published columns are always there

    # nothing of any table: no files
    only = _summary(tmp_path, {(8.0, 2.0): ["margin-dp-naive"]})
    assert active_tables(only, tmp_path / "none") == []
    assert not (tmp_path / "none").exists()

    # Table V skipped without continual learning / noise reduction; explicit setting honoured
    sa_only = _summary(
        tmp_path, {(8.0, 2.0): ["entropy-dp-sa"], (5.0, 1.0): ["entropy-dp-sa", "entropy-dp-nr"]}
    )
    names = sorted(p.name for p in active_tables(sa_only, tmp_path / "sa5"))  # (5, 1): most runs in all
    assert "table5.md" in names
    names = sorted(p.name for p in active_tables(sa_only, tmp_path / "sa", setting=(8.0, 2.0)))
    assert "table5.md" not in names and "table1.md" in names
    assert "ε = 8, ε_Sel = 2" in (tmp_path / "sa" / "table1.md").read_text()
    assert "ε = 5, ε_Sel = 1" in (tmp_path / "sa5" / "table5.md").read_text()


def test_selection_epsilon_figure(tmp_path):
    summary = _summary(tmp_path, FULL)
    outs = selection_epsilon_figure(summary, tmp_path / "fig" / "fig5.png")
    assert [p.name for p in outs] == ["fig5.png", "fig5.pdf"]
    assert outs[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and outs[1].read_bytes()[:5] == b"%PDF-"
    assert all(p.stat().st_size > 1000 for p in outs)
    with pytest.raises(ValueError, match="no entropy-dp-sa"):
        selection_epsilon_figure(summary, tmp_path / "fig" / "none.png", epsilon=16.0)


@pytest.fixture(scope="module")
def schedule_files(tmp_path_factory):
    from dpcl.active.schedules import ALPlan, build_schedule

    plan = ALPlan(8.0, 1e-5, 2.0, 1000, (1000, 300, 100, 100), 256, 12)
    d = tmp_path_factory.mktemp("schedules")
    out = {}
    for name, kind in (("naive", "naive"), ("step amplification (ours)", "step_amplification")):
        path = d / f"{kind}.json"
        path.write_text(json.dumps(build_schedule(kind, plan, "rdp").to_dict()))
        out[name] = path
    return out


def test_group_epsilon_curves(schedule_files):
    from dpcl.active.schedules import Schedule

    naive = group_epsilon_curves(schedule_files["naive"])
    sched = Schedule.from_dict(json.loads(schedule_files["naive"].read_text()))
    assert [len(c) for c in naive] == [5, 4, 3, 2, 1]  # group g's curve starts at phase g
    assert [c[-1] for c in naive] == pytest.approx(sched.group_epsilons(), rel=1e-9)
    assert all(np.all(np.diff(c) > 0) for c in naive if len(c) > 1)
    assert naive[1][0] > sched.plan.paid(1) == pytest.approx(0.5)  # selection ε paid counted from joining
    sa = group_epsilon_curves(schedule_files["step amplification (ours)"])
    assert max(c[-1] for c in sa) <= 8.0 * (1 + 1e-6) and min(c[-1] for c in sa) > 7.9


def test_group_privacy_figure(tmp_path, schedule_files):
    outs = group_privacy_figure(schedule_files, tmp_path / "fig2.png")
    assert [p.name for p in outs] == ["fig2.png", "fig2.pdf"]
    assert outs[0].read_bytes()[:4] == b"\x89PNG" and outs[1].read_bytes()[:5] == b"%PDF-"
    assert all(p.stat().st_size > 1000 for p in outs)


def test_authors_schedule_table_shows_rdp_beside_pld_with_verdicts(tmp_path, monkeypatch):
    from dpcl.privacy import cache
    from dpcl.report.active_authors import AUTHORS_PLANS, authors_schedule_table

    small = {
        k: v for k, v in AUTHORS_PLANS.items() if v["initial_size"] == 1000
    }  # the 1,000 + [1,000, 300] plan
    monkeypatch.setenv(cache.ENV, str(tmp_path / "cache"))
    csv, md = authors_schedule_table(None, tmp_path, prefix="active_", plans=small)
    assert csv.name == "active_authors_schedule.csv" and md.name == "active_authors_schedule.md"
    # the plan's claim is in the accountant's disk cache: read back, the same table byte for byte
    entries = [json.loads(p.read_text()) for p in (tmp_path / "cache").rglob("*.json")]
    assert [e["function"] for e in entries].count("authors_plan_claim") == 1  # beside its PLD bounds
    again = authors_schedule_table(None, tmp_path / "again", prefix="active_", plans=small)
    assert [p.read_bytes() for p in again] == [csv.read_bytes(), md.read_bytes()]
    df = pd.read_csv(csv)
    assert list(df["group"]) == [0, 1, 2]
    assert (df["rdp_authors"] > df["pld_upper"]).all()  # PLD is the tighter upper bound
    assert list(df["training_verdict"]) == ["certified", "not_certified", "violated"]
    assert set(df["end_to_end_verdict"]) == {"not_certified"}
    text = md.read_text()
    assert "RDP (authors')" in text and "| violated |" in text and "add/remove one record of the pool" in text
