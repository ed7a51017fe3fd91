"""The workflow's JSON writer: byte for byte the standard library's indented JSON after the
non-finite floats are replaced by strings (every released file is compared byte for byte
between runs, so a faster writer must not change a byte)."""

import json
import math
from pathlib import Path

import numpy as np
import pytest

from dpcl import io


def _standard(obj):
    return json.dumps(io._clean(obj), indent=1, default=io._json_default)


CASES = [
    {},
    [],
    {"a": [], "b": {}, "c": [[]], "d": [{}]},
    0,
    -3,
    1.5,
    "x",
    None,
    True,
    False,
    'ünï "q"\n\t\\',
    {"x": [1, 2, 3], "y": [1.0, math.inf, math.nan, -math.inf], "z": (1, "a", None)},
    {1: "a", 2.5: "b", None: 4, math.inf: 5, "k": np.int64(3), "f": np.float32(0.1)},
    {True: 3, False: 0},
    {
        "arr": np.arange(5),
        "m": np.zeros((2, 3), np.float32),
        "a0": np.array(3.5),
        "a1": np.array(7),
        "p": Path("/x/y"),
    },
    [1, True, 2],
    [1.0, 2],
    [np.int64(1), 2],
    [1.0, np.float64(2.0)],
    [[1, 2], [3.0]],
    {"empty": np.array([], dtype=int)},
    {"nested": {"deep": [{"a": [1, [2, [3, {}]]]}]}},
    [math.nan],
    [1e300, 1e-300, -0.0, 0.1 + 0.2, 2.0**70],
    list(range(-5, 300)),
    [float(x) for x in np.random.default_rng(0).normal(size=200)],
]


@pytest.mark.parametrize("obj", CASES, ids=range(len(CASES)))
def test_json_text_is_the_standard_librarys_indented_json(obj, tmp_path):
    assert io.json_text(obj) == _standard(obj)
    io.write_json(tmp_path / "a.json", obj)
    assert (tmp_path / "a.json").read_text() == _standard(obj) + "\n"


@pytest.mark.parametrize("bad", [{np.int64(1): 2}, {"x": {1, 2}}, {"x": np.bool_(True)}, {(1, 2): 3}])
def test_json_text_refuses_what_the_standard_library_refuses(bad):
    with pytest.raises(TypeError):
        _standard(bad)
    with pytest.raises(TypeError):
        io.json_text(bad)


def test_random_nested_documents_match():
    rng = np.random.default_rng(3)

    def draw(depth):
        kind = int(rng.integers(0, 8 if depth < 4 else 4))
        if kind == 0:
            return int(rng.integers(-(10**12), 10**12))
        if kind == 1:
            return float(
                rng.choice([rng.normal() * 10.0 ** int(rng.integers(-20, 20)), math.inf, -math.inf, math.nan])
            )
        if kind == 2:
            return str(rng.choice(["", "a", "é", "\u2603", '"', "\\"]))
        if kind == 3:
            return [None, True, False][int(rng.integers(0, 3))]
        if kind in (4, 5):
            return [draw(depth + 1) for _ in range(int(rng.integers(0, 5)))]
        if kind == 6:
            return {str(rng.integers(0, 99)): draw(depth + 1) for _ in range(int(rng.integers(0, 5)))}
        return rng.normal(size=int(rng.integers(0, 4))).astype(rng.choice([np.float32, np.float64]))

    for _ in range(300):
        obj = draw(0)
        assert io.json_text(obj) == _standard(obj)
