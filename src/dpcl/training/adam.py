"""Adam ([Kingma2015]), bias-corrected, in place on numpy arrays: the heads' optimiser.

Every head-only learner divides its privatized gradient sum by a public constant (``normaliser``, never
the realised batch size) and takes this step; the arithmetic is in place with one scratch array per
parameter, so a step allocates nothing.
"""

from __future__ import annotations

import numpy as np

#: elements per block of a flat parameter array's update: the same elementwise operations in the same
#: order as over the whole array (the same bits), with a block's five float64 arrays (1.25 MB) kept in
#: cache across the update's 14 passes (wide heads: benchmarks/README.md)
BLOCK = 32_768


class Adam:
    """Adam over ``params`` (updated in place): ``step(grads)`` consumes (overwrites) the gradients."""

    def __init__(
        self,
        params: list[np.ndarray],
        *,
        lr: float,
        betas: tuple[float, float],
        eps: float,
        normaliser: float = 1.0,
    ) -> None:
        self.params = params
        self.lr, (self.b1, self.b2), self.eps, self.normaliser = lr, betas, eps, normaliser
        self.m = [np.zeros_like(p) for p in params]
        self.v = [np.zeros_like(p) for p in params]
        self._tmp = [np.empty_like(p) for p in params]
        self.t = 0

    @classmethod
    def for_head(cls, head, cfg) -> Adam:
        """Adam over a linear head's weight and bias (its one flat buffer, ``head.params``: one pass a step)
        with a DPSGDConfig's lr, betas, eps and normaliser."""
        return cls([head.params], lr=cfg.lr, betas=cfg.betas, eps=cfg.adam_eps, normaliser=cfg.normaliser)

    def step(self, grads: list[np.ndarray]) -> None:
        """One step with the gradient sums ``grads``, one per parameter array (divided by the normaliser
        here; overwritten). Over one flat parameter array, ``grads`` may also be its parts in order (a
        head's weight and bias gradients): they are joined into a new array first (the same update, every
        operation elementwise). A flat array longer than :data:`BLOCK` is updated block by block (bit
        for bit the same)."""
        if len(grads) != len(self.params) and len(self.params) == 1:
            grads = [np.concatenate([g.ravel() for g in grads])]
        self.t += 1
        b1, b2 = self.b1, self.b2
        c1, c2 = 1.0 - b1**self.t, 1.0 - b2**self.t
        for p, g, m, v, tmp in zip(self.params, grads, self.m, self.v, self._tmp, strict=True):
            if (
                p.ndim == 1 and p.size > BLOCK and g.shape == p.shape
            ):  # block by block, each block in cache through all 14 passes
                for s in range(0, p.size, BLOCK):
                    e = s + BLOCK
                    self._update(p[s:e], g[s:e], m[s:e], v[s:e], tmp[s:e], c1, c2)
            else:
                self._update(p, g, m, v, tmp, c1, c2)

    def _update(self, p, g, m, v, tmp, c1: float, c2: float) -> None:
        b1, b2 = self.b1, self.b2
        g /= self.normaliser
        np.multiply(g, 1.0 - b1, out=tmp)
        m *= b1
        m += tmp
        g *= g
        g *= 1.0 - b2
        v *= b2
        v += g
        np.divide(v, c2, out=tmp)
        np.sqrt(tmp, out=tmp)
        tmp += self.eps
        np.divide(m, tmp, out=tmp)
        tmp *= self.lr / c1
        p -= tmp
