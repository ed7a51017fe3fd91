"""How a sweep rule's outputs map to runs (dpcl.stages.common.runs_by_learner): learner-major,
then label files; with ``requested``, each learner only on the label files it runs (Naive and
Non-CL on the baseline label methods only), so no job trains an unrequested run."""

from __future__ import annotations

import pytest

from dpcl.stages.common import runs_by_learner

LABELS = ["eps1/base.json", "eps1/public-x1000.json", "eps8/base.json"]


def _outputs(pairs, kind):
    return [f"{learner}/{lab.replace('.json', '')}/{kind}.json" for learner, lab in pairs]


def test_rectangle_by_default():
    learners = ["peft_head", "naive_head"]
    pairs = [(learner, lab) for learner in learners for lab in LABELS]
    runs = runs_by_learner(LABELS, *(_outputs(pairs, k) for k in ("m", "p", "d")), learners)
    assert [r["labels"] for r in runs] == LABELS
    assert runs[1]["outputs"]["naive_head"] == (
        "naive_head/eps1/public-x1000/m.json",
        "naive_head/eps1/public-x1000/p.json",
        "naive_head/eps1/public-x1000/d.json",
    )


def test_requested_learners_per_label_file():
    learners = ["peft_head", "naive_head", "noncl_head"]
    requested = [learners, ["peft_head"], learners]  # the baselines skip Public x1000
    pairs = [
        (learner, lab)
        for learner in learners
        for lab, req in zip(LABELS, requested, strict=True)
        if learner in req
    ]
    runs = runs_by_learner(LABELS, *(_outputs(pairs, k) for k in ("m", "p", "d")), learners, requested)
    assert [sorted(r["outputs"]) for r in runs] == [sorted(learners), ["peft_head"], sorted(learners)]
    for run in runs:  # every output lands on its own (learner, label file)
        for learner, paths in run["outputs"].items():
            stem = run["labels"].replace(".json", "")
            assert paths == tuple(f"{learner}/{stem}/{k}.json" for k in ("m", "p", "d"))


def test_mismatches_are_refused():
    learners = ["peft_head", "naive_head"]
    pairs = [(learner, lab) for learner in learners for lab in LABELS]
    outs = [_outputs(pairs, k) for k in ("m", "p", "d")]
    with pytest.raises(ValueError, match="outputs for 4"):
        runs_by_learner(LABELS, *outs, learners, [learners, ["peft_head"], ["peft_head"]])
    with pytest.raises(ValueError, match="learner lists for 3"):
        runs_by_learner(LABELS, *outs, learners, [learners])
    with pytest.raises(ValueError, match="not among"):
        runs_by_learner(LABELS, *outs, learners, [learners, learners, ["agem_head"]])
