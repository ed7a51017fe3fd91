import pytest

from dpcl.training.grid_search import grid_search


def test_every_point_is_scored_in_order_and_a_tie_goes_to_the_earlier_point():
    points = [{"a": 1}, {"a": 2}, {"a": 3}, {"a": 4}]
    seen = []

    def score(p):
        seen.append(p["a"])
        return {1: 0.5, 2: 0.75, 3: 0.75, 4: 0.25}[p["a"]]

    best, trials = grid_search(points, score)
    assert seen == [1, 2, 3, 4]
    assert best == {"a": 2, "accuracy": 0.75}
    assert trials == [
        {"a": 1, "accuracy": 0.5},
        {"a": 2, "accuracy": 0.75},
        {"a": 3, "accuracy": 0.75},
        {"a": 4, "accuracy": 0.25},
    ]
    assert points[0] == {"a": 1}  # the caller's points are not changed


def test_an_empty_grid_is_refused():
    with pytest.raises(ValueError, match="no point"):
        grid_search([], lambda p: 1.0)
