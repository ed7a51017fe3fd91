"""What a FiLM DP-SGD step reads from the host: a Poisson sample's images in physical chunks, decoded,
resized and normalised (:func:`dpcl.features.preprocess_batch`) and on the device, and the step's
Gaussian noise, drawn as one buffer.

With ``prefetch`` (on by default where the model is on a CUDA device) both are prepared in background
threads while the device computes: the next chunk one ahead of the current one, the step's noise while
its chunks are processed. On CUDA the prepared tensors are in pinned host memory and are copied
without blocking. Nothing about the release changes: the Poisson sample is drawn by the caller before
any chunk is prepared, the chunks are handed out in the sample's order, the noise generator is used by
the noise alone, one draw at a time and in step order, so a run's bits are the same with and without
prefetching (tested). On a CPU the threads would compete with the model's own for the same cores,
so prefetching is off there unless asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import torch

from ..backbones import Preprocessing
from ..features import preprocess_batch


def gaussian_noise_like(
    tensors: list[torch.Tensor], std: float, generator: torch.Generator, *, pin: bool = False
) -> list[torch.Tensor]:
    """N(0, std²) noise shaped like ``tensors``: one draw of their total size from ``generator`` on the
    CPU (device-independent), split in their order and moved to their device and dtype (from pinned
    memory without blocking when ``pin``)."""
    sizes = [t.numel() for t in tensors]
    flat = torch.randn(sum(sizes), generator=generator, dtype=torch.float32)
    flat *= std
    if pin:
        flat = flat.pin_memory()
    return [
        z.view(t.shape).to(t.device, t.dtype, non_blocking=pin)
        for z, t in zip(flat.split(sizes), tensors, strict=True)
    ]


class StepInputs:
    """The host side of a FiLM training run's steps on ``device``: :meth:`chunks` and :meth:`noise`,
    prepared ahead in background threads when ``prefetch`` (None: on a CUDA device only). Use it as a
    context manager (its threads end on exit)."""

    def __init__(self, device, *, prefetch: bool | None = None) -> None:
        self.device = torch.device(device)
        self.prefetch = self.device.type == "cuda" if prefetch is None else bool(prefetch)
        self.pin = self.device.type == "cuda"
        # one thread for the chunks (in order) and one for the noise: neither waits for the other
        self._chunk_pool = ThreadPoolExecutor(1, "film-chunks") if self.prefetch else None
        self._noise_pool = ThreadPoolExecutor(1, "film-noise") if self.prefetch else None

    def __enter__(self) -> StepInputs:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for pool in (self._chunk_pool, self._noise_pool):
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)

    def _host_chunk(self, images: np.ndarray, rows: np.ndarray, idx: np.ndarray, pre: Preprocessing):
        x = preprocess_batch(images[idx], pre)
        y = torch.as_tensor(rows[idx])
        return (x.pin_memory(), y.pin_memory()) if self.pin else (x, y)

    def _to_device(self, xy) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = xy
        return x.to(self.device, non_blocking=self.pin), y.to(self.device, non_blocking=self.pin)

    def chunks(
        self,
        images: np.ndarray,
        rows: np.ndarray,
        batch: np.ndarray,
        *,
        pre: Preprocessing,
        physical_batch: int,
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """(images, labels) of ``batch`` (indices into ``images`` and ``rows``) on the device, in order, at
        most ``physical_batch`` at a time; with prefetching, the next chunk is prepared while the caller
        works on this one."""
        parts = [batch[s : s + physical_batch] for s in range(0, batch.size, physical_batch)]
        if self._chunk_pool is None:
            for idx in parts:
                yield self._to_device(self._host_chunk(images, rows, idx, pre))
            return
        pending: Future | None = None
        for i in range(len(parts)):
            if pending is None:
                pending = self._chunk_pool.submit(self._host_chunk, images, rows, parts[i], pre)
            ready = pending.result()
            pending = (
                self._chunk_pool.submit(self._host_chunk, images, rows, parts[i + 1], pre)
                if i + 1 < len(parts)
                else None
            )
            yield self._to_device(ready)

    def noise(
        self,
        tensors: list[torch.Tensor],
        std: float,
        generator: torch.Generator,
        draw: Callable[..., list[torch.Tensor]] | None = None,
    ) -> Callable[[], list[torch.Tensor]]:
        """Start drawing a step's N(0, std²) noise shaped like ``tensors`` (``draw``, default
        :func:`gaussian_noise_like`); returns the function that waits for it. Call it once per step, in
        step order, and collect each draw before starting the next."""
        draw = draw or gaussian_noise_like
        if self._noise_pool is None:
            z = draw(tensors, std, generator)
            return lambda: z
        kw = {"pin": True} if self.pin else {}
        pending = self._noise_pool.submit(draw, tensors, std, generator, **kw)
        return pending.result
