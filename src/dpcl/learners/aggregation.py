"""Ensemble aggregation rules for the PEFT ensemble ([LabelSpace] Eq. 11, App. D.2).

Each member l has logits over its own output space O_l.

- ``argmax`` (Eq. 11): the label of the largest logit over all members and labels.
- ``median`` (Eq. A101): first subtract each member's median logit, so members with
  overconfident offsets do not win by scale alone.
- ``entropy`` ([Zhao2024], "SAFE", Eq. 11, γ = 1 as in App. D.2): per test input,
  member l gets weight w_l = softmax_l(−γ H_l) with H_l the entropy of softmax(z_l) over
  O_l, and the ensemble scores label y by Σ_{l : y ∈ O_l} w_l z_{l,y}. SAFE combines two
  learners over one label space (a weighted sum of their logits); with members over
  different spaces a label scores only from the members that hold it (their logits
  zero-padded to the union), which reduces to SAFE's rule when all spaces coincide.
  Members with an empty output space take no part. (Formula read from SAFE's code:
  entropy −Σ p log(p + 1e-9), weights softmax(−γ·H) across learners.)

All rules are post-processing of the released members: evaluating several of them costs
no privacy.
"""

from __future__ import annotations

import numpy as np

from ..sorted_ints import sorted_distinct, sorted_union

RULES = ("argmax", "median", "entropy")


def _softmax(z: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def entropy(z: np.ndarray) -> np.ndarray:
    """Entropy (nats) of softmax(z) per row; the 1e-9 guard is SAFE's."""
    p = _softmax(z, axis=1)
    return -(p * np.log(p + 1e-9)).sum(axis=1)


def median_rows(a: np.ndarray, *, nan_rows: np.ndarray) -> np.ndarray:
    """``np.median(a, axis=1, keepdims=True)`` of a 2-D float array, bit for bit, partitioning
    ``a`` in place (its rows are reordered). ``nan_rows``: the rows that hold a NaN (their median
    is NaN). NumPy's median partitions at two or three indices at once (the middle pair and the
    last, for NaNs), a slower path than a partition at one index; the lower middle value is then the
    largest one below the upper."""
    h = a.shape[1] // 2
    a.partition(h, axis=1)
    if a.shape[1] % 2:
        pair = a[:, h : h + 1]
    else:
        pair = np.concatenate([a[:, :h].max(axis=1, keepdims=True), a[:, h : h + 1]], axis=1)
    med = pair.mean(axis=1, keepdims=True)  # as np.median: the mean of the middle value(s)
    med[nan_rows] = np.nan
    return med


def _entropy_aggregate(
    member_logits: list[np.ndarray], member_labels: list[np.ndarray], gamma: float
) -> np.ndarray:
    live = [
        (z, np.asarray(lab, dtype=np.int64))
        for z, lab in zip(member_logits, member_labels, strict=True)
        if z.shape[1] > 0
    ]
    n = member_logits[0].shape[0]
    if not live:
        return np.full(n, -1, dtype=np.int64)
    h = np.stack([entropy(z) for z, _ in live], axis=1)  # n × members
    w = _softmax(-gamma * h, axis=1)
    union = sorted_distinct(np.concatenate([lab for _, lab in live]))
    score = np.zeros((n, union.size))
    for k, (z, lab) in enumerate(live):
        cols = np.searchsorted(union, lab)
        # a member's labels are distinct (O_l is a set): plain indexing
        if sorted_distinct(cols).size == cols.size:
            score[:, cols] += w[:, k : k + 1] * z
        else:  # repeated labels add up (np.add.at, the slower path, only here)
            np.add.at(score, (slice(None), cols), w[:, k : k + 1] * z)
    return union[score.argmax(axis=1)]


def aggregate(
    member_logits: list[np.ndarray], member_labels: list[np.ndarray], rule: str = "argmax", gamma: float = 1.0
) -> np.ndarray:
    """Predicted labels from per-member logits (n × |O_l|) and label ids (|O_l|); −1 if no member has outputs."""
    if rule not in RULES:
        raise ValueError(f"unknown aggregation rule {rule!r}; allowed: {list(RULES)}")
    if not member_logits:
        raise ValueError("no ensemble members")
    if rule == "entropy":
        return _entropy_aggregate(member_logits, member_labels, gamma)
    n = member_logits[0].shape[0]
    best = np.full(n, -np.inf)
    pred = np.full(n, -1, dtype=np.int64)
    for z, labels in zip(member_logits, member_labels, strict=True):
        if z.shape[1] == 0:
            continue
        if rule == "median":
            z = z - np.median(z, axis=1, keepdims=True)
        j = z.argmax(axis=1)
        s = z[np.arange(n), j]
        better = s > best
        best[better] = s[better]
        pred[better] = np.asarray(labels)[j[better]]
    return pred


#: :class:`EnsembleVotes` works through a member's logits in blocks of rows of about this many values
#: (512 KiB of float64), so that the chain of elementwise steps on a block stays in the core's cache
#: instead of streaming n × |O_l| arrays through memory once per step (about twice as fast at 10^5 labels)
BLOCK_VALUES = 1 << 16


class EnsembleVotes:
    """Every rule's predictions on one test set while members join one at a time.

    ``predict(rule)`` after members 0..t were added equals ``aggregate(their logits, their
    labels, rule)``, but each member's logits are processed once instead of at every later
    task (the PEFT ensemble evaluates after every task: T(T + 1)/2 member-test-set pairs, not
    ~T³/3 aggregations over the union of the label spaces, which is 200,000 labels wide for
    Public Labels ×1000 on ImageNet-R). ``argmax`` and ``median`` keep the best (score, label)
    per sample, earlier members winning ties as in :func:`aggregate`; ``entropy`` keeps the
    union-wide score Σ_l exp(−γ H_l) z_l, SAFE's softmax weights without their per-sample
    normaliser, which scales every label of a sample alike and so never changes its argmax.
    Every step is row by row, so a member's logits are processed in blocks of rows (``block``
    values at most per block, at least one row; :data:`BLOCK_VALUES`) with the same values bit
    for bit as in one piece.
    """

    def __init__(self, n: int, gamma: float = 1.0, *, block: int = BLOCK_VALUES) -> None:
        self.n, self.gamma, self.block = int(n), float(gamma), int(block)
        self._best = {r: np.full(self.n, -np.inf) for r in ("argmax", "median")}
        self._pred = {r: np.full(self.n, -1, dtype=np.int64) for r in ("argmax", "median")}
        self._union = np.zeros(0, dtype=np.int64)
        self._score = np.zeros((self.n, 0))
        self._scratch: dict[str, np.ndarray] = {}

    def _buffer(self, key: str, rows: int, like: np.ndarray) -> np.ndarray:
        """A scratch array of ``rows`` rows of ``like``'s width and dtype, kept between calls (a fresh
        array per intermediate result costs more in page faults than the arithmetic on it)."""
        buf = self._scratch.get(key)
        shape = (rows, like.shape[1])
        if buf is None or buf.shape[1:] != shape[1:] or buf.shape[0] < rows or buf.dtype != like.dtype:
            buf = self._scratch[key] = np.empty(shape, dtype=like.dtype)
        return buf[:rows]

    def _vote(self, rule: str, rows: slice, z: np.ndarray, labels: np.ndarray) -> np.ndarray:
        """Keep the best (score, label) of samples ``rows``; returns the scores of this member's best labels."""
        j = z.argmax(axis=1)
        s = z[np.arange(len(z)), j]
        best, pred = self._best[rule][rows], self._pred[rule][rows]  # views: updated in place
        better = s > best
        best[better] = s[better]
        pred[better] = labels[j[better]]
        return s

    def _columns(self, labels: np.ndarray) -> np.ndarray | None:
        """The union's columns of ``labels``, growing the union (sorted; the scores move along) where they
        are new; None when ``labels`` is the union itself, in order (Public Labels: every task)."""
        if labels.size == self._union.size and np.array_equal(labels, self._union):
            return None
        cols = np.searchsorted(self._union, labels)
        inside = cols < self._union.size
        inside[inside] = self._union[cols[inside]] == labels[inside]
        if not inside.all():
            union = sorted_union(self._union, labels)
            grown = np.zeros((self.n, union.size))
            grown[:, np.searchsorted(union, self._union)] = self._score
            self._union, self._score = union, grown
            cols = np.searchsorted(self._union, labels)
        return cols

    def add(self, logits: np.ndarray, labels: np.ndarray) -> None:
        z = np.asarray(logits)  # float32 logits stay float32, as aggregate() computes with them
        if not np.issubdtype(z.dtype, np.floating):
            z = z.astype(float)
        labels = np.asarray(labels, dtype=np.int64)
        if z.shape != (self.n, labels.size):
            raise ValueError(
                f"logits of shape {z.shape} do not fit {self.n} samples and {labels.size} labels"
            )
        if labels.size == 0:  # an empty output space takes no part
            return
        cols = self._columns(labels)
        distinct = cols is None or labels.size < 2 or bool(np.all(np.diff(labels) > 0))
        step = max(1, self.block // labels.size)
        for r0 in range(0, self.n, step):
            rows = slice(r0, min(r0 + step, self.n))
            self._add_rows(rows, z[rows], labels, cols, distinct)

    def _add_rows(
        self, rows: slice, z: np.ndarray, labels: np.ndarray, cols: np.ndarray | None, distinct: bool
    ) -> None:
        # The same arithmetic as aggregate() and entropy(), in place in two scratch arrays: every
        # intermediate result holds the same values as theirs, bit for bit (a test compares them)
        zmax = self._vote("argmax", rows, z, labels)[:, None]  # = z.max(axis=1): the value at its argmax
        a = self._buffer("a", len(z), z)
        np.copyto(a, z)
        np.subtract(z, median_rows(a, nan_rows=np.isnan(zmax[:, 0])), out=a)
        self._vote("median", rows, a, labels)
        np.subtract(z, zmax, out=a)  # entropy(z): p = softmax(z), H = -Σ p log(p + 1e-9)
        np.exp(a, out=a)
        np.divide(a, a.sum(axis=1, keepdims=True), out=a)
        b = self._buffer("b", len(z), z)
        np.add(a, 1e-9, out=b)
        np.log(b, out=b)
        np.multiply(a, b, out=b)
        w = np.exp(-self.gamma * -b.sum(axis=1))
        np.multiply(w[:, None], z, out=a)  # this member's contribution to the union-wide score
        if cols is None:
            self._score[rows] += a
        elif distinct:  # distinct labels: plain indexing
            self._score[rows, cols] += a
        else:  # repeated labels add up
            np.add.at(self._score, (rows, cols), a)

    def predict(self, rule: str = "argmax") -> np.ndarray:
        if rule not in RULES:
            raise ValueError(f"unknown aggregation rule {rule!r}; allowed: {list(RULES)}")
        if rule == "entropy":
            if self._union.size == 0:
                return np.full(self.n, -1, dtype=np.int64)
            return self._union[self._score.argmax(axis=1)]
        return self._pred[rule].copy()
