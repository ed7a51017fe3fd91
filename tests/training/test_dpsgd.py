"""DP-SGD for linear heads, the head learners and the aggregation rules."""

import math

import numpy as np
import pytest

from dpcl.learners.aggregation import aggregate
from dpcl.learners.peft import dpsgd_noise, run_head_learner
from dpcl.privacy.accounting import Budget, PrivacyBudgetExceeded
from dpcl.privacy.ledger import Ledger
from dpcl.privacy.sgd_accounting import epsilon as sgd_epsilon
from dpcl.training.clipped_sum import CLIP_MARGIN, HeadData, clip_factors, clipped_sum, logit_grads32
from dpcl.training.heads import DPSGDConfig, LinearHead, logit_grads, per_sample_grad_norms, train_head


def _toy(n=60, dim=7, k=4, seed=0):
    g = np.random.default_rng(seed)
    return g.normal(size=(n, dim)) * 3, g.integers(0, k, n), g.normal(size=(k, dim)), g.normal(size=k)


def test_closed_form_per_sample_norms_and_clipped_sum_match_opacus():
    torch = pytest.importorskip("torch")
    from opacus import GradSampleModule

    x, y, w, b = _toy()
    lin = torch.nn.Linear(x.shape[1], w.shape[0]).double()
    with torch.no_grad():
        lin.weight.copy_(torch.from_numpy(w))
        lin.bias.copy_(torch.from_numpy(b))
    gsm = GradSampleModule(lin, loss_reduction="sum")
    loss = torch.nn.functional.cross_entropy(gsm(torch.from_numpy(x)), torch.from_numpy(y), reduction="sum")
    loss.backward()
    gw = lin.weight.grad_sample.numpy()  # (n, k, dim)
    gb = lin.bias.grad_sample.numpy()  # (n, k)
    ref_norms = np.sqrt((gw**2).sum(axis=(1, 2)) + (gb**2).sum(axis=1))
    d = logit_grads(w, b, x, y, None)
    assert np.allclose(per_sample_grad_norms(x, d), ref_norms, rtol=1e-6, atol=1e-9)
    clip = 0.5 * np.median(ref_norms)
    c = np.minimum(1.0, clip / ref_norms)
    ref_sum_w = (gw * c[:, None, None]).sum(0)
    ours_w = (d * np.minimum(1.0, clip / per_sample_grad_norms(x, d))[:, None]).T @ x
    assert np.allclose(ours_w, ref_sum_w, rtol=1e-6, atol=1e-9)
    # the training kernel (float32 products, float64 norms, the clipping margin) against the same reference
    data = HeadData(x, y)
    d32 = logit_grads32(w, b, data.x, data.y, None)
    c32 = clip_factors(data.sq1, d32, clip)
    assert np.allclose(c32, np.minimum(1.0, clip * CLIP_MARGIN / ref_norms), rtol=1e-5)
    s_w, _, _ = clipped_sum(data, w, b, np.arange(len(y)), clip=clip, active=None)
    assert np.allclose(s_w, ref_sum_w, rtol=1e-4, atol=1e-5 * np.abs(ref_sum_w).max())


def test_no_sample_contributes_more_than_clip():
    x, y, w, b = _toy(n=200)
    d = logit_grads(w, b, x, y, None)
    clip = 0.3
    d_clipped = d * np.minimum(1.0, clip / per_sample_grad_norms(x, d))[:, None]
    # explicit per-sample gradients of the clipped contributions
    norms = np.sqrt(
        np.array([np.sum(np.outer(di, xi) ** 2) + np.sum(di**2) for di, xi in zip(d_clipped, x, strict=True)])
    )
    assert norms.max() <= clip * (1 + 1e-12)


def test_noise_multiplier_matches_accountant_and_ledger_checks_it():
    cfg = DPSGDConfig(sample_rate=0.2, epochs=10)
    rec = dpsgd_noise(1.0, 1e-5, cfg)
    assert rec["steps"] == 50 and rec["sample_rate"] == 0.2
    spent = sgd_epsilon(rec["noise_multiplier"], 0.2, 50, 1e-5)
    assert spent <= 1.0 and spent == pytest.approx(rec["epsilon"])
    assert sgd_epsilon(rec["noise_multiplier"] * 0.99, 0.2, 50, 1e-5) > 1.0 * 0.99  # not wastefully large
    ledger = Ledger(Budget(1.0, 1e-5))
    ledger.add(0, rec)
    assert ledger.holds()
    with pytest.raises(PrivacyBudgetExceeded, match="accountant"):
        ledger.add(1, {**rec, "noise_multiplier": rec["noise_multiplier"] / 2})


def test_empty_task_still_releases_a_noisy_head():
    cfg = DPSGDConfig(sample_rate=0.5, epochs=2)
    head = LinearHead(5, 3)
    info = train_head(head, np.zeros((0, 5)), np.zeros(0, dtype=int), cfg, 2.0, np.random.default_rng(0))
    assert info["steps"] == 4 and np.any(head.w != 0)  # noise-only steps: a proper, random classifier
    quiet = LinearHead(5, 3)
    train_head(quiet, np.zeros((0, 5)), np.zeros(0, dtype=int), cfg, 0.0, np.random.default_rng(0))
    assert np.all(quiet.w == 0)


def test_private_run_needs_finite_clip_and_nonprivate_head_learns():
    g = np.random.default_rng(1)
    centers = g.normal(size=(3, 8)) * 4
    y = g.integers(0, 3, 600)
    x = centers[y] + g.normal(size=(600, 8))
    with pytest.raises(ValueError, match="finite clipping"):
        train_head(LinearHead(8, 3), x, y, DPSGDConfig(clip=math.inf), 1.0, g)
    head = LinearHead(8, 3)
    train_head(head, x, y, DPSGDConfig(sample_rate=0.2, epochs=5, clip=math.inf, lr=0.05), 0.0, g)
    assert np.mean(head.logits(x).argmax(1) == y) > 0.95


def test_aggregation_rules_on_hand_made_logits():
    z1 = np.array([[5.0, 4.0], [0.0, 1.0]])  # member over labels [0, 1]
    z2 = np.array([[3.0, -3.0], [9.0, 8.9]])  # member over labels [2, 3]
    labels = [np.array([0, 1]), np.array([2, 3])]
    assert aggregate([z1, z2], labels, "argmax").tolist() == [0, 2]
    # median: z1 -> [.5, -.5], [-.5, .5]; z2 -> [3, -3], [.05, -.05]: member 2 wins row 0 by margin
    assert aggregate([z1, z2], labels, "median").tolist() == [2, 1]
    # entropy (SAFE, γ = 1): H(z1 row 0) = 0.582, H(z2 row 0) = 0.017 -> w = (0.362, 0.638); scores
    # 1.81, 1.45, 1.91, -1.91. Row 1: H = 0.582 vs 0.692 -> w = (0.527, 0.473); label 2 scores 4.26.
    assert aggregate([z1, z2], labels, "entropy").tolist() == [2, 2]
    assert aggregate([np.zeros((2, 0))], [np.zeros(0, dtype=int)]).tolist() == [-1, -1]
    assert aggregate([np.zeros((2, 0))], [np.zeros(0, dtype=int)], "entropy").tolist() == [-1, -1]
    with pytest.raises(ValueError, match="aggregation"):
        aggregate([z1], [labels[0]], "vote")


def test_entropy_rule_is_safes_weighted_sum_on_a_shared_label_space():
    g = np.random.default_rng(3)
    za, zb = g.normal(0, 2, (500, 4)), g.normal(0, 2, (500, 4))
    lab = np.array([7, 1, 4, 9])  # unsorted ids: the rule must map columns to labels
    h = [
        -(p * np.log(p + 1e-9)).sum(1)
        for p in (np.exp(z) / np.exp(z).sum(1, keepdims=True) for z in (za, zb))
    ]
    wa = np.exp(-h[0]) / (np.exp(-h[0]) + np.exp(-h[1]))
    expected = lab[(wa[:, None] * za + (1 - wa)[:, None] * zb).argmax(1)]
    assert np.array_equal(aggregate([za, zb], [lab, lab], "entropy"), expected)
    # γ → 0 gives equal weights: the plain sum of logits
    assert np.array_equal(aggregate([za, zb], [lab, lab], "entropy", gamma=0.0), lab[(za + zb).argmax(1)])


def _tasks(seed=0):
    g = np.random.default_rng(seed)
    centers = g.normal(size=(4, 6)) * 3
    ys = [np.repeat([0, 1], 40), np.repeat([2, 3], 40)]
    data = [(centers[y] + g.normal(size=(len(y), 6)), y) for y in ys]
    tests = [(centers[y] + g.normal(size=(len(y), 6)), y) for y in ys]
    return data, tests


@pytest.mark.parametrize("learner", ["peft_head", "naive_head", "noncl_head"])
def test_head_learners_deterministic_and_shaped(learner):
    data, tests = _tasks()
    cfg = DPSGDConfig(sample_rate=0.5, epochs=4)
    noise = dpsgd_noise(8.0, 1e-5, cfg)

    def run():
        return run_head_learner(
            learner,
            data,
            tests,
            [[0, 1], [2, 3]],
            4,
            cfg,
            noise=noise,
            rng_for=lambda t: np.random.default_rng([7, t]),
        )

    (p1, r1), (p2, _) = run(), run()
    assert len(p1) == 2 and len(r1) == 2
    for a, b in zip(p1[-1], p2[-1], strict=True):
        assert np.array_equal(a, b)
    assert all(r["mechanism"] == "dpsgd" for r in r1)
    if learner == "peft_head":  # every aggregation rule on the same members; the chosen one is p1
        by_rule: dict = {}
        p3, _ = run_head_learner(
            learner,
            data,
            tests,
            [[0, 1], [2, 3]],
            4,
            cfg,
            noise=noise,
            rng_for=lambda t: np.random.default_rng([7, t]),
            aggregation="median",
            by_rule=by_rule,
        )
        assert sorted(by_rule) == ["argmax", "entropy", "median"]
        for preds in by_rule.values():
            assert [len(row) for row in preds] == [1, 2]
        for a, b in zip(by_rule["argmax"][-1], p1[-1], strict=True):
            assert np.array_equal(a, b)
        for a, b in zip(by_rule["median"][-1], p3[-1], strict=True):
            assert np.array_equal(a, b)
    if learner == "noncl_head":
        assert p1[0] == [None]  # a non-CL model exists only after all data
    else:
        assert len(p1[0]) == 1 and len(p1[1]) == 2


def test_tuning_split_and_tuned_config():
    pytest.importorskip("optuna")
    from dpcl.training.tuning import LR_RANGE, split_tuning_set, tune_head

    y = np.repeat([3, 7], [50, 30])
    tr, va = split_tuning_set(y, 0)
    assert len(np.intersect1d(tr, va)) == 0 and len(tr) + len(va) == 80
    assert np.sum(y[tr] == 3) == 35 and np.sum(y[tr] == 7) == 21  # stratified 70:30
    g = np.random.default_rng(0)
    x = np.where(y[:, None] == 3, 2.0, -2.0) + g.normal(size=(80, 4))
    res = tune_head(x, y, 8.0, 1e-5, seed=1, n_trials=4, epochs=2)
    assert len(res["trials"]) == 4 and res["tuning_set"]["classes"] == [3, 7]
    cfg = res["best"]  # as tuned: scaling to a run is dpcl.training.tuning_protocol's
    assert 10 / 56 <= cfg["sample_rate"] <= 1.0
    assert LR_RANGE[0] <= cfg["lr"] <= LR_RANGE[1] and cfg["lr"] == res["best_params"]["lr"]
    assert res == tune_head(x, y, 8.0, 1e-5, seed=1, n_trials=4, epochs=2)  # deterministic per seed


def test_an_interrupted_search_resumes_to_the_uninterrupted_result(tmp_path):
    """Finished trials persist in an Optuna journal; a retried job (after an
    error or a kill mid-trial) continues after them and ends with the result of one unbroken search."""
    pytest.importorskip("optuna")
    import optuna

    from dpcl.training.heads import LinearHead, train_head
    from dpcl.training.tuning import checkpoints, tune_dpsgd

    y = np.repeat([3, 7], [50, 30])
    g = np.random.default_rng(0)
    x = np.where(y[:, None] == 3, 0.3, -0.3) + g.normal(size=(80, 4))  # hard enough that trials differ
    calls = []

    def train_and_score(tr, va, yy, n_classes, cfg, sigma, gen, checkpoint, fail_at=None):
        calls.append(cfg.lr)
        if fail_at is not None and len(calls) == fail_at:
            raise RuntimeError("node lost")
        head = LinearHead(x.shape[1], n_classes)

        def score():
            return float(np.mean(head.logits(x[va]).argmax(1) == yy[va]))

        train_head(head, x[tr], yy[tr], cfg, sigma, gen, after_step=checkpoints(cfg.steps, score, checkpoint))
        return score()

    kw = {"n_trials": 9, "epochs": 2, "prune": True}
    whole = tune_dpsgd(y, 4.0, 1e-5, 3, train_and_score, **kw)
    assert any(t["stopped_at_percent"] is not None for t in whole["trials"])  # the journal keeps those too
    journal = tmp_path / "eps4.json.optuna-journal"
    calls.clear()
    with pytest.raises(RuntimeError, match="node lost"):
        tune_dpsgd(
            y, 4.0, 1e-5, 3, lambda *a, **k: train_and_score(*a, **k, fail_at=8), **kw, journal=journal
        )
    assert journal.is_file() and len(calls) == 8
    # a kill mid-trial leaves it RUNNING in the journal: it is redone, not counted
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(journal)))
    study = optuna.load_study(study_name="dpcl", storage=storage)
    study.ask()
    calls.clear()
    resumed = tune_dpsgd(y, 4.0, 1e-5, 3, train_and_score, **kw, journal=journal)
    assert len(calls) == 2 and resumed == whole and not journal.exists()  # trials 8-9 only, then removed
    other = tmp_path / "other.optuna-journal"  # a journal of another search is not resumed
    calls.clear()
    with pytest.raises(RuntimeError):
        tune_dpsgd(y, 8.0, 1e-5, 3, lambda *a, **k: train_and_score(*a, **k, fail_at=2), **kw, journal=other)
    calls.clear()
    assert tune_dpsgd(y, 4.0, 1e-5, 3, train_and_score, **kw, journal=other) == whole and len(calls) == 9


def test_trials_below_the_earlier_median_stop_at_that_checkpoint():
    """The median rule on the validation curve: after PRUNE_STARTUP_TRIALS finished trials, a trial whose
    accuracy at a checkpoint is below the median of the earlier trials' accuracies there stops, scored
    by that accuracy (a finished trial, so that the GP sampler learns from it); the others run to the
    end. The expected stops are recomputed here from the reported curves."""
    pytest.importorskip("optuna")
    from dpcl.training.tuning import PRUNE_AT, PRUNE_STARTUP_TRIALS, tune_dpsgd

    y = np.repeat([0, 1], 40)
    levels = []

    def train_and_score(tr, va, yy, n_classes, cfg, sigma, gen, checkpoint):
        level = float(np.log(cfg.lr / 1e-7) / np.log(1e5))  # in [0, 1], monotone in lr
        levels.append(level)
        for f in PRUNE_AT:
            checkpoint(round(100 * f), level * f)  # an increasing validation curve
        return level

    res = tune_dpsgd(y, float("inf"), 1e-5, 0, train_and_score, n_trials=14, epochs=4, prune=True)
    reported = []  # per trial: percent -> accuracy it reported
    for k, (trial, level) in enumerate(zip(res["trials"], levels, strict=True)):
        rep, stop = {}, None
        for f in PRUNE_AT:
            rep[round(100 * f)] = level * f
            earlier = [r[round(100 * f)] for r in reported if round(100 * f) in r]
            if k >= PRUNE_STARTUP_TRIALS and level * f < np.median(earlier):
                stop = round(100 * f)
                break
        reported.append(rep)
        assert trial["stopped_at_percent"] == stop, k
        assert trial["accuracy"] == (level if stop is None else rep[stop])
    assert 1 <= sum(t["stopped_at_percent"] is not None for t in res["trials"]) < 14 - PRUNE_STARTUP_TRIALS
    assert res["pruner"].startswith("median rule")
    levels.clear()  # without pruning (DP-A-GEM's and FiLM's studies) every trial runs to the end
    whole = tune_dpsgd(y, float("inf"), 1e-5, 0, train_and_score, n_trials=14, epochs=4)
    assert whole["pruner"] is None
    assert [t["accuracy"] for t in whole["trials"]] == levels and not any(
        t["stopped_at_percent"] for t in whole["trials"]
    )


def test_checkpoints_fall_at_the_fractions_of_a_trials_steps():
    from dpcl.training.tuning import PRUNE_AT, checkpoints

    for total in (40, 7, 1):
        seen, step_now = [], [0]

        def checkpoint(percent, acc, seen=seen, step_now=step_now):
            seen.append((step_now[0], percent, acc))

        after = checkpoints(total, lambda: 0.5, checkpoint)
        for step in range(1, total + 1):
            step_now[0] = step
            after(step)
        want = {max(1, round(f * total)): round(100 * f) for f in PRUNE_AT}
        assert [(s, p) for s, p, _ in seen] == sorted(want.items()) and all(a == 0.5 for *_, a in seen)
    assert [(s, p) for s, p, _ in seen] == [(1, 75)]  # one step: a single checkpoint


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_median_rows_is_numpys_median_bit_for_bit(dtype):
    """The ensemble's per-row median (one partition index instead of NumPy's three) returns
    np.median's values bit for bit: odd and even widths, ties, signed zeros, NaN rows."""
    from dpcl.learners.aggregation import median_rows

    rng = np.random.default_rng(11)
    for m in (1, 2, 3, 4, 5, 10, 11, 1000, 1001):
        for trial in range(12):
            a = rng.normal(size=(6, m)).astype(dtype)
            if trial % 3 == 1:
                a = np.round(a)  # ties
            if trial % 4 == 2:
                a[1, rng.integers(m)] = np.nan
            if trial % 5 == 3:
                a[2] = 0.0
                a[2, ::2] = -0.0
            want = np.median(a, axis=1, keepdims=True)
            got = median_rows(a.copy(), nan_rows=np.isnan(a).any(axis=1))
            assert got.dtype == want.dtype and got.shape == want.shape
            assert np.array_equal(got, want, equal_nan=True)
            assert np.array_equal(np.signbit(got), np.signbit(want))


def test_incremental_ensemble_votes_equal_aggregating_all_members_so_far():
    """EnsembleVotes (each member's logits processed once) predicts what aggregate() over members
    0..t does after every t, for every rule, with empty, overlapping and disjoint label spaces, whatever
    the blocks of rows it works through (from one row at a time to all at once)."""
    from dpcl.learners.aggregation import RULES, EnsembleVotes

    rng = np.random.default_rng(7)
    for _ in range(60):
        n, m = int(rng.integers(1, 9)), int(rng.integers(1, 6))
        votes, zs, labs = EnsembleVotes(n, block=int(rng.integers(1, 60))), [], []
        assert (votes.predict("entropy") == -1).all() and (votes.predict("argmax") == -1).all()
        for _k in range(m):
            lab = np.sort(rng.choice(20, int(rng.integers(0, 8)), replace=False))
            z = rng.normal(size=(n, lab.size)) * rng.uniform(0.1, 5)
            z = z.astype(np.float32) if rng.random() < 0.5 else z  # the models' logits are float32
            zs.append(z)
            labs.append(lab)
            votes.add(z, lab)
            for rule in RULES:
                assert (votes.predict(rule) == aggregate(zs, labs, rule)).all(), rule
    with pytest.raises(ValueError, match="do not fit"):
        EnsembleVotes(3).add(np.zeros((2, 4)), np.arange(4))


def test_ensemble_votes_in_blocks_of_rows_hold_the_same_values_bit_for_bit():
    """A member's logits worked through in blocks of rows (one row at a time, a few, all at once) leave
    the same best scores, labels and union-wide entropy scores, bit for bit, with a public label space
    repeated every task, growing release-style spaces and a space with a repeated label."""
    from dpcl.learners.aggregation import EnsembleVotes

    rng = np.random.default_rng(11)
    n = 37
    spaces = [np.arange(300), np.arange(300), np.sort(rng.choice(1000, 250, replace=False))]
    spaces += [np.sort(rng.choice(1000, 120, replace=False)), np.array([5, 5, 9, 700])]
    members = [
        (rng.normal(size=(n, lab.size)) * 3).astype((np.float32, np.float64)[i % 2])
        for i, lab in enumerate(spaces)
    ]
    states = []
    for block in (1, 300 * 5, 10**9):  # 1: one row per block; 1,500: five rows of the 300-label spaces
        votes = EnsembleVotes(n, block=block)
        for z, lab in zip(members, spaces, strict=True):
            votes.add(z, lab)
        states.append((votes._score, votes._union, votes._best, votes._pred))
    for score, union, best, pred in states[1:]:
        assert np.array_equal(score, states[0][0]) and np.array_equal(union, states[0][1])
        for rule in ("argmax", "median"):
            assert np.array_equal(best[rule], states[0][2][rule]) and np.array_equal(
                pred[rule], states[0][3][rule]
            )
