"""A FiLM member's predictions: its values swapped into the shared backbone
(:func:`dpcl.training.film_member.film_net`), the images preprocessed as the backbone expects."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch

from ..backbones import Preprocessing
from ..features import preprocess_batch
from .film_member import FilmMember, film_net


def film_logits(
    backbone,
    member: FilmMember,
    images: np.ndarray,
    pre: Preprocessing,
    batch_size: int = 128,
    device: str = "auto",
) -> np.ndarray:
    """Logits (n × |O_t|, float32) of one member, its FiLM values swapped into the shared backbone."""
    return next(film_logits_each(backbone, member, [images], pre, batch_size, device))


def film_logits_each(
    backbone,
    member: FilmMember,
    image_sets: list[np.ndarray],
    pre: Preprocessing,
    batch_size: int = 128,
    device: str = "auto",
) -> Iterator[np.ndarray]:
    """:func:`film_logits` of one member on each image set in turn, its values swapped in once
    (one set's logits in memory at a time: 100,000 labels × 1,000 images is 400 MB)."""
    with film_net(backbone, member, device=device) as net, torch.inference_mode():
        net.eval()
        dev = net.head.weight.device
        for images in image_sets:
            images = np.asarray(images)
            out = np.empty((len(images), member.n_out), dtype=np.float32)
            for start in range(0, len(images), batch_size):
                x = preprocess_batch(images[start : start + batch_size], pre).to(dev)
                out[start : start + len(x)] = net(x).float().cpu().numpy()
            yield out
