"""The head's noisy clipped gradient sum (dpcl.training.clipped_sum) and the heads' Adam (dpcl.training.adam).

The sample by geometric gaps must be a Poisson sample (every record independently at rate q), the float32
products must stay within float32 rounding of the float64 computation, and the clipping margin must keep
every rounded per-example contribution within C.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpcl.privacy.sampling import by_gaps
from dpcl.training.adam import Adam
from dpcl.training.clipped_sum import (
    CLIP_MARGIN,
    HeadData,
    clip_factors,
    clipped_sum,
    logit_grads32,
    noisy_clipped_sum,
)
from dpcl.training.heads import DPSGDConfig, LinearHead, logit_grads, per_sample_grad_norms


@pytest.mark.parametrize(
    ("n", "rate", "chunk"), [(40, 0.3, None), (40, 0.3, 2), (7, 0.9, 1), (300, 0.01, None)]
)
def test_the_gap_sample_is_a_poisson_sample(n, rate, chunk):
    """Each record's inclusion count over R draws is Binomial(R, q), independently of the others: a
    chi-square test of the per-record counts and of the sample sizes against Binomial(n, q), p > 1e-6."""
    gen = np.random.default_rng(3)
    reps = 4000
    counts = np.zeros(n)
    sizes = np.zeros(n + 1)
    for _ in range(reps):
        b = by_gaps(gen, n, rate, chunk=chunk, population=np.zeros((n, 0)))
        assert np.all(np.diff(b) > 0) and (b.size == 0 or (b[0] >= 0 and b[-1] < n))
        counts[b] += 1
        sizes[b.size] += 1
    # per-record counts: sum of squared standardised binomials is ≈ chi-square with n degrees of freedom
    z2 = float(np.sum((counts - reps * rate) ** 2 / (reps * rate * (1 - rate))))
    assert stats.chi2.sf(z2, n) > 1e-6
    # sample sizes against Binomial(n, q), cells with expectation < 5 pooled into the tails
    expected = reps * stats.binom.pmf(np.arange(n + 1), n, rate)
    keep = expected >= 5
    obs = np.append(sizes[keep], sizes[~keep].sum())
    exp = np.append(expected[keep], expected[~keep].sum())
    if exp[-1] < 5:
        obs, exp = obs[:-1], exp[:-1] * obs[:-1].sum() / exp[:-1].sum()
    assert stats.chisquare(obs, exp).pvalue > 1e-6


def test_the_gap_sample_edge_rates():
    gen = np.random.default_rng(0)
    assert by_gaps(gen, 0, 0.5, population=np.zeros((0, 0))).size == 0
    assert by_gaps(gen, 10, 0.0, population=np.zeros((10, 0))).size == 0
    assert by_gaps(gen, 10, 1.0, population=np.zeros((10, 0))).tolist() == list(range(10))


def _data(n=64, dim=40, k=5, scale=30.0, seed=0):
    g = np.random.default_rng(seed)
    x = (g.normal(size=(n, dim)) * scale).astype(np.float32)
    return HeadData(x, g.integers(0, k, n)), g.normal(size=(k, dim)), g.normal(size=k)


def test_float32_sum_matches_float64_within_rounding():
    data, w, b = _data()
    batch = np.arange(len(data))
    x64 = data.x.astype(np.float64)
    d64 = logit_grads(w, b, x64, data.y, None)
    c64 = np.minimum(1.0, CLIP_MARGIN / np.maximum(per_sample_grad_norms(x64, d64), 1e-12))
    s_w, s_b, n_clipped = clipped_sum(data, w, b, batch, clip=1.0, active=None)
    ref_w = (d64 * c64[:, None]).T @ x64
    # float32 products of n terms: relative error ≲ n·2⁻²⁴ of the sum of magnitudes
    scale = np.abs(d64 * c64[:, None]).T @ np.abs(x64)
    assert np.all(np.abs(s_w - ref_w) <= len(batch) * 2.0**-23 * scale + 1e-12)
    assert np.allclose(s_b, (d64 * c64[:, None]).sum(0), rtol=1e-5, atol=1e-7)
    assert n_clipped == int(np.sum(c64 < 1))


def test_a_batch_of_every_record_reads_the_features_in_place_with_the_gathered_sums():
    data, w, b = _data()
    n = len(data)
    everyone = np.arange(n)
    assert data.rows(everyone) is data.x  # sampling rate 1: nothing to gather
    # the same records gathered from a dataset with one more row: the same sums, bit for bit
    extra = HeadData(np.vstack([data.x, data.x[:1]]), np.r_[data.y, data.y[:1]])
    assert extra.rows(everyone) is not extra.x
    for clip in (1.0, math.inf):
        got = clipped_sum(data, w, b, everyone, clip=clip, active=None)
        ref = clipped_sum(extra, w, b, everyone, clip=clip, active=None)
        assert np.array_equal(got[0], ref[0]) and np.array_equal(got[1], ref[1]) and got[2] == ref[2]
    assert data.rows(everyone[1:]).shape == (n - 1, data.x.shape[1])  # a proper subset is gathered


def test_every_rounded_per_example_contribution_is_within_the_clip():
    """With the margin, the contribution actually summed, fl32(fl32(c_i) δ_i) (x_i, 1), has norm ≤ C
    (checked in float64) for examples far outside the clip."""
    data, w, b = _data(n=2000, dim=64, k=10, scale=1e3, seed=1)
    batch = np.arange(len(data))
    clip, w = 0.37, w * 1e-4  # small weights: unsaturated softmax, δ_i far from 0
    d = logit_grads32(w, b, data.x, data.y, None)
    c = clip_factors(data.sq1, d, clip)
    assert np.mean(c < 1) > 0.99  # nearly every example is clipped
    dc = (d * c.astype(np.float32)[:, None]).astype(np.float64)  # what clipped_sum sums, exactly
    x64 = data.x.astype(np.float64)
    norms = np.sqrt(np.sum(dc**2, 1) * (np.sum(x64**2, 1) + 1.0))
    assert norms.max() <= clip
    s_w, s_b, _ = clipped_sum(data, w, b, batch, clip=clip, active=None)
    assert np.all(np.isfinite(s_w)) and np.all(np.isfinite(s_b))


def test_noise_has_the_configured_scale_and_the_draw_order_is_sample_then_weight_then_bias():
    data, w, b = _data(n=30, dim=20, k=3)
    g_w, g_b, batch, _ = noisy_clipped_sum(
        data, w, b, rate=0.5, clip=0.5, sigma=2.0, gen=np.random.default_rng(9)
    )
    gen = np.random.default_rng(9)
    batch2 = by_gaps(gen, 30, 0.5, population=np.zeros((30, 0)))
    s_w, s_b, _ = clipped_sum(data, w, b, batch2, clip=0.5, active=None)
    assert batch.tolist() == batch2.tolist()
    assert np.array_equal(g_w, 1.0 * gen.standard_normal(w.shape) + s_w)
    assert np.array_equal(g_b, 1.0 * gen.standard_normal(b.shape) + s_b)
    # the noise alone over many releases: N(0, (σC)²) per coordinate (variance within 6 s.e.)
    gen = np.random.default_rng(1)
    empty = HeadData(np.zeros((0, 20), np.float32), np.zeros(0, np.int64))
    draws = np.concatenate(
        [
            noisy_clipped_sum(empty, w, b, rate=0.5, clip=0.5, sigma=2.0, gen=gen)[0].ravel()
            for _ in range(300)
        ]
    )
    m = draws.size
    assert abs(draws.var() - 1.0) < 6 * math.sqrt(2.0 / m)


@pytest.mark.parametrize("sigma", [0.0, 2.0])
def test_a_release_into_a_flat_buffer_is_the_same_release_laid_out_as_the_head(sigma):
    """``out``: g_w and g_b are views of it (weight row by row, then bias), with the values, and the
    generator left in the state, of a release into new arrays."""
    data, w, b = _data(n=30, dim=20, k=3)
    g_w, g_b, batch, _ = noisy_clipped_sum(
        data, w, b, rate=0.5, clip=0.5, sigma=sigma, gen=(gen := np.random.default_rng(9))
    )
    out = np.full(w.size + b.size, np.nan)
    f_w, f_b, f_batch, _ = noisy_clipped_sum(
        data, w, b, rate=0.5, clip=0.5, sigma=sigma, gen=(gen2 := np.random.default_rng(9)), out=out
    )
    assert np.shares_memory(f_w, out) and np.shares_memory(f_b, out)
    assert np.array_equal(out, np.concatenate([g_w.ravel(), g_b])) and np.array_equal(batch, f_batch)
    assert f_w.shape == w.shape and gen.bit_generator.state == gen2.bit_generator.state


def test_the_heads_weight_and_bias_are_views_of_one_flat_buffer_and_adam_steps_it_as_its_parts():
    import copy
    import pickle

    head = LinearHead(6, 3)
    head.w[:] = np.arange(18).reshape(3, 6)
    head.b[:] = [-1, -2, -3]
    assert np.array_equal(head.params, np.r_[np.arange(18), -1, -2, -3])
    for twin in (copy.deepcopy(head), pickle.loads(pickle.dumps(head))):
        twin.params += 1  # a copy's weight and bias stay views of its own buffer
        assert np.array_equal(twin.w, head.w + 1) and np.array_equal(twin.b, head.b + 1)
    with pytest.raises(AttributeError):
        head.w = np.zeros((3, 6))  # rebinding would detach the weight from the buffer Adam updates
    cfg = DPSGDConfig(lr=0.05, normaliser=4.0)
    g = np.random.default_rng(0)
    flat, parts = LinearHead(6, 3), LinearHead(6, 3)
    adam_flat = Adam.for_head(flat, cfg)
    adam_parts = Adam(
        [parts.w, parts.b], lr=cfg.lr, betas=cfg.betas, eps=cfg.adam_eps, normaliser=cfg.normaliser
    )
    for _ in range(5):
        gw, gb = g.normal(size=(3, 6)), g.normal(size=3)
        adam_flat.step([np.r_[gw.ravel(), gb]])
        adam_parts.step([gw, gb])
        assert np.array_equal(flat.params, parts.params)  # elementwise: the same bits either way


def test_masked_outputs_get_no_gradient_and_a_non_private_sum_is_unclipped():
    data, w, b = _data()
    active = np.array([True, False, True, True, False])
    d = logit_grads32(w, b, data.x, data.y % 2 * 2, active)
    assert np.all(d[:, ~active] == 0)
    s_w, _, n_clipped = clipped_sum(data, w, b, np.arange(len(data)), clip=math.inf, active=None)
    x64 = data.x.astype(np.float64)
    ref = logit_grads(w, b, x64, data.y, None).T @ x64
    assert n_clipped == 0 and np.allclose(s_w, ref, rtol=1e-4, atol=1e-3)


def test_adam_is_the_textbook_update():
    g = np.random.default_rng(0)
    cfg = DPSGDConfig(lr=0.05, normaliser=4.0)
    head = LinearHead(6, 3)
    w, b = head.w.copy(), head.b.copy()
    m = [np.zeros_like(w), np.zeros_like(b)]
    v = [np.zeros_like(w), np.zeros_like(b)]
    adam = Adam.for_head(head, cfg)
    b1, b2 = cfg.betas
    for t in range(1, 8):
        grads = [g.normal(size=w.shape), g.normal(size=b.shape)]
        for k, p in enumerate((w, b)):
            gk = grads[k] / cfg.normaliser
            m[k] = b1 * m[k] + (1 - b1) * gk
            v[k] = b2 * v[k] + (1 - b2) * gk * gk
            p -= cfg.lr * (m[k] / (1 - b1**t)) / (np.sqrt(v[k] / (1 - b2**t)) + cfg.adam_eps)
        adam.step([a.copy() for a in grads])
        assert np.allclose(head.w, w, rtol=1e-12, atol=1e-15) and np.allclose(
            head.b, b, rtol=1e-12, atol=1e-15
        )


def test_adam_blocks_a_wide_head_bit_for_bit(monkeypatch):
    """A flat array longer than a block is updated block by block: the same bits as in one pass."""
    from dpcl.training import adam as adam_module

    g = np.random.default_rng(1)
    cfg = DPSGDConfig(lr=0.05, normaliser=4.0)
    dim, n_out = 700, 3 * adam_module.BLOCK // 700 + 2  # params span four blocks, the last one partial
    blocked, whole = LinearHead(dim, n_out), LinearHead(dim, n_out)
    grads = [g.normal(size=blocked.params.size) for _ in range(4)]
    assert blocked.params.size > 3 * adam_module.BLOCK
    a = Adam.for_head(blocked, cfg)
    for gr in grads:
        a.step([gr.copy()])
    monkeypatch.setattr(adam_module, "BLOCK", 10 * blocked.params.size)  # one pass over the whole array
    b = Adam.for_head(whole, cfg)
    for gr in grads:
        b.step([gr.copy()])
    assert np.array_equal(blocked.params, whole.params) and np.array_equal(a.v[0], b.v[0])
    assert not np.array_equal(blocked.params, 0.0)
