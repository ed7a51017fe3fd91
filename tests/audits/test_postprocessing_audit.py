"""The post-processing check (dpcl.audits.postprocessing, dpcl.stages.exposure) and what the release part
of the audit sees of a run as the pipeline runs it: every released byte a function of the primitives'
releases, every release at its ledger's noise, every sample at its ledger's rate, the learner's own
options.

Each planted bug is a user's learner made from the documented example (docs/examples/my_learner.py) with
a few lines changed, or a built-in learner's own function with one line changed (by source, so that the
rest is the code the pipeline runs), and is run through the audit's own harness: the rows it writes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import broken_copy

from dpcl.audits.postprocessing import first_difference, release_files
from dpcl.privacy import releases
from dpcl.stages.audit_runs import AuditSetting
from dpcl.stages.exposure import exposure_rows

DELTA = 1e-5
EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "my_learner.py"
CALL = (
    "        labels, released = noisy_class_sums(\n"
    '            task.x, task.y, task.label_space, sigma, inputs.rng_for(t, "gaussian"), dim=dim\n'
    "        )\n"
    "        sums[labels] += released\n"
)


def _variant(tmp_path, name: str, *changes: tuple[str, str]) -> str:
    """The documented example learner with ``changes`` (old, new) applied, registered as ``name``."""
    src = EXAMPLE.read_text()
    for old, new in changes:
        assert old in src, old
        src = src.replace(old, new)
    src = src.replace('name="my_sums"', f'name="{name}"').replace('module="my_learner"', f'module="{name}"')
    path = tmp_path / f"{name}.py"
    path.write_text(src)
    return str(path)


def _rows(learner: str, setting: AuditSetting | None = None) -> dict[str, dict]:
    rows = exposure_rows([1.0], DELTA, seed=0, learners=[learner], setting=setting)
    return {r["mechanism"].rsplit("(", 1)[1].rstrip(")"): r for r in rows}


def _setting(**changes) -> AuditSetting:
    base = AuditSetting.defaults()
    return AuditSetting(**(base.to_dict() | changes) | {"label_methods": changes.get("label_methods", {})})


# ----------------------------------------------------------------------------- correct learners


def test_the_documented_example_passes_both_checks_at_every_label_method(user_learners):
    user_learners([str(EXAMPLE)])
    setting = AuditSetting.from_dict(
        AuditSetting.defaults().to_dict() | {"label_methods": {"my_sums": ["oracle", "base", "release-f0.1"]}}
    )
    rows = _rows("my_sums", setting)
    for kind in ("exposure", "post-processing"):
        assert rows[kind]["verdict"] == "not refuted", rows[kind]["setting"]
        assert "base, release-f0.1;" in rows[kind]["setting"]  # the Label Oracle is no DP release
    assert "every released byte identical" in rows["post-processing"]["setting"]


# ----------------------------------------------------------------------------- post-processing


def test_predicting_from_exact_sums_beside_a_correct_release_is_refuted(user_learners, tmp_path):
    """The release the primitive reports is correct; the model is built from exact class sums the
    learner computes itself: no privacy at all, and the canaries (which score the reported release) and
    the exposure count (every read accounted) cannot see it. The replay on D' changes the predictions."""
    user_learners(
        [
            _variant(
                tmp_path,
                "exact_sums",
                (
                    CALL,
                    CALL.replace("        sums[labels] += released\n", "")
                    + "        seen_now = labels  # the exact sums, un-noised\n"
                    + "        np.add.at(sums, task.y, task.x / np.linalg.norm(task.x, axis=1, keepdims=True))\n",
                ),
                ("seen[labels] = True", "seen[seen_now] = True"),
            )
        ]
    )
    rows = _rows("exact_sums")
    assert rows["exposure"]["verdict"] == "not refuted"  # every read is the primitive's, as the ledger says
    post = rows["post-processing"]
    assert post["verdict"] == "refuted", post["setting"]
    assert (
        "outside the mechanism primitives" in post["setting"] and "metrics.json: acc[1, 0]" in post["setting"]
    )


def test_a_learner_that_leaks_its_class_counts_is_refuted(user_learners, tmp_path):
    """The counts of each released label, in the metrics (a "diagnostic" in the wrong file)."""
    user_learners(
        [
            _variant(
                tmp_path,
                "counts",
                (
                    'extra={"sigma": sigma}',
                    'extra={"sigma": sigma, "class_counts": [np.bincount(t.y).tolist() for t in inputs.tasks]}',
                ),
            )
        ]
    )
    post = _rows("counts")["post-processing"]
    assert post["verdict"] == "refuted"
    assert "metrics.json: class_counts" in post["setting"], post["setting"]


def test_a_release_that_uses_the_poisson_sample_size_is_refuted(monkeypatch):
    """The head learners' step divided by the realised batch size (a primitive's private by-product)
    instead of the public normaliser: D' has the same sizes and the same sample, D + 1 does not."""
    import dpcl.learners.peft as peft
    import dpcl.training.heads as heads

    monkeypatch.setattr(
        heads,
        "train_head",
        broken_copy(
            heads, "train_head", ("adam.step([grad])", "adam.step([grad * 128.0 / max(len(batch), 1)])")
        ),
    )
    monkeypatch.setattr(peft, "train_head", heads.train_head)
    rows = _rows("peft_head")
    assert rows["exposure"]["verdict"] == "not refuted"
    post = rows["post-processing"]
    assert post["verdict"] == "refuted" and "D + 1 record per task" in post["setting"], post["setting"]


def test_a_replay_that_leaves_the_recorded_run_names_the_release():
    """Under a replay a release must be the recorded one in everything public."""
    from dpcl.privacy.class_sums import noisy_class_sums

    x, y = np.eye(3, dtype=np.float32), np.array([0, 1, 2])
    with releases.recording(keep_payloads=True) as rec:
        _, first = noisy_class_sums(x, y, [0, 1, 2], 2.0, np.random.default_rng(0), dim=3)
    with releases.recording(replay=rec.releases) as again:  # other data, the same public plan
        _, second = noisy_class_sums(x[::-1] * 2, y, [0, 1, 2], 2.0, np.random.default_rng(5), dim=3)
    assert np.array_equal(first, second) and first.dtype == second.dtype
    with (
        releases.recording(replay=rec.releases) as again,
        pytest.raises(releases.ReplayDiverged, match="noise"),
    ):
        noisy_class_sums(x, y, [0, 1, 2], 1.0, np.random.default_rng(0), dim=3)
    assert "noise scale" in again.diverged
    with releases.recording(replay=rec.releases), pytest.raises(releases.ReplayDiverged, match="not made"):
        for _ in range(2):
            noisy_class_sums(x, y, [0, 1, 2], 2.0, np.random.default_rng(0), dim=3)


def test_first_difference_names_the_file_and_the_field():
    a = release_files(labels={"tasks": [1]}, metrics={"acc": [0.5]}, privacy={}, predictions=[[np.arange(3)]])
    b = release_files(labels={"tasks": [1]}, metrics={"acc": [0.5]}, privacy={}, predictions=[[np.arange(3)]])
    assert first_difference(a, b) is None
    b["metrics.json"] = {"acc": [0.25]}
    assert first_difference(a, b) == "metrics.json: acc[0]: 0.5 on D, 0.25 here"
    b["metrics.json"], b["predictions"] = a["metrics.json"], [[np.array([0, 1, 3])]]
    assert first_difference(a, b) == "predictions: [0][0][2]: 2 on D, 3 here"


# ----------------------------------------------------------------------------- exposure


def test_a_second_release_at_noise_zero_is_an_unaccounted_read(user_learners, tmp_path):
    """A "non-private reference" made through the primitive at σ = 0 in a private run, predicted from:
    the replay replays it too, so only the count sees it, and it does (σ 0 is stated by no entry)."""
    user_learners(
        [
            _variant(
                tmp_path,
                "reference",
                (
                    CALL,
                    CALL + "        _, exact = noisy_class_sums(task.x, task.y, task.label_space, 0.0, "
                    'inputs.rng_for(t, "reference"), dim=dim)\n' + "        sums[labels] += exact\n",
                ),
            )
        ]
    )
    rows = _rows("reference")
    assert rows["exposure"]["verdict"] == "refuted", rows["exposure"]["setting"]
    assert "sigma 0" in rows["exposure"]["setting"]


def test_the_audit_runs_a_users_learner_with_the_pipelines_options(user_learners, tmp_path):
    """A bug behind an option: noise at half its σ when learner_options say noise_scale 0.5. Run with the
    pipeline's options (as the features job passes them), the exposure count refutes it (a σ its ledger
    does not state); with none it is the correct learner."""
    user_learners(
        [
            _variant(
                tmp_path,
                "scaled",
                (
                    "task.x, task.y, task.label_space, sigma, inputs.rng_for",
                    "task.x, task.y, task.label_space, sigma * inputs.options.get('noise_scale', 1.0), inputs.rng_for",
                ),
            )
        ]
    )
    assert _rows("scaled")["exposure"]["verdict"] == "not refuted"
    setting = AuditSetting.from_dict(
        AuditSetting.defaults().to_dict() | {"learner_options": {"scaled": {"noise_scale": 0.5}}}
    )
    assert _rows("scaled", setting)["exposure"]["verdict"] == "refuted"


def test_a_release_from_another_thread_is_refused_and_marked(user_learners, tmp_path):
    """A learner whose releases run in a worker thread of its own: the primitive refuses to release
    outside the audit's recording (it would go unseen), and the row says so."""
    user_learners(
        [
            _variant(
                tmp_path,
                "threaded",
                (
                    CALL,
                    "        from concurrent.futures import ThreadPoolExecutor\n\n"
                    "        with ThreadPoolExecutor(1) as pool:\n"
                    "            labels, released = pool.submit(\n"
                    "                noisy_class_sums, task.x, task.y, task.label_space, sigma,\n"
                    '                inputs.rng_for(t, "gaussian"), dim=dim,\n'
                    "            ).result()\n"
                    "        sums[labels] += released\n",
                ),
            )
        ]
    )
    rows = _rows("threaded")
    for kind in ("exposure", "post-processing"):
        assert rows[kind]["verdict"].startswith("not auditable: a mechanism primitive ran outside")
    from dpcl.stages.canary_audit import canary_audit_rows

    (row,) = canary_audit_rows([1.0], DELTA, seed=0, runs=2, canaries=10, learners=["threaded"])
    assert row["verdict"].startswith("not auditable: a mechanism primitive ran outside")


@pytest.mark.parametrize("learner", ["peft_head", "peft_film"])
def test_a_sampler_at_twice_its_rate_is_refuted(learner, monkeypatch):
    """The heads' and FiLM's DP-SGD sampled at 2q while the ledger (and the noise) say q: the sample
    states the rate it used, which no ledger entry has."""
    if learner == "peft_head":
        import dpcl.learners.peft as peft
        import dpcl.training.heads as heads

        monkeypatch.setattr(
            heads,
            "train_head",
            broken_copy(heads, "train_head", ("rate = cfg.sample_rate if", "rate = 2 * cfg.sample_rate if")),
        )
        monkeypatch.setattr(peft, "train_head", heads.train_head)
    else:
        import dpcl.training.film as film

        monkeypatch.setattr(
            film,
            "train_film",
            broken_copy(
                film, "train_film", ("rate=cfg.sample_rate, std=std", "rate=2 * cfg.sample_rate, std=std")
            ),
        )
    row = _rows(learner)["exposure"]
    assert row["verdict"] == "refuted", row["setting"]
    assert "samples at rate 0.5" in row["setting"]
