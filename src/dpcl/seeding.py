"""Deterministic, independent random streams per (seed, stage, task, mechanism).

One ``numpy.random.SeedSequence`` per run, spawned by *named* keys rather
than by position, so adding or removing a setting never shifts another setting's
noise. Keys are hashed (SHA-256) into the ``spawn_key`` of the sequence.
"""

from __future__ import annotations

import hashlib

import numpy as np


def _key_to_int(key: object) -> int:
    digest = hashlib.sha256(repr(key).encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "little")


def seed_sequence(seed: int, *keys: object) -> np.random.SeedSequence:
    """SeedSequence for ``seed`` and a path of keys, e.g. ``(3, "cosine", "eps1", "task", 2)``."""
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return np.random.SeedSequence(entropy=int(seed), spawn_key=tuple(_key_to_int(k) for k in keys))


def rng(seed: int, *keys: object) -> np.random.Generator:
    """A PCG64 generator for ``seed`` and ``keys`` (see :func:`seed_sequence`)."""
    return np.random.Generator(np.random.PCG64(seed_sequence(seed, *keys)))
