"""FiLM's step inputs (dpcl.training.film_input) and the backbone's precision (dpcl.training.precision):
prefetching in background threads changes no bit of a run; a reduced precision keeps every sample's
clipped contribution within C, and what it cannot do is refused by name."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from film_helpers import PRE, colour_images

from dpcl.seeding import rng
from dpcl.training.film import BufferMechanism, clipped_grad_sum, train_film
from dpcl.training.film_input import StepInputs
from dpcl.training.film_member import FilmMember, film_net, pretrained_member
from dpcl.training.film_model import private_training
from dpcl.training.film_per_sample import film_grad_sample_module
from dpcl.training.heads import DPSGDConfig
from dpcl.training.precision import check_precision

CFG = DPSGDConfig(sample_rate=0.5, epochs=1.5, lr=1e-2, clip=1.0, normaliser=8.0)  # 3 steps


def _train(vit, x, y, *, prefetch, precision="fp32", buffer=None, sigma=0.8):
    member, info = train_film(
        vit,
        x,
        y,
        3,
        CFG,
        noise_multiplier=sigma,
        rng=rng(1, "prefetch"),
        pre=PRE,
        physical_batch=3,  # several chunks per step: the next one is prepared while one computes
        device="cpu",
        prefetch=prefetch,
        precision=precision,
        buffer=buffer() if buffer else None,
    )
    return member.to_arrays(), info


@pytest.mark.parametrize("with_buffer", [False, True])
def test_prefetching_changes_no_bit(vit, tmp_path, with_buffer):
    """The same member, bit for bit, with the chunks and the noise prepared in background threads; with a
    DP-A-GEM buffer the second release's chunks and noise go through the same threads."""
    x, y = colour_images(16, 3, seed=3, tmp_path=tmp_path, name="pf")
    bx, by = colour_images(8, 3, seed=4, tmp_path=tmp_path, name="pfb")

    def buffer():
        return BufferMechanism(bx, by, 0.5, 1.2, rng(2, "prefetch-buffer"))

    a, info_a = _train(vit, x, y, prefetch=False, buffer=buffer if with_buffer else None)
    b, info_b = _train(vit, x, y, prefetch=True, buffer=buffer if with_buffer else None)
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    assert info_a == info_b


def test_chunks_come_in_sample_order_with_or_without_threads():
    images = np.arange(7 * 4 * 4, dtype=np.uint8).reshape(7, 4, 4)
    rows = np.arange(7) * 10
    batch = np.array([0, 2, 3, 5, 6])
    pre = type(PRE)(image_size=4, mean=(0.0,) * 3, std=(1.0,) * 3, channels_last=False)
    got = {}
    for prefetch in (False, True):
        with StepInputs("cpu", prefetch=prefetch) as io:
            got[prefetch] = list(io.chunks(images, rows, batch, pre=pre, physical_batch=2))
    assert [len(y) for _, y in got[True]] == [2, 2, 1]
    for (xa, ya), (xb, yb) in zip(got[False], got[True], strict=True):
        assert torch.equal(xa, xb) and torch.equal(ya, yb)
    assert torch.cat([y for _, y in got[True]]).tolist() == [0, 20, 30, 50, 60]
    assert StepInputs("cpu").prefetch is False  # on a CPU the threads would compete with the model's


# ----------------------------------------------------------------------------- precision


def test_bf16_keeps_every_contribution_within_c(vit, tmp_path):
    """bf16 autocast in the backbone, the clipping in full precision: each sample alone (a chunk of one)
    contributes at most C, with C small enough that every sample is clipped."""
    x_u8, y = colour_images(6, 3, seed=5, tmp_path=tmp_path, name="bf16")
    from dpcl.features import preprocess_batch

    x = preprocess_batch(x_u8, PRE)
    member = pretrained_member(vit, 3)
    g = torch.Generator().manual_seed(0)
    member = FilmMember(member.film, torch.randn(member.weight.shape, generator=g), member.bias)
    clip = 1e-3
    with film_net(vit, member, device="cpu", trainable=True) as net:
        net.train()
        params = [p for p in net.parameters() if p.requires_grad]
        with private_training(net.backbone):
            gsm = film_grad_sample_module(net.backbone)
            try:
                for i in range(len(y)):
                    sums, norms = clipped_grad_sum(
                        gsm,
                        net.head,
                        params,
                        x[i : i + 1],
                        torch.as_tensor(y[i : i + 1]),
                        clip=clip,
                        precision="bf16",
                    )
                    assert all(s.dtype == torch.float32 for s in sums)
                    total = math.sqrt(sum(float((s.double() ** 2).sum()) for s in sums))
                    assert float(norms[0]) > clip and total <= clip, (total, float(norms[0]))
                    assert total == pytest.approx(clip, rel=1e-5)
            finally:
                gsm.cleanup()


def test_bf16_trains_and_differs_from_fp32(vit, tmp_path):
    x, y = colour_images(16, 3, seed=6, tmp_path=tmp_path, name="bf16run")
    a, _ = _train(vit, x, y, prefetch=False)
    b, info = _train(vit, x, y, prefetch=False, precision="bf16")
    assert all(np.isfinite(v).all() for v in b.values())
    assert any(not np.array_equal(a[k], b[k]) for k in a)  # the passes really ran in bfloat16
    assert info["steps"] == CFG.steps


def test_precision_refuses_tf32_off_cuda_and_unknown_modes(vit, tmp_path):
    with pytest.raises(ValueError, match="tf32 is a CUDA mode"):
        check_precision("tf32", "cpu")
    with pytest.raises(ValueError, match=r"film.precision must be one of \['fp32', 'tf32', 'bf16'\]"):
        check_precision("fp16", "cpu")
    x, y = colour_images(4, 3, seed=7, tmp_path=tmp_path, name="tf32")
    with pytest.raises(ValueError, match="tf32 is a CUDA mode"):
        _train(vit, x, y, prefetch=False, precision="tf32")
