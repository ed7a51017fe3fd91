import numpy as np
import pytest

from dpcl.learners.cosine import CosineClassifier, cosine_sigma, normalize_rows
from dpcl.privacy.gaussian import gaussian_sigma


def test_sums_not_means_of_unit_features():
    gen = np.random.default_rng(0)
    x = gen.normal(size=(7, 5)) * 10
    y = np.array([0, 0, 0, 1, 1, 1, 1])
    clf = CosineClassifier(3, 5)
    clf.update(x, y, [0, 1], sigma=0.0, rng=gen)
    xn = x / np.linalg.norm(x, axis=1, keepdims=True)
    assert np.allclose(clf.sums[0], xn[:3].sum(0))  # a sum of unit vectors, not a mean
    assert np.allclose(clf.sums[1], xn[3:].sum(0))
    assert np.all(clf.sums[2] == 0) and not clf.seen[2]


def test_noise_on_every_label_of_the_space_including_labels_without_data():
    x = np.ones((4, 3))
    y = np.array([0, 0, 1, 1])
    sigma = 2.0
    clf = CosineClassifier(4, 3)
    clf.update(x, y, [0, 1, 2], sigma, np.random.default_rng(42))
    noise = np.random.default_rng(42).standard_normal((3, 3), dtype=np.float32) * np.float32(
        sigma
    )  # sorted rows
    xn = normalize_rows(x)
    assert np.allclose(clf.sums[0], xn[:2].sum(0) + noise[0])
    assert np.allclose(clf.sums[1], xn[2:].sum(0) + noise[1])
    assert np.allclose(clf.sums[2], noise[2])  # label 2 has no data but gets noise
    assert np.all(clf.sums[3] == 0)  # label 3 is outside O_t: untouched
    assert clf.seen.tolist() == [True, True, True, False]


def test_noise_scale_is_sigma():
    clf = CosineClassifier(2000, 50)
    sigma = cosine_sigma(1.0, 1e-5)
    assert sigma == gaussian_sigma(1.0, 1e-5)
    clf.update(np.zeros((0, 50)), np.zeros(0, dtype=int), range(2000), sigma, np.random.default_rng(1))
    n = clf.sums.size
    sd = clf.sums.std()
    # sample sd of n normals: relative standard error sqrt(1/(2n)); allow 5 of them
    assert abs(sd / sigma - 1) < 5 * np.sqrt(1 / (2 * n))


def test_rejects_labels_outside_the_space():
    clf = CosineClassifier(3, 2)
    with pytest.raises(ValueError, match="outside"):
        clf.update(np.ones((1, 2)), np.array([2]), [0, 1], 0.0, np.random.default_rng(0))


def test_predict_matches_brute_force_and_blocking():
    gen = np.random.default_rng(3)
    clf = CosineClassifier(300, 16)
    clf.update(gen.normal(size=(500, 16)), gen.integers(0, 100, 500), range(300), 0.5, gen)
    x = gen.normal(size=(257, 16))
    protos = clf.sums / np.linalg.norm(clf.sums, axis=1, keepdims=True)
    brute = (normalize_rows(x) @ protos.T).argmax(1)
    assert np.array_equal(clf.predict(x), brute)
    # tiny blocks: several row and label blocks with a running top-1
    assert np.array_equal(clf.predict(x, max_block_bytes=4 * 64), brute)


def test_zero_prototypes_never_win_and_unseen_labels_are_excluded():
    clf = CosineClassifier(5, 2)
    clf.update(np.array([[-1.0, -0.1]]), np.array([0]), [0, 1], 0.0, np.random.default_rng(0))
    # label 1 has a zero sum (non-private, no data): it must not win even though the
    # cosine with label 0 is negative; labels 2-4 were never in any O_t.
    assert clf.predict(np.array([[1.0, 0.0]])).tolist() == [0]


def test_empty_label_space_predicts_nothing_correctly():
    clf = CosineClassifier(3, 2)
    clf.update(np.zeros((0, 2)), np.zeros(0, dtype=int), [], 1.0, np.random.default_rng(0))
    assert clf.predict(np.ones((4, 2))).tolist() == [-1] * 4


@pytest.mark.parametrize("screen", ["fp32", "bf16"])
def test_two_pass_prediction_is_the_exact_argmax_even_for_near_ties(screen):
    """Prototypes 1e-3 apart in angle: far inside bfloat16's error, so the exact rescoring decides."""
    g = np.random.default_rng(5)
    base = g.normal(size=(40, 32))
    protos = np.repeat(base, 50, axis=0) + 1e-3 * g.normal(size=(2000, 32))  # 50 near-copies each
    clf = CosineClassifier(2000, 32)
    clf.sums[:] = protos.astype(np.float32)
    clf.seen[:] = True
    x = np.repeat(base, 5, axis=0) + 0.3 * g.normal(size=(200, 32))
    p = clf.sums.astype(np.float64)
    p /= np.linalg.norm(p, axis=1, keepdims=True)
    xn = normalize_rows(x)
    brute = (xn @ p.T).argmax(1)
    got = clf.predict(x, max_block_bytes=1 << 14, screen=screen)  # many small blocks
    assert np.array_equal(got, brute)
    # zero features tie every label: the smallest seen label wins, like argmax over zeros
    x[3] = 0
    got = clf.predict(x, screen=screen)
    assert got[3] == 0 and np.array_equal(np.delete(got, 3), np.delete(brute, 3))


def test_screening_error_bound_holds_for_bfloat16():
    torch = pytest.importorskip("torch")
    from dpcl.learners.cosine import _screen_error

    g = np.random.default_rng(6)
    x = normalize_rows(g.normal(size=(300, 768))).astype(np.float32)
    p = normalize_rows(g.normal(size=(2000, 768)) + 5 * x[g.integers(0, 300, 2000)]).astype(np.float32)
    low = (torch.from_numpy(x).bfloat16() @ torch.from_numpy(p).bfloat16().T).float().numpy()
    exact = x.astype(np.float64) @ p.astype(np.float64).T
    assert (
        np.abs(low - exact).max() <= _screen_error("bf16", 768) / 1.25
    )  # the bound holds without its 25 % slack
