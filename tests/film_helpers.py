"""What the FiLM tests share: a tiny random-init timm ViT (32 px, patch 8, depth 2; the ``vit`` fixture,
in tests/conftest.py) and easy colour-coded image tasks written as idx files (the
on-disk format of the image datasets) and read back."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dpcl.backbones import Preprocessing
from dpcl.data.datasets import read_idx, write_idx
from dpcl.seeding import rng
from dpcl.training.film_model import film_parameter_names

timm = pytest.importorskip("timm")

DEPTH, DIM, SIZE = 2, 192, 32
PRE = Preprocessing(image_size=SIZE, mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5), channels_last=False)


def make_vit():
    """A small random-init ViT (seeded) without classifier: 2 blocks of width 192 (the ``vit`` fixture
    of tests/conftest.py)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = timm.create_model(
            "vit_tiny_patch16_224", img_size=SIZE, patch_size=8, depth=DEPTH, pretrained=False, num_classes=0
        )
    return model.eval()


def colour_images(n: int, n_classes: int, seed: int, tmp_path, name: str) -> tuple[np.ndarray, np.ndarray]:
    """An easy task: class c has channel c bright on a random background; round-trips through idx files."""
    g = rng(seed, "film-test-images", name)
    y = g.integers(0, n_classes, n)
    x = g.integers(0, 256, (n, SIZE, SIZE, 3)).astype(np.uint8)
    for i in range(n):
        x[i, :, :, y[i] % 3] = g.integers(180, 256, (SIZE, SIZE))
    write_idx(tmp_path / f"{name}-images-idx4-ubyte", x)
    write_idx(tmp_path / f"{name}-labels-idx1-ubyte", y.astype(np.uint8))
    return read_idx(tmp_path / f"{name}-images-idx4-ubyte"), read_idx(
        tmp_path / f"{name}-labels-idx1-ubyte"
    ).astype(np.int64)


def film_state(vit) -> dict[str, torch.Tensor]:
    params = dict(vit.named_parameters())
    return {n: params[n].detach().clone() for n in film_parameter_names(vit)}
