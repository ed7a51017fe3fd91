"""The default's results table (Table A3 layout): its caption counts the seeds in plain English."""

from __future__ import annotations

import pytest

from dpcl.report.tables import summarise, table_a3


def _records(seeds: int) -> list[dict]:
    return [
        {
            "learner": "cosine",
            "epsilon": "1",
            "label_method": "oracle",
            "final_accuracy": 0.5 + 0.01 * s,
            "final_forgetting": 0.1,
            "released_labels": [2, 4],
        }
        for s in range(seeds)
    ]


@pytest.mark.parametrize(("seeds", "phrase"), [(1, "over 1 seed:"), (3, "over 3 seeds:")])
def test_caption_pluralises_the_seeds(seeds, phrase):
    table = table_a3(summarise(_records(seeds), "split_fmnist"), ["oracle"], "t")
    assert phrase in table.notes[0]
