"""The exposure check (dpcl.audits.exposure, dpcl.stages.exposure): every release reported by the mechanism
primitives (dpcl.privacy.releases), every record's reads counted against its run's own ledger.

Correct learners are not refuted; the bug classes an audit that only looks where the ledger says the
code reads cannot see are refuted outright (exact counts at rate 1): a whole task in DP-A-GEM's buffer,
one extra release per task, one buffer reread too many. A learner that draws its own noise is not
auditable, and the documented example of a user's learner, which releases through the library's
primitive, is audited with no audit code of its own. The broken copies live here only: each is the
learner's own function with one line changed, by source, so that the rest is the code the pipeline runs.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from helpers import broken_copy

from dpcl.audits.exposure import RecordIndex, check_exposure
from dpcl.learners import registry
from dpcl.privacy import releases
from dpcl.privacy.releases import Release, Sample
from dpcl.stages.exposure import exposure_rows

DELTA = 1e-5
EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "my_learner.py"


def _rows(learner: str, setting=None) -> dict[str, dict]:
    """The learner's rows at ε = 1, by kind: "exposure" and "post-processing"."""
    rows = exposure_rows([1.0], DELTA, seed=0, learners=[learner], setting=setting)
    return {r["mechanism"].rsplit("(", 1)[1].rstrip(")"): r for r in rows}


def _row(learner: str, setting=None) -> dict:
    return _rows(learner, setting)["exposure"]


def _broken(module, function: str, monkeypatch, *changes: tuple[str, str]) -> None:
    """Replace ``module.function`` by its broken copy (:func:`helpers.broken_copy`)."""
    monkeypatch.setattr(module, function, broken_copy(module, function, *changes))


def test_every_learner_is_not_refuted_or_marked_as_published():
    rows = exposure_rows([1.0], DELTA, seed=0)
    by = {r["learner"]: r for r in rows if r["mechanism"].endswith("(exposure)")}
    post = {r["learner"]: r for r in rows if r["mechanism"].endswith("(post-processing)")}
    assert set(post) == set(by)
    assert set(by) == set(registry.names())  # a row per registered learner, none skipped
    for name, row in by.items():
        spec = registry.get(name)
        if not spec.dp:
            assert row["verdict"].startswith("not auditable: a method reproduced as published"), name
        else:
            assert row["verdict"] == "not refuted", (name, row["setting"])
            assert post[name]["verdict"] == "not refuted", (name, post[name]["setting"])
    # the learners that sample run at the pipeline's rates (the default dpsgd block's q = 0.25): their
    # samples are checked exactly and their reads binomially
    for name in ("peft_head", "naive_head", "noncl_head", "agem_head", "desai_head"):
        assert "q = 0.25, 40 epochs" in by[name]["setting"] and "samples exact" in by[name]["setting"]
    # the learners on images read each record as its own image, through train_film's primitive
    for name in ("peft_film", "naive_film", "noncl_film", "agem_film"):
        assert "each an image of its own" in by[name]["setting"] and "records read" in by[name]["setting"]
        assert "q = 0.25" in by[name]["setting"]


def test_the_whole_task_in_the_film_buffer_is_refuted(monkeypatch):
    """FiLM DP-A-GEM's buffer of raw images filled from the whole task: the FiLM learners are run on
    images by the same harness, so the unaccounted rereads of train-part records are counted."""
    import dpcl.learners.agem_film as agem_film

    _broken(
        agem_film,
        "run_agem_film",
        monkeypatch,
        ("buf_x.append(x[keep & ref])", "buf_x.append(x[keep])"),
        (
            "buf_y.append(np.asarray(y[keep & ref], dtype=np.int64))",
            "buf_y.append(np.asarray(y[keep], dtype=np.int64))",
        ),
    )
    row = _row("agem_film")
    assert row["verdict"] == "refuted", row["setting"]
    assert "read or sampled more than the ledger accounts" in row["setting"]


def test_one_extra_film_step_is_refuted(monkeypatch):
    """A FiLM member trained one step more than its ledger states (the PEFT ensemble's train_film)."""
    import dpcl.training.film as film

    _broken(film, "train_film", monkeypatch, ("range(cfg.steps)", "range(cfg.steps + 1)"))
    row = _row("peft_film")
    assert row["verdict"] == "refuted", row["setting"]


def test_the_whole_task_in_the_buffer_is_refuted(monkeypatch):
    """DP-A-GEM's buffer filled from the whole task (x[keep] for x[keep & ref]): every train-part record
    is also reread by later tasks' buffer releases, which no part of its task accounts for."""
    import dpcl.learners.agem as agem

    _broken(agem, "run_agem_head", monkeypatch, ("x[keep & ref]", "x[keep]"), ("y[keep & ref]", "y[keep]"))
    row = _row("agem_head")
    assert row["verdict"] == "refuted", row["setting"]
    assert "read or sampled more than the ledger accounts" in row["setting"]


def test_one_extra_release_per_task_is_refuted(monkeypatch):
    """A head learner that makes one more noisy gradient sum per task than its ledger states."""
    import dpcl.training.heads as heads

    _broken(heads, "train_head", monkeypatch, ("range(1, n_steps + 1)", "range(1, n_steps + 2)"))
    import dpcl.learners.peft as peft

    monkeypatch.setattr(peft, "train_head", heads.train_head)
    assert _row("peft_head")["verdict"] == "refuted"


def test_one_buffer_reread_too_many_is_refuted(monkeypatch):
    """DP-A-GEM drawing g_ref twice a step (the second release discarded): √2 the claimed μ for the buffer."""
    import dpcl.learners.agem as agem

    old = "            r_w, r_b, _ = _noisy_clipped_sum(head, buf, q_ref, cfg.clip, sigma_ref, gen_ref, active, out=ref)\n"
    _broken(agem, "train_agem_task", monkeypatch, (old, old + old.replace("out=ref", "out=None")))
    assert _row("agem_head")["verdict"] == "refuted"


def test_the_documented_example_is_audited_without_audit_code(user_learners):
    user_learners([str(EXAMPLE)])
    spec = registry.get("my_sums")
    assert spec.audit is None and spec.whitebox is None  # no audit code of its own
    row = _row("my_sums")
    assert row["verdict"] == "not refuted", row["setting"]
    assert "3 releases, 0 samples, 60 records read" in row["setting"]


def test_a_learner_drawing_its_own_noise_is_not_auditable(user_learners, tmp_path):
    """The example as it was: the same release, its noise drawn by the learner, not the primitive."""
    src = EXAMPLE.read_text()
    old = (
        "        labels, released = noisy_class_sums(\n"
        '            task.x, task.y, task.label_space, sigma, inputs.rng_for(t, "gaussian"), dim=dim\n'
        "        )\n"
        "        sums[labels] += released\n"
    )
    assert old in src
    own = (
        "        labels = np.asarray(sorted(task.label_space), dtype=np.int64)\n"
        "        sums[labels] += inputs.rng_for(t, 'gaussian').standard_normal((len(labels), dim)) * sigma\n"
        "        np.add.at(sums, task.y, task.x / np.linalg.norm(task.x, axis=1, keepdims=True))\n"
    )
    path = tmp_path / "own_noise.py"
    path.write_text(
        src.replace(old, own)
        .replace('name="my_sums"', 'name="own_noise"')
        .replace('module="my_learner"', 'module="own_noise"')
    )
    user_learners([str(path)])
    assert _row("own_noise")["verdict"] == "not auditable: releases outside the mechanism primitives"


# ----------------------------------------------------------------------------- the count itself


def _ledger(entries: list[dict]) -> dict:
    return {"private": True, "tasks": [{"task": 0, "mechanisms": entries}]}


def _release(rows: np.ndarray, sigma: float) -> Release:
    return Release(mechanism="clipped_gradient_sum", rows=rows, sensitivity=1.0, noise_scale=sigma)


def test_reads_at_rate_one_are_counted_exactly_per_part():
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    index = RecordIndex()
    index.add(x, np.arange(4), 0)
    ledger = _ledger(
        [
            {"mechanism": "dpsgd", "part": "train", "noise_multiplier": 2.0, "sample_rate": 1.0, "steps": 2},
            {
                "mechanism": "dpsgd_buffer",
                "part": "reference",
                "noise_multiplier": 5.0,
                "sample_rate": 1.0,
                "steps": 1,
            },
        ]
    )
    ok = [_release(x[:2], 2.0), _release(x[:2], 2.0), _release(x[2:], 5.0)]
    assert check_exposure(ok, ledger, index).verdict == "not refuted"
    # a third read at σ = 2, and a record read by both parts' releases
    for extra in ([_release(x[:1], 2.0)], [_release(x[:1], 5.0)]):
        res = check_exposure(ok + extra, ledger, index)
        assert res.verdict == "refuted" and res.unaccounted[0]["record"] == 0
    # a release at a σ no entry states, even a larger one (a false statement on the safe side)
    assert check_exposure(ok + [_release(x[3:], 9.0)], ledger, index).verdict == "refuted"
    # rows that are no record of the run
    foreign = check_exposure(ok + [_release(x[:1] + 0.5, 2.0)], ledger, index)
    assert foreign.verdict.startswith("not auditable") and foreign.unattributed_rows == 1


def test_reads_below_rate_one_are_tested_against_their_binomial():
    """At q = 0.1 over 100 steps a record is read Binomial(100, 0.1) times: 10 ± 3; 30 reads refute the
    claim (upper tail ~1e-8, far below α / records), the 90th percentile of a correct run does not."""
    from scipy.stats import binom

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    index = RecordIndex()
    index.add(x, np.arange(2), 0)
    ledger = _ledger([{"mechanism": "dpsgd", "noise_multiplier": 1.5, "sample_rate": 0.1, "steps": 100}])
    samples = [Sample(mechanism="poisson", rows=x, rate=0.1, drawn=np.arange(2))] * 100
    typical = int(binom.ppf(0.9, 100, 0.1))
    res = check_exposure([_release(x, 1.5)] * typical, ledger, index, samples=samples)
    assert res.verdict == "not refuted" and not res.exact
    assert check_exposure([_release(x, 1.5)] * 30, ledger, index, samples=samples).verdict == "refuted"
    # a read at q < 1 must come from a sample: none drawn, none may be read
    assert check_exposure([_release(x, 1.5)], ledger, index).verdict == "refuted"


def test_samples_are_checked_exactly_and_a_task_total_binomially():
    """Every sample's stated rate must be an entry's, at most its steps; and a sampler that states q and
    draws 2q shows in the task's total: 20 records x 8 samples at q = 0.25 give 40 reads in expectation
    (a per-record count of at most 8 reads says little), 80 refute the claim."""
    x = np.arange(60, dtype=np.float32).reshape(20, 3)
    index = RecordIndex()
    index.add(x, np.arange(20), 0)
    ledger = _ledger([{"mechanism": "dpsgd", "noise_multiplier": 1.5, "sample_rate": 0.25, "steps": 8}])
    at = lambda q, k=8: [Sample(mechanism="poisson", rows=x, rate=q, drawn=np.arange(0)) for _ in range(k)]  # noqa: E731
    gen = np.random.default_rng(0)

    def reads(q):  # 8 steps of a release of each record drawn at rate q
        return [_release(x[gen.random(20) < q], 1.5) for _ in range(8)]

    assert check_exposure(reads(0.25), ledger, index, samples=at(0.25)).verdict == "not refuted"
    assert check_exposure(reads(0.25), ledger, index, samples=at(0.5)).verdict == "refuted"  # rate stated
    assert (
        check_exposure(reads(0.25), ledger, index, samples=at(0.25, 9)).verdict == "refuted"
    )  # one too many
    res = check_exposure(reads(0.5), ledger, index, samples=at(0.25))  # drawn at 2q, stated q
    assert res.verdict == "refuted" and res.unaccounted[-1]["record"] == "all"


def test_the_primitives_report_only_inside_a_recording():
    from dpcl.training.clipped_sum import HeadData, noisy_clipped_sum
    from dpcl.training.heads import LinearHead

    x, y = np.eye(3, dtype=np.float32), np.array([0, 1, 2])
    head = LinearHead(3, 3)
    args = {"rate": 1.0, "clip": 1.0, "sigma": 0.0, "gen": np.random.default_rng(0)}
    assert not releases.listening()
    noisy_clipped_sum(HeadData(x, y), head.w, head.b, **args)  # nothing listens, nothing kept
    with releases.recording(keep_values=True) as rec:
        g_w, g_b, batch, _ = noisy_clipped_sum(HeadData(x, y), head.w, head.b, **args)
    (r,) = rec.releases
    assert np.array_equal(r.rows, x) and r.sensitivity == 1.0 and r.noise_scale == 0.0
    # at σ = 0 a one-record release is that record's clipped gradient: the projection of its weight block
    # is that block's norm²
    with releases.recording(keep_values=True) as rec:
        noisy_clipped_sum(HeadData(x[:1], y[:1]), head.w, head.b, **args)
    dots, norms = rec.releases[0].attribute(x[:1], y[:1])
    assert dots[0] == pytest.approx(norms[0] ** 2, rel=1e-6) and 0 < norms[0] <= 1.0
    dots, norms = r.attribute(x, y)  # three records, the head at zero: the same norm each
    assert np.allclose(norms, norms[0])
    assert math.isinf(Release(mechanism="m", rows=x, sensitivity=0.0, noise_scale=1.0).noise_multiplier)


# ----------------------------------------------------------------------------- DP active learning


def test_dp_active_learning_groups_are_not_refuted():
    from dpcl.stages.exposure import active_exposure_rows

    rows = active_exposure_rows(seed=0)
    assert [r["mechanism"] for r in rows] == [
        f"DP active learning, group {g} (exposure)" for g in ("0", "1", "2", "unselected")
    ] + ["DP active learning (post-processing)"]
    assert all(r["verdict"] == "not refuted" for r in rows), [r["setting"] for r in rows]


def test_dp_active_learning_trained_at_the_wrong_groups_rate_is_refuted(monkeypatch):
    """Every labelled record sampled at the largest rate of its segment (the last group's, step
    amplification's highest) instead of its own group's: each record's reads stay plausible, the group
    0 total (about 1.5 times its Binomial mean) does not."""
    import dpcl.active.run as run_mod
    from dpcl.stages.exposure import active_exposure_rows

    _broken(
        run_mod,
        "run_active",
        monkeypatch,
        ("rates = np.asarray(seg.rates)[groups[lab]]", "rates = np.full(len(lab), max(seg.rates))"),
    )
    by = {r["mechanism"]: r for r in active_exposure_rows(seed=0)}
    assert by["DP active learning, group 0 (exposure)"]["verdict"] == "refuted"


def test_the_audit_table_has_an_exposure_row_per_learner_and_per_group(tmp_path):
    from dpcl.stages.privacy import audit_part, audit_parts, privacy_audit

    cfg = {
        "epsilons": [1.0],
        "trials": 1000,
        "learner_trials": 0,
        "whitebox_runs": 0,
        "canary_runs": 4,
        "canary_count": 100,
        "seed": 0,
    }
    names = audit_parts(cfg)
    assert names == ["mechanisms", "exposure", "exposure-active", "canaries"]
    parts = {name: tmp_path / f"{name}.json" for name in names}
    for name in names:
        audit_part(cfg, DELTA, name, parts[name])
    privacy_audit(
        cfg, DELTA, tmp_path / "a.csv", tmp_path / "a.md", parts=parts, out_figures=[tmp_path / "a.png"]
    )
    md = (tmp_path / "a.md").read_text()
    for spec in registry.specs():
        line = next(line for line in md.splitlines() if line.startswith(f"| {spec.display} (exposure) | 1 |"))
        assert "| 1 | — | — | — |" in line  # no bound on ε or μ, no trials: a count
        line = next(line for line in md.splitlines() if line.startswith(f"| {spec.display} (canaries) | 1 |"))
        # (a user's learner registered by another test of this process is the documented example, whose
        # class sums are the primitive's: audited like the built-ins on cached features)
        # every learner but L2DP-ML as published (no DP claim): FiLM's and FM-A-GEM's canaries included
        assert ("not refuted (add/remove)" in line) == spec.dp, line
        assert ("not auditable" in line) == (not spec.dp), line
    for g in ("0", "1", "2", "unselected"):
        assert f"| DP active learning, group {g} (exposure) | 8 |" in md
    assert "certified" not in md.replace("not certified", "")
    assert "label release through the budget split (release-f0.1)" in md


def test_an_attribution_is_computed_at_the_state_of_its_release():
    """The learners reuse and update the arrays they hand the primitive (DP-A-GEM's mask of active outputs
    grows with every task, the head moves): a release's attribution keeps their values at the release."""
    from dpcl.training.clipped_sum import HeadData, noisy_clipped_sum
    from dpcl.training.heads import LinearHead

    x, y = np.eye(4, dtype=np.float32)[:2] * 3, np.array([0, 1])
    head, active = LinearHead(4, 4), np.array([True, True, False, False])
    args = {"rate": 1.0, "clip": 1.0, "sigma": 1.0, "gen": np.random.default_rng(0), "active": active}
    with releases.recording(keep_values=True) as rec:
        noisy_clipped_sum(HeadData(x, y), head.w, head.b, **args)
    before = rec.releases[0].attribute(x, y)
    active[:] = True
    head.w[:] = 1.0
    after = rec.releases[0].attribute(x, y)
    assert np.array_equal(before[0], after[0]) and np.array_equal(before[1], after[1])
