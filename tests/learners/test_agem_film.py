"""DP-A-GEM with FiLM ([LabelSpace] App. D.4): buffer, projection, noise, ledger, determinism.

A tiny random-init timm ViT (the helpers of test_film.py) on CPU; images round-trip
through idx files. Every check runs the real training loop (:func:`dpcl.training.film.train_film`
with a buffer mechanism) through :func:`dpcl.learners.agem_film.run_agem_film`.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from film_helpers import PRE, SIZE, colour_images, film_state

import dpcl.training.film as film_mod
from dpcl.learners.agem import AGEMConfig, agem_noise, privacy_summary, reference_mask
from dpcl.learners.agem_film import run_agem_film
from dpcl.privacy.accounting import Budget
from dpcl.privacy.ledger import Ledger, split_public
from dpcl.privacy.sgd_accounting import epsilon as sgd_epsilon
from dpcl.seeding import rng
from dpcl.training.film import BufferMechanism, train_film
from dpcl.training.heads import DPSGDConfig

CFG = DPSGDConfig(sample_rate=0.5, epochs=1.0, lr=1e-2, clip=1.0, normaliser=8.0)  # 2 steps per task
T = 3
AGEM = AGEMConfig(buffer_fraction=0.4)


@pytest.fixture(scope="module")
def stream(tmp_path_factory):
    """Three tasks of two classes each (18 images per task), sample ids 5, 8, 11, …; test sets per task."""
    tmp = tmp_path_factory.mktemp("agem_film")
    x, y = colour_images(120, 6, seed=20, tmp_path=tmp, name="agem")
    xt, yt = colour_images(36, 6, seed=21, tmp_path=tmp, name="agemtest")
    ids = 3 * np.arange(len(y)) + 5  # ids need not be row numbers
    tasks, tests = [], []
    for t in range(T):
        m, mt = np.isin(y, [2 * t, 2 * t + 1]), np.isin(yt, [2 * t, 2 * t + 1])
        tasks.append((x[m][:18], y[m][:18], ids[m][:18]))
        tests.append((xt[mt], yt[mt]))
    return tasks, tests, [[2 * t, 2 * t + 1] for t in range(T)]


def _ids_of(tasks) -> dict[bytes, int]:
    """Sample id of each image (the images are distinct random backgrounds)."""
    out = {x.tobytes(): int(i) for xs, _, ids in tasks for x, i in zip(xs, ids, strict=True)}
    assert len(out) == sum(len(ids) for _, _, ids in tasks)
    return out


def _run(vit, stream, eps, seed, agem=AGEM, calls=None):  # noqa: F811
    tasks, tests, spaces = stream
    noise, noise_ref = agem_noise(eps, 1e-5, CFG, agem, T)

    def rng_for(t: int, part: str) -> np.random.Generator:
        if calls is not None:
            calls.append((t, part))
        return rng(seed, "agem_film", "task", t, part)

    return run_agem_film(
        tasks,
        tests,
        spaces,
        6,
        vit,
        PRE,
        cfg=CFG,
        agem=agem,
        noise=noise,
        noise_ref=noise_ref,
        rng_for=rng_for,
        split_seed=seed,
        physical_batch=16,
        device="cpu",
    )


def test_buffer_holds_exactly_the_past_reference_parts(vit, stream, monkeypatch):  # noqa: F811
    tasks, _, _ = stream
    id_of = _ids_of(tasks)
    seen = []
    real = film_mod.train_film  # run_agem_film imports it from dpcl.training.film when it runs

    def spy(backbone, images, rows, *args, buffer=None, **kwargs):
        seen.append(
            (
                [id_of[x.tobytes()] for x in images],
                None if buffer is None else [id_of[x.tobytes()] for x in buffer.images],
            )
        )
        if buffer is not None:  # labels travel with their images
            assert set(buffer.rows.tolist()) <= set(range(2 * len(seen) - 2))
        return real(backbone, images, rows, *args, buffer=buffer, **kwargs)

    monkeypatch.setattr(film_mod, "train_film", spy)
    before = film_state(vit)
    preds, _, stats, model = _run(vit, stream, math.inf, seed=1)
    assert all(torch.equal(v, film_state(vit)[k]) for k, v in before.items())  # shared backbone restored
    refs = [set(ids[reference_mask(ids, 0.4, 1)].tolist()) for _, _, ids in tasks]
    assert all(refs[:2]) and all(
        len(r) < len(tasks[t][2]) for t, r in enumerate(refs)
    )  # both parts non-empty
    assert seen[0][1] is None  # task 0: no buffer mechanism
    for t, (train_ids, buf_ids) in enumerate(seen):
        task_ids = set(tasks[t][2].tolist())
        assert set(train_ids) == (task_ids - refs[t] if t < T - 1 else task_ids)  # the last task is not split
        if t:
            assert sorted(buf_ids) == sorted(set().union(*refs[:t]))  # exactly the past reference parts
        assert stats[t]["buffer_samples_before"] == (len(buf_ids) if t else 0)
    assert model.n_out == 6 and [len(r) for r in preds] == [1, 2, 3]
    assert set(np.unique(preds[0][0])) <= {0, 1}  # softmax restricted to the labels seen so far


def test_projection_only_when_the_dot_product_is_negative(vit, stream, monkeypatch):  # noqa: F811
    """Eq. A102 on the flattened FiLM + head gradients; the projected g is what Adam receives."""
    tasks, _, _ = stream
    (x0, y0, _), (x1, y1, _) = tasks[:2]
    log = []
    real = film_mod.project

    def spy(g, g_ref):
        out, did = real(g, g_ref)
        log.append((float(g @ g_ref), did, out, g, g_ref))
        return out, did

    cfg = DPSGDConfig(sample_rate=0.5, epochs=5.0, lr=1e-2, clip=1.0, normaliser=8.0)  # 10 steps
    active = np.isin(np.arange(6), [0, 1, 2, 3])

    def train(seed: int):
        buf = BufferMechanism(x0, y0, 0.5, 2.0, rng(seed, "ref"))
        return train_film(
            vit,
            x1,
            y1,
            6,
            cfg,
            noise_multiplier=2.0,
            rng=rng(seed, "train"),
            pre=PRE,
            init=None,
            active=active,
            device="cpu",
            buffer=buf,
        )

    monkeypatch.setattr(film_mod, "project", spy)
    member, info = train(3)
    assert len(log) == cfg.steps
    n_params = member.n_parameters()
    dids = []
    for dot, did, out, g, g_ref in log:
        assert g.shape == g_ref.shape == (n_params,)  # flattened over all trainable parameters
        assert did == (dot < 0)
        if did:
            assert abs(float(out @ g_ref)) <= 1e-3 * float(g.norm() * g_ref.norm())  # float32 dot products
        else:
            assert out is g
        dids.append(did)
    assert 0 < sum(dids) < len(dids)  # with σ = 2 both signs occur (seeded)
    assert info["projected_fraction"] == pytest.approx(np.mean(dids))
    # the projection changes the update: without it the model differs
    monkeypatch.setattr(film_mod, "project", lambda g, g_ref: (g, False))
    plain, _ = train(3)
    assert not torch.equal(plain.weight, member.weight)


def test_empty_buffer_sample_still_draws_its_own_noise(vit, stream, monkeypatch):  # noqa: F811
    """g_ref is computed at every step even if its Poisson sample (here: the buffer) is empty,
    with noise from its own generator: g's noise is the same with or without the buffer."""
    tasks, _, _ = stream
    x1, y1, _ = tasks[1]
    draws = []
    real = film_mod.gaussian_noise_like

    def spy(tensors, std, generator):
        z = real(tensors, std, generator)
        draws.append((std, torch.cat([t.reshape(-1) for t in z])))
        return z

    monkeypatch.setattr(film_mod, "gaussian_noise_like", spy)
    active = np.isin(np.arange(6), [0, 1, 2, 3])
    empty = BufferMechanism(
        np.zeros((0, SIZE, SIZE, 3), np.uint8), np.zeros(0, np.int64), 0.5, 3.0, rng(0, "r")
    )
    _, info = train_film(
        vit,
        x1,
        y1,
        6,
        CFG,
        noise_multiplier=1.5,
        rng=rng(0, "t"),
        pre=PRE,
        active=active,
        device="cpu",
        buffer=empty,
    )
    with_buffer = list(draws)
    assert [s for s, _ in with_buffer] == [1.5, 3.0] * CFG.steps  # σC for g, σ_ref·C for g_ref, every step
    assert info["mean_buffer_batch_size"] == 0
    g_noise, ref_noise = with_buffer[0::2], with_buffer[1::2]
    assert all(
        not torch.allclose(a / 1.5, b / 3.0) for (_, a), (_, b) in zip(g_noise, ref_noise, strict=True)
    )
    draws.clear()
    train_film(
        vit, x1, y1, 6, CFG, noise_multiplier=1.5, rng=rng(0, "t"), pre=PRE, active=active, device="cpu"
    )
    assert len(draws) == CFG.steps
    assert all(torch.equal(a, b) for (_, a), (_, b) in zip(draws, g_noise, strict=True))
    with pytest.raises(ValueError, match="buffer sample_rate"):
        train_film(
            vit,
            x1,
            y1,
            6,
            CFG,
            noise_multiplier=1.5,
            rng=rng(0, "t"),
            pre=PRE,
            active=active,
            device="cpu",
            buffer=BufferMechanism(empty.images, empty.rows, 0.0, 1.0, rng(0)),
        )


@pytest.fixture(scope="module")
def private_runs(vit, stream):  # noqa: F811
    """Two private runs with seed 0 and one with seed 1 (ε = 4 for training, δ = 1e-5)."""
    calls: list = []
    return [
        _run(vit, stream, 4.0, seed=s, calls=calls if i == 0 else None) for i, s in enumerate((0, 0, 1))
    ], calls


def test_ledger_holds_the_target_and_buffer_composes_over_later_tasks(private_runs):
    (preds, records, _, _), *_ = private_runs[0]
    agem = AGEM
    noise, noise_ref = agem_noise(4.0, 1e-5, CFG, agem, T)
    ledger = Ledger(Budget(4.0, 1e-5), T)
    for t, entries in enumerate(records):
        ledger.add(
            t, {"mechanism": "data_independent", "epsilon": 0.0, "delta": 0.0}
        )  # the task's (data-independent) label space
        for e in entries:
            ledger.add(t, split_public(e)[0])  # counts and statistics go to the diagnostics
    priv = ledger.to_dict()  # raises if any individual's total exceeds the target
    assert priv["guarantee_holds"] and priv["overall"]["epsilon"] <= 4.0 * (1 + 1e-12)
    for t, task in enumerate(priv["tasks"]):
        mechs = task["mechanisms"]
        mechs = mechs[1:]  # after the label-space entry
        assert [m["mechanism"] for m in mechs] == (["dpsgd", "dpsgd_buffer"] if t < T - 1 else ["dpsgd"])
        assert mechs[0]["part"] == "train" and mechs[0]["steps"] == CFG.steps
        if t < T - 1:
            buf = mechs[1]
            assert buf["part"] == "reference" and buf["later_tasks"] == T - 1 - t
            assert buf["steps"] == (T - 1 - t) * CFG.steps  # reread at every step of every later task
            assert buf["epsilon_accounted"] == pytest.approx(
                sgd_epsilon(noise_ref["noise_multiplier"], CFG.sample_rate, (T - 1 - t) * CFG.steps, 1e-5)
            )
    b0, b1 = (priv["tasks"][t]["parts"]["reference"]["epsilon"] for t in (0, 1))
    assert b1 < b0 <= 4.0 * (1 + 1e-12)  # the worst case (s = 0) is what σ_ref was calibrated for
    assert noise_ref["noise_multiplier"] > noise["noise_multiplier"]
    block = privacy_summary(priv, ledger.tasks, CFG, agem, noise=noise, noise_ref=noise_ref, n_tasks=T)
    assert block["buffer_part"]["worst_case_compositions"] == (T - 1) * CFG.steps
    assert (
        block["buffer_part"]["epsilon_worst_case"] == b0 and block["per_individual_total"] == priv["overall"]
    )
    assert records[1][0]["projected_fraction"] >= 0 and "accountant_history" in records[0][0]


def test_each_task_and_part_has_its_own_generator_and_runs_are_deterministic(private_runs):
    runs, calls = private_runs
    assert sorted(calls) == sorted([(0, "train")] + [(t, p) for t in (1, 2) for p in ("train", "reference")])
    (p0, r0, s0, m0), (p1, r1, s1, m1), (_, _, _, m2) = runs
    assert torch.equal(m0.weight, m1.weight) and all(torch.equal(m0.film[k], m1.film[k]) for k in m0.film)
    assert s0 == s1 and r0 == r1
    assert all(
        np.array_equal(a, b) for ra, rb in zip(p0, p1, strict=True) for a, b in zip(ra, rb, strict=True)
    )
    assert not torch.equal(m0.weight, m2.weight)  # another seed: other samples and noise
