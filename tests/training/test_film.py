"""FiLM PEFT members trained with DP-SGD on images ([LabelSpace] Alg. 2, App. D, D.1).

A tiny random-init timm ViT (32 px, patch 8, depth 2) on CPU; images are written as idx
files (the on-disk format of the image datasets) and read back.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn as nn
from film_helpers import DEPTH, DIM, PRE, SIZE, colour_images, film_state

from dpcl.features import preprocess_batch
from dpcl.learners.peft import dpsgd_noise, run_film_learner
from dpcl.privacy.accounting import Budget
from dpcl.privacy.ledger import Ledger, split_public
from dpcl.privacy.sgd_accounting import SIGMA_RTOL
from dpcl.privacy.sgd_accounting import epsilon as sgd_epsilon
from dpcl.seeding import rng
from dpcl.training.clipped_sum import CLIP_MARGIN
from dpcl.training.film import clipped_grad_sum, gaussian_noise_like, train_film
from dpcl.training.film_inference import film_logits
from dpcl.training.film_member import FilmMember, film_net, pretrained_member
from dpcl.training.film_model import film_parameter_count, film_parameter_names
from dpcl.training.heads import DPSGDConfig

timm = pytest.importorskip("timm")


def random_head_member(vit, n_out: int, seed: int) -> FilmMember:
    """Pre-trained FiLM values with a random (non-zero) head, so FiLM gradients are non-zero."""
    m = pretrained_member(vit, n_out)
    g = torch.Generator().manual_seed(seed)
    return FilmMember(
        m.film, torch.randn(m.weight.shape, generator=g), torch.randn(m.bias.shape, generator=g)
    )


# ----------------------------------------------------------------------------- parameter selection


def test_vit_base_film_parameter_count_is_38400():
    """App. D: 25 LayerNorms × 2 × 768 = 38,400 FiLM parameters for ViT-B/16 (meta device: no memory)."""
    with torch.device("meta"):
        model = timm.create_model("vit_base_patch16_224", pretrained=False, num_classes=0)
    names = film_parameter_names(model)
    assert film_parameter_count(model) == 38_400 == 25 * 2 * 768
    assert len(names) == 50 and all(n.endswith((".weight", ".bias")) for n in names)
    n_out = 100  # e.g. CIFAR-100 Base Dataset: 38,400 + 76,900 = 115,300 (App. D)
    assert film_parameter_count(model) + model.num_features * n_out + n_out == 115_300


def test_tiny_vit_film_selection_is_exactly_layernorm_affine_plus_head(vit):
    names = film_parameter_names(vit)
    expected = {
        f"{mod}.{p}"
        for mod, m in vit.named_modules()
        if isinstance(m, nn.LayerNorm)
        for p in ("weight", "bias")
    }
    assert set(names) == expected and len(names) == len(expected)
    assert len(names) == (2 * DEPTH + 1) * 2  # norm1, norm2 per block + the final norm
    assert film_parameter_count(vit) == (2 * DEPTH + 1) * 2 * DIM
    before_flags = {n: p.requires_grad for n, p in vit.named_parameters()}
    before = film_state(vit)
    member = random_head_member(vit, 3, seed=1)
    member.film = {k: v + 1.0 for k, v in member.film.items()}
    with film_net(vit, member, device="cpu", trainable=True) as net:
        trainable = {n for n, p in net.named_parameters() if p.requires_grad}
        assert trainable == {f"backbone.{n}" for n in names} | {"head.weight", "head.bias"}
        assert sum(p.numel() for p in net.parameters() if p.requires_grad) == member.n_parameters()
        assert member.n_parameters() == film_parameter_count(vit) + DIM * 3 + 3
        assert torch.equal(dict(vit.named_parameters())[names[0]], before[names[0]] + 1.0)  # swapped in
    # the shared backbone is restored: values and flags
    assert all(torch.equal(v, film_state(vit)[k]) for k, v in before.items())
    assert {n: p.requires_grad for n, p in vit.named_parameters()} == before_flags


# ----------------------------------------------------------------------------- per-sample clipping


@pytest.mark.parametrize("fused,masked", [(True, False), (False, False), (True, True)])
def test_per_sample_clipping_matches_manual_per_sample_gradients(vit, fused, masked, tmp_path):
    """opacus hooks mode on the FiLM parameters (with and without timm's fused attention) and the
    head's closed-form (ghost) norms and clipped sum, with and without a masked softmax (Naive),
    vs one plain backward per sample."""
    from opacus import GradSampleModule

    x_u8, y = colour_images(6, 3, seed=2, tmp_path=tmp_path, name="clip")
    x = preprocess_batch(x_u8, PRE)
    yt = torch.as_tensor(y)
    member = random_head_member(vit, 4 if masked else 3, seed=3)
    active = torch.tensor([True, True, True, False]) if masked else None  # output 3: an earlier task's
    attn = [m for m in vit.modules() if hasattr(m, "fused_attn")]
    assert attn, "timm ViT attention modules expose fused_attn"
    old = [m.fused_attn for m in attn]
    try:
        for m in attn:
            m.fused_attn = fused
        with film_net(vit, member, device="cpu", trainable=True) as net:
            net.train()
            params = [p for p in net.parameters() if p.requires_grad]
            manual = []
            for i in range(len(y)):  # reference: plain autograd, one sample at a time
                logits = net(x[i : i + 1])
                if masked:
                    logits = logits.masked_fill(~active, -math.inf)
                loss = nn.functional.cross_entropy(logits, yt[i : i + 1], reduction="sum")
                manual.append(torch.cat([g.flatten() for g in torch.autograd.grad(loss, params)]))
            manual = torch.stack(manual)
            ref_norms = manual.norm(dim=1)
            clip = float(ref_norms.median())  # clips about half of the samples
            gsm = GradSampleModule(
                net.backbone, batch_first=True, loss_reduction="sum", force_functorch=False
            )
            try:
                assert params[-2] is net.head.weight and params[-1] is net.head.bias
                sums, norms = clipped_grad_sum(gsm, net.head, params, x, yt, clip=clip, active=active)
            finally:
                gsm.cleanup()
    finally:
        for m, f in zip(attn, old, strict=True):
            m.fused_attn = f
    torch.testing.assert_close(norms, ref_norms, rtol=1e-4, atol=1e-6)
    factors = torch.clamp(clip * CLIP_MARGIN / ref_norms, max=1.0)
    contributions = manual * factors[:, None]
    assert bool((contributions.norm(dim=1) <= clip * (1 + 1e-5)).all())  # no sample exceeds C
    assert int((ref_norms > clip).sum()) >= 1 and int((ref_norms < clip).sum()) >= 1
    got = torch.cat([s.flatten() for s in sums])
    # each summand agrees to the norms' relative 1e-4 (batched against one-sample float32 passes), so a
    # coordinate of the sum agrees to 1e-4 of the sum of its summands' magnitudes: a coordinate where
    # the samples cancel keeps the summands' absolute error, not a relative error of its small sum
    err = (got - contributions.sum(dim=0)).abs()
    bound = 1e-4 * contributions.abs().sum(dim=0) + 1e-7
    assert bool((err <= bound).all()), f"worst excess {float((err - bound).max()):.3g}"


def test_a_release_attributes_the_recorded_canaries_at_its_own_state(vit, tmp_path):
    """A recording that carries canaries gets, from every FiLM release that read one, the head-weight block
    of each canary's clipped gradient at the model the release was computed at (the factor from the joint
    norm over FiLM and head), projected on the release: one plain backward per canary at the initial
    model is the reference for the first step's release. Its values do not move when the model does
    (the second step), and a release that read no canary attributes none."""
    from dpcl.privacy import releases

    x, y = colour_images(8, 3, seed=4, tmp_path=tmp_path, name="attr")
    init = random_head_member(vit, 3, seed=5)
    canaries, rows = x[:3], y[:3]
    cfg = DPSGDConfig(sample_rate=1.0, epochs=2.0, lr=0.5, clip=0.05, normaliser=1.0)
    with releases.recording(keep_values=True, canaries=(canaries, rows)) as rec:
        train_film(
            vit, x, y, 3, cfg, noise_multiplier=1.0, rng=rng(0, "attr"), pre=PRE, init=init, device="cpu"
        )
    first, second = rec.releases
    dots, norms = first.attribute(canaries, rows)
    with film_net(vit, init, device="cpu", trainable=True) as net:
        net.train()
        params = [p for p in net.parameters() if p.requires_grad]
        n_w = net.head.weight.numel()
        n_film = sum(p.numel() for p in params[:-2])
        factors = []
        for k in range(len(rows)):
            loss = nn.functional.cross_entropy(
                net(preprocess_batch(canaries[k : k + 1], PRE)),
                torch.as_tensor(rows[k : k + 1]),
                reduction="sum",
            )
            g = torch.cat([t.flatten() for t in torch.autograd.grad(loss, params)]).double().numpy()
            factor = min(1.0, cfg.clip * CLIP_MARGIN / np.linalg.norm(g))
            factors.append(factor)
            head_w = factor * g[n_film : n_film + n_w]
            assert dots[k] == pytest.approx(head_w @ first.value[n_film : n_film + n_w], rel=1e-4, abs=1e-6)
            assert norms[k] == pytest.approx(np.linalg.norm(head_w), rel=1e-4)
    assert min(factors) < 1  # clipped canaries: the factor is the joint norm's
    assert not np.allclose(second.attribute(canaries, rows)[0], dots)  # another state, another release
    with pytest.raises(ValueError, match="canaries of its recording"):
        first.attribute(canaries[:2], rows[:2])
    other = x[3:]
    with releases.recording(keep_values=True, canaries=(canaries, rows)) as rec:
        train_film(
            vit,
            other,
            y[3:],
            3,
            cfg,
            noise_multiplier=1.0,
            rng=rng(0, "attr"),
            pre=PRE,
            init=init,
            device="cpu",
        )
    assert all(r.attribution is None for r in rec.releases)
    with pytest.raises(ValueError, match="keeps values"):
        with releases.recording(canaries=(canaries, rows)):
            pass


# ----------------------------------------------------------------------------- noise and accounting


def test_noise_is_gaussian_with_std_sigma_c_and_seeded():
    """Sample variance of n draws: sd of s²/σ² is √(2/(n−1)); allow 5 sd."""
    shapes = [torch.zeros(50_000), torch.zeros(100, 200)]
    std = 0.7 * 1.5  # σ·C
    draws = torch.cat(
        [t.flatten() for t in gaussian_noise_like(shapes, std, torch.Generator().manual_seed(4))]
    )
    n = draws.numel()
    ratio = float(draws.var()) / std**2
    assert abs(ratio - 1) < 5 * math.sqrt(2 / (n - 1))
    assert abs(float(draws.mean())) < 5 * std / math.sqrt(n)
    again = gaussian_noise_like(shapes, std, torch.Generator().manual_seed(4))
    assert torch.equal(torch.cat([t.flatten() for t in again]), draws)


def test_noise_multiplier_matches_accountant_and_ledger_accepts_run(vit, tmp_path):
    x, y = colour_images(20, 3, seed=5, tmp_path=tmp_path, name="acc")
    cfg = DPSGDConfig(sample_rate=0.25, epochs=1.0, lr=1e-3, clip=1.0, normaliser=8.0)  # 4 steps
    eps, delta = 2.0, 1e-5
    noise = dpsgd_noise(eps, delta, cfg)
    sigma = noise["noise_multiplier"]
    assert noise["steps"] == cfg.steps == 4 and noise["sample_rate"] == cfg.sample_rate
    spent = sgd_epsilon(sigma, cfg.sample_rate, cfg.steps, delta, noise["accountant"])
    assert spent <= eps
    # smallest such σ: a little less noise (beyond the search tolerance) overspends
    assert (
        sgd_epsilon(sigma / (1 + 3 * SIGMA_RTOL), cfg.sample_rate, cfg.steps, delta, noise["accountant"])
        > eps
    )
    member, info = train_film(
        vit, x, y, 3, cfg, noise_multiplier=sigma, rng=rng(0, "acc"), pre=PRE, physical_batch=4, device="cpu"
    )
    assert info["steps"] == cfg.steps and info["noise_multiplier"] == sigma
    assert info["accountant_history"] == [[sigma, cfg.sample_rate, cfg.steps]]
    ledger = Ledger(Budget(eps, delta))
    ledger.add(0, {"mechanism": "data_independent", "epsilon": 0.0, "delta": 0.0})
    public, private = split_public({**noise, **info, "data": "test"})
    assert {"mean_clipped_fraction", "mean_batch_size"} <= set(private)  # statistics of the data
    ledger.add(0, public)
    privacy = ledger.to_dict()
    assert privacy["guarantee_holds"] and privacy["tasks"][0]["mechanisms"][1]["epsilon_accounted"] <= eps


def test_private_run_requires_finite_clip_and_valid_inputs(vit):
    cfg = DPSGDConfig(sample_rate=0.5, epochs=1.0, clip=math.inf)
    x = np.zeros((2, SIZE, SIZE, 3), np.uint8)
    with pytest.raises(ValueError, match="finite clipping bound"):
        train_film(vit, x, np.array([0, 1]), 2, cfg, noise_multiplier=1.0, rng=rng(0), pre=PRE, device="cpu")
    ok = DPSGDConfig(sample_rate=0.5, epochs=1.0)
    with pytest.raises(ValueError, match="uint8"):
        train_film(
            vit,
            x.astype(np.float32),
            np.array([0, 1]),
            2,
            ok,
            noise_multiplier=1.0,
            rng=rng(0),
            pre=PRE,
            device="cpu",
        )
    with pytest.raises(ValueError, match="row indices"):
        train_film(vit, x, np.array([0, 2]), 2, ok, noise_multiplier=1.0, rng=rng(0), pre=PRE, device="cpu")
    with torch.device("meta"):
        bn = timm.create_model("resnet18", pretrained=False, num_classes=0)
    with pytest.raises(ValueError, match="BatchNorm"):
        train_film(bn, x, np.array([0, 1]), 2, ok, noise_multiplier=1.0, rng=rng(0), pre=PRE, device="cpu")
    with pytest.raises(ValueError, match="physical_batch"):
        train_film(
            vit,
            x,
            np.array([0, 1]),
            2,
            ok,
            noise_multiplier=1.0,
            rng=rng(0),
            pre=PRE,
            physical_batch=0,
            device="cpu",
        )


def test_empty_task_still_releases_a_noisy_classifier(vit):
    """App. B, Prop. B.6: no data ⇒ every step is noise only; the release is a proper classifier."""
    cfg = DPSGDConfig(sample_rate=0.5, epochs=2.0, lr=1e-2, clip=1.0, normaliser=8.0)
    empty = np.zeros((0, SIZE, SIZE, 3), np.uint8)
    before = film_state(vit)
    member, info = train_film(
        vit,
        empty,
        np.zeros(0, np.int64),
        4,
        cfg,
        noise_multiplier=1.0,
        rng=rng(0, "empty"),
        pre=PRE,
        device="cpu",
    )
    assert member.weight.shape == (4, DIM) and member.bias.shape == (4,)
    assert bool(torch.isfinite(member.weight).all()) and bool((member.weight != 0).all())
    assert any(not torch.equal(member.film[k], before[k]) for k in before)  # FiLM values are noised too
    assert info["mean_batch_size"] == 0 and info["steps"] == cfg.steps
    z = film_logits(vit, member, np.zeros((3, SIZE, SIZE), np.uint8), PRE, device="cpu")  # grey images work
    assert z.shape == (3, 4) and np.isfinite(z).all()
    # σ = 0 and no data: nothing moves (zero gradients), the member is the pre-trained start
    m0, _ = train_film(
        vit,
        empty,
        np.zeros(0, np.int64),
        4,
        cfg,
        noise_multiplier=0.0,
        rng=rng(0, "empty"),
        pre=PRE,
        device="cpu",
    )
    assert not m0.weight.any() and all(torch.equal(m0.film[k], before[k]) for k in before)
    # an empty output space (every label dropped by label release) still releases noised FiLM values
    m_none, _ = train_film(
        vit,
        empty,
        np.zeros(0, np.int64),
        0,
        cfg,
        noise_multiplier=1.0,
        rng=rng(0, "none"),
        pre=PRE,
        device="cpu",
    )
    assert m_none.weight.shape == (0, DIM) and any(not torch.equal(m_none.film[k], before[k]) for k in before)
    assert film_logits(vit, m_none, np.zeros((2, SIZE, SIZE), np.uint8), PRE, device="cpu").shape == (2, 0)


# ----------------------------------------------------------------------------- training


def test_tiny_film_run_learns_easy_task_at_eps_inf(vit, tmp_path):
    """Chance is 1/3; on 60 test images P(accuracy ≥ 0.8 | chance) < 1e-12, so ≥ 0.8 means learnt."""
    x, y = colour_images(64, 3, seed=6, tmp_path=tmp_path, name="train")
    xt, yt = colour_images(60, 3, seed=7, tmp_path=tmp_path, name="test")
    cfg = DPSGDConfig(sample_rate=0.5, epochs=5.0, lr=1e-2, clip=1.0, normaliser=32.0)
    noise = dpsgd_noise(math.inf, 1e-5, cfg)
    before = film_state(vit)
    member, info = train_film(
        vit,
        x,
        y,
        3,
        cfg,
        noise_multiplier=noise["noise_multiplier"],
        rng=rng(0, "learn"),
        pre=PRE,
        physical_batch=16,
        device="cpu",
    )
    acc = float((film_logits(vit, member, xt, PRE, device="cpu").argmax(1) == yt).mean())
    assert acc >= 0.8, acc
    assert any(not torch.equal(member.film[k], before[k]) for k in before)  # FiLM itself was trained
    assert all(torch.equal(v, film_state(vit)[k]) for k, v in before.items())  # shared backbone untouched
    assert 0 < info["mean_clipped_fraction"] <= 1


def test_same_seed_bit_identical_different_seed_differs(vit, tmp_path):
    x, y = colour_images(16, 3, seed=8, tmp_path=tmp_path, name="det")
    cfg = DPSGDConfig(sample_rate=0.5, epochs=1.5, lr=1e-2, clip=1.0, normaliser=8.0)

    def run(seed: int, physical_batch: int = 8):
        member, _ = train_film(
            vit,
            x,
            y,
            3,
            cfg,
            noise_multiplier=0.8,
            rng=rng(seed, "det"),
            pre=PRE,
            physical_batch=physical_batch,
            device="cpu",
        )
        return member.to_arrays()

    a, b, c = run(1), run(1), run(2)
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    assert any(not np.array_equal(a[k], c[k]) for k in a)
    # the physical chunking only bounds memory: the release is the same up to float summation order
    d = run(1, physical_batch=3)
    assert all(np.allclose(a[k], d[k], rtol=1e-4, atol=1e-5) for k in a)


def test_member_round_trips_through_npz(vit, tmp_path):
    member = random_head_member(vit, 2, seed=9)
    np.savez(tmp_path / "member.npz", **member.to_arrays())
    with np.load(tmp_path / "member.npz") as z:
        back = FilmMember.from_arrays(dict(z))
    images = np.full((2, SIZE, SIZE, 3), 128, np.uint8)
    np.testing.assert_array_equal(
        film_logits(vit, back, images, PRE, device="cpu"), film_logits(vit, member, images, PRE, device="cpu")
    )


# ----------------------------------------------------------------------------- learners


@pytest.fixture(scope="module")
def two_tasks(vit, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tasks")
    x, y = colour_images(48, 3, seed=10, tmp_path=tmp, name="stream")
    xt, yt = colour_images(30, 3, seed=11, tmp_path=tmp, name="streamtest")
    t0, t1 = y <= 1, y == 2  # task 0: classes {0, 1}, task 1: class {2}
    e0, e1 = yt <= 1, yt == 2
    return [(x[t0], y[t0]), (x[t1], y[t1])], [(xt[e0], yt[e0]), (xt[e1], yt[e1])], [[0, 1], [2]]


LEARNER_CFG = DPSGDConfig(sample_rate=0.5, epochs=2.0, lr=1e-2, clip=1.0, normaliser=16.0)
LEARNER_BUDGET = (4.0, 1e-5)


@pytest.fixture(scope="module")
def learner_noise():
    """One accountant solve shared by the learner tests (the same (ε, δ, q, steps))."""
    return dpsgd_noise(*LEARNER_BUDGET, LEARNER_CFG)


@pytest.mark.parametrize("learner", ["peft_film", "naive_film", "noncl_film"])
def test_film_learners_run_and_records_fit_the_ledger(vit, two_tasks, learner_noise, learner):
    tasks, tests, spaces = two_tasks
    cfg, (eps, delta), noise = LEARNER_CFG, LEARNER_BUDGET, dict(learner_noise)
    before = film_state(vit)
    preds, records, members = run_film_learner(
        learner,
        tasks,
        tests,
        spaces,
        3,
        vit,
        pre=PRE,
        cfg=cfg,
        noise=noise,
        rng_for=lambda t: rng(0, learner, "task", t),
        physical_batch=16,
        device="cpu",
    )
    assert all(torch.equal(v, film_state(vit)[k]) for k, v in before.items())
    assert len(preds) == 2 and len(records) == 2
    final = preds[-1]
    assert [len(p) for p in final] == [len(tests[0][1]), len(tests[1][1])]
    assert all(set(np.unique(p)) <= {0, 1, 2} for p in final)
    if learner == "noncl_film":
        assert preds[0] == [None] and len(members) == 1 and members[0][0].n_out == 3
    else:
        assert set(np.unique(preds[0][0])) <= {0, 1}  # after task 0 only O_0 can be predicted
    if learner == "peft_film":
        assert [m.n_out for m, _ in members] == [2, 1]
        assert [list(o) for _, o in members] == spaces
    ledger = Ledger(Budget(eps, delta))
    for t, rec in enumerate(records):
        ledger.add(t, {"mechanism": "data_independent", "epsilon": 0.0, "delta": 0.0})
        ledger.add(t, split_public(rec)[0])
    assert ledger.to_dict()["guarantee_holds"]


def test_naive_film_softmax_restricted_to_seen_labels(vit, two_tasks):
    """Alg. A1: at task 0 the unseen outputs get no gradient (σ = 0: their head rows stay zero)."""
    tasks, tests, spaces = two_tasks
    cfg = DPSGDConfig(sample_rate=0.5, epochs=1.0, lr=1e-2, clip=1.0, normaliser=16.0)
    noise = dpsgd_noise(math.inf, 1e-5, cfg)
    _, _, members = run_film_learner(
        "naive_film",
        tasks[:1],
        tests[:1],
        spaces[:1],
        3,
        vit,
        pre=PRE,
        cfg=cfg,
        noise=noise,
        rng_for=lambda t: rng(0, "naive", t),
        device="cpu",
    )
    model = members[0][0]
    assert (
        model.n_out == 3 and bool(model.weight[:2].any()) and not model.weight[2].any() and model.bias[2] == 0
    )


def test_unknown_learner_is_named(vit, two_tasks):
    tasks, tests, spaces = two_tasks
    with pytest.raises(ValueError, match="peft_film"):
        run_film_learner(
            "film",
            tasks,
            tests,
            spaces,
            3,
            vit,
            pre=PRE,
            cfg=DPSGDConfig(),
            noise={"noise_multiplier": 0.0},
            rng_for=lambda t: rng(0),
            device="cpu",
        )


# ----------------------------------------------------------------------------- tuning (App. D.1)


def test_tune_film_searches_table_a2_ranges_scales_and_is_deterministic(vit, tmp_path):
    """App. D.1: GP search over Table A2's ranges on a 70:30 split of the tuning set; each
    trial is a FiLM member trained at the trial's (q, lr, clip) with the σ of (ε, δ) and
    scored on the 30 %; the chosen q is kept and Adam's lr scaled by √(1/0.7)."""
    pytest.importorskip("optuna")
    from dpcl.privacy.sgd_accounting import coarse_noise_multiplier
    from dpcl.training.tuning import (
        CLIP_RANGE,
        LR_RANGE,
        MIN_BATCH,
        TRAIN_FRACTION,
        split_tuning_set,
        tune_film,
    )

    x, y = colour_images(18, 3, seed=12, tmp_path=tmp_path, name="tune")  # small: every trial trains FiLM
    y = y + 4  # dataset labels need not be row indices
    eps, delta = 4.0, 1e-5
    kw = {"n_trials": 2, "epochs": 1.0, "normaliser": 16.0, "physical_batch": 16, "device": "cpu"}
    before = film_state(vit)
    res = tune_film(vit, x, y, eps, delta, 3, pre=PRE, **kw)
    assert all(torch.equal(v, film_state(vit)[k]) for k, v in before.items())  # shared backbone untouched
    rows = np.unique(y, return_inverse=True)[1]
    tr, va = split_tuning_set(rows, 3, "film")
    n_tr = len(tr)
    assert res["tuning_set"] == {"n": 18, "train": n_tr, "validation": len(va), "classes": [4, 5, 6]}
    assert n_tr == sum(round(TRAIN_FRACTION * np.sum(rows == c)) for c in range(3))
    assert len(res["trials"]) == 2 and res["learner"] == "film" and res["epsilon"] == eps
    for t in res["trials"]:
        p = t["params"]
        assert LR_RANGE[0] <= p["lr"] <= LR_RANGE[1] and CLIP_RANGE[0] <= p["clip"] <= CLIP_RANGE[1]
        assert MIN_BATCH <= p["batch_size"] <= n_tr
        assert float(t["accuracy"] * len(va)).is_integer()  # an accuracy on the validation part
    best, cfg = res["best_params"], res["best"]
    assert res["best_validation_accuracy"] == max(t["accuracy"] for t in res["trials"])
    assert cfg["sample_rate"] == best["batch_size"] / n_tr  # constant sampling rate
    assert cfg["lr"] == best["lr"]  # as tuned; dpcl.training.tuning_protocol scales it to a run
    assert (cfg["clip"], cfg["epochs"], cfg["normaliser"]) == (best["clip"], 1.0, 16.0)
    # the objective is exactly: train a member on the 70 % at the trial's config, score on the 30 %
    p0 = res["trials"][0]["params"]
    c0 = DPSGDConfig(
        sample_rate=p0["batch_size"] / n_tr, epochs=1.0, lr=p0["lr"], clip=p0["clip"], normaliser=16.0
    )
    sigma = coarse_noise_multiplier(eps, delta, c0.sample_rate, c0.steps)
    member, _ = train_film(
        vit,
        x[tr],
        rows[tr],
        3,
        c0,
        noise_multiplier=sigma,
        rng=rng(3, "tuning", "film", "trial", 0),
        pre=PRE,
        physical_batch=16,
        device="cpu",
    )
    acc = float((film_logits(vit, member, x[va], PRE, device="cpu").argmax(1) == rows[va]).mean())
    assert acc == res["trials"][0]["accuracy"]
    assert tune_film(vit, x, y, eps, delta, 3, pre=PRE, **kw) == res  # deterministic per seed


def test_tune_film_rejects_a_too_small_tuning_set(vit):
    pytest.importorskip("optuna")
    from dpcl.training.tuning import tune_film

    x = np.zeros((8, SIZE, SIZE, 3), np.uint8)
    with pytest.raises(ValueError, match="tuning set too small.*tune_per_class"):
        tune_film(vit, x, np.repeat([0, 1], 4), 1.0, 1e-5, 0, pre=PRE, n_trials=1, device="cpu")
    with pytest.raises(ValueError, match="8 tuning images but 7 labels"):
        tune_film(vit, x, np.zeros(7, np.int64), 1.0, 1e-5, 0, pre=PRE, n_trials=1, device="cpu")


def test_tuned_config_replaces_the_configured_one_for_its_epsilon_only(tmp_path):
    from dpcl.io import write_json
    from dpcl.stages.common import resolve_dpsgd

    configured = {"sample_rate": 0.25, "epochs": 2.0, "lr": 0.01, "clip": 1.0, "normaliser": 128.0}
    assert resolve_dpsgd(configured, None, "1", "peft_film") == (configured, None)
    tuned = {"sample_rate": 0.5, "epochs": 2.0, "lr": 3e-4, "clip": 2.5, "normaliser": 128.0}
    all_tasks = {**tuned, "lr": 9e-4}
    for eps, tag in ((1.0, "1"), (math.inf, "inf")):
        write_json(
            tmp_path / f"eps{tag}.json",
            {
                "best": tuned,
                "dpsgd": tuned,
                "dpsgd_all_tasks": all_tasks,
                "protocol": "public",
                "epsilon": eps,
            },
        )
        assert resolve_dpsgd(configured, tmp_path / f"eps{tag}.json", tag, "peft_film") == (tuned, "public")
        assert resolve_dpsgd(configured, tmp_path / f"eps{tag}.json", tag, "noncl_film") == (
            all_tasks,
            "public",
        )
    with pytest.raises(ValueError, match="tuned for ε = inf, but the run's budget is ε = 1"):
        resolve_dpsgd(configured, tmp_path / "epsinf.json", "1", "peft_film")
    write_json(tmp_path / "other.json", {"epsilon": 1.0})
    with pytest.raises(ValueError, match="not a tuning result"):
        resolve_dpsgd(configured, tmp_path / "other.json", "1", "peft_film")
    write_json(tmp_path / "old.json", {"best": tuned, "dpsgd": tuned, "epsilon": 1.0})  # an older dpcl's
    with pytest.raises(ValueError, match="rerun its tuning job"):
        resolve_dpsgd(configured, tmp_path / "old.json", "1", "peft_film")
