"""The ledger proves its claims: `dpcl ledger verify` re-derives every entry of a written
privacy.json from its parameters and rejects forged ledgers, naming the entry; and noise
streams are keyed by what the data is, so two benchmarks on the same data never share noise."""

from __future__ import annotations

import copy
import json
import math
import re
from dataclasses import asdict

import numpy as np
import pytest

from dpcl.cli import main
from dpcl.config import eps_tag
from dpcl.data.label_space import output_label_spaces, parse_label_method
from dpcl.data.scenarios import disjoint_scenario
from dpcl.io import read_json, write_json
from dpcl.learners import ledger_spec
from dpcl.privacy.accounting import Budget, PrivacyBudgetExceeded
from dpcl.privacy.ledger import LedgerError
from dpcl.privacy.verify import Plan, verify_privacy
from dpcl.stages.agem import run_memory_learner
from dpcl.stages.prototypes import run_prototype_learner
from dpcl.training.heads import DPSGDConfig

T = 5
CFG = DPSGDConfig(sample_rate=0.5, epochs=2.0, lr=0.05, clip=1.0, normaliser=16.0)


def _data(per_class=30, n_classes=10, dim=8, seed=0):
    gen = np.random.default_rng(seed)
    centres = gen.normal(0, 3, size=(n_classes, dim))
    y = np.repeat(np.arange(n_classes), per_class)
    yt = np.repeat(np.arange(n_classes), 5)
    return centres[y] + gen.normal(size=(len(y), dim)), y, centres[yt] + gen.normal(size=(len(yt), dim)), yt


def _labels(sc, y, eps, method, stream=("synthetic", "disjoint-t5"), seed=0):
    budget = Budget(eps, 1e-5) if math.isfinite(eps) else Budget(math.inf, 0.0)
    res = output_label_spaces(
        parse_label_method(method),
        [y[i] for i in sc.train_indices],
        10,
        budget,
        seed,
        run_key=("release", *stream, eps_tag(eps)),
    )
    res.update(
        seed=seed,
        scenario=stream[1],
        epsilon_tag=eps_tag(eps),
        stream={"dataset": stream[0], "scenario": stream[1]},
    )
    return json.loads(json.dumps(res, default=str).replace("Infinity", '"inf"'))


@pytest.fixture(scope="module")
def ledgers(tmp_path_factory):
    """privacy.json of a cosine run (Gaussian) and a DP-A-GEM run (k-TSGD, DP-SGD, buffer), as written."""
    tmp = tmp_path_factory.mktemp("ledgers")
    x, y, xt, yt = _data()
    sc = disjoint_scenario(y, T, seed=0)
    _, cos, _, _ = run_prototype_learner(
        (x, y, np.arange(len(y))), (xt, yt), sc, _labels(sc, y, 1.0, "base"), learner="cosine"
    )
    _, agem, _ = run_memory_learner(
        (x, y, np.arange(len(y))),
        (xt, yt),
        sc,
        _labels(sc, y, 1.0, "release-f0.1"),
        learner="agem_head",
        dpsgd_cfg=asdict(CFG),
        agem_cfg={"buffer_fraction": 0.2},
    )
    _, oracle, _, _ = run_prototype_learner(
        (x, y, np.arange(len(y))), (xt, yt), sc, _labels(sc, y, 1.0, "oracle"), learner="cosine"
    )
    out = {}
    for name, p in (("cosine", cos), ("agem", agem), ("oracle", oracle)):
        write_json(tmp / f"{name}.json", p)
        out[name] = read_json(tmp / f"{name}.json")
    return tmp, out


TARGET = Budget(1.0, 1e-5)


def _plan(ledger, target=TARGET, n_tasks=T):
    """The plan of one of the fixture's runs: the learner's declaration (DP-A-GEM's own summary block is
    checked only against it), the target and the task count."""
    learner = {"cosine": "cosine", "agem": "agem_head"}[ledger]
    return Plan(target=target, n_tasks=n_tasks, spec=ledger_spec(learner))


def _entry(p, task, mechanism):
    return next(e for e in p["tasks"][task]["mechanisms"] if e["mechanism"] == mechanism)


def test_written_ledgers_verify(ledgers):
    _, led = ledgers
    assert verify_privacy(led["cosine"], target=Budget(1.0, 1e-5), n_tasks=T)["guarantee_holds"]
    s = verify_privacy(led["agem"], plan=_plan("agem"))
    assert s["guarantee_holds"] and s["entries"] == T + T + (T - 1)  # label release + train + buffer parts
    oracle = verify_privacy(led["oracle"])
    assert oracle["guarantee_holds"] is False and math.isinf(
        oracle["overall"]["epsilon"]
    )  # reported, not skipped


def _forge(p, how):
    p = copy.deepcopy(p)
    how(p)
    return p


def _nonprivate_claims_eps(p):
    e = _entry(p, 1, "dpsgd")
    e.clear()
    e.update(
        mechanism="nonprivate",
        epsilon=0.9,
        delta=0.0,
        noise_multiplier=0.0,
        sample_rate=0.5,
        steps=4,
        part="train",
    )


def _tiny_sensitivity(p):
    e = _entry(p, 2, "gaussian")
    e["sensitivity"] = 1e-3


def _buffer_one_later_task(p):
    from dpcl.privacy.sgd_accounting import epsilon as sgd_epsilon

    e = _entry(p, 0, "dpsgd_buffer")  # task 0 of 5 is reread by 4 later tasks
    e["later_tasks"], e["steps"] = 1, e["steps_per_task"]
    e["epsilon"] = sgd_epsilon(
        e["noise_multiplier"], e["sample_rate"], e["steps"], e["delta"]
    )  # self-consistent


def _no_training_entry(p):
    p["tasks"][3]["mechanisms"] = [e for e in p["tasks"][3]["mechanisms"] if e["mechanism"] != "gaussian"]


def _count_in_entry(p):
    _entry(p, 0, "gaussian")["samples"] = 300


def _understated_overall(p):
    p["overall"]["epsilon"] = 0.5


def _understated_dpsgd(p):
    e = _entry(p, 1, "dpsgd")
    e["noise_multiplier"] = e["noise_multiplier"] / 3


@pytest.mark.parametrize(
    ("ledger", "forge", "message"),
    [
        ("agem", _nonprivate_claims_eps, r"tasks\[1\]\.mechanisms\[\d+\] \('nonprivate'\).*must say ε = inf"),
        (
            "cosine",
            _tiny_sensitivity,
            r"tasks\[2\]\.mechanisms\[\d+\] \('gaussian'\).*sensitivity 0.001.*sensitivity 1",
        ),
        (
            "agem",
            _buffer_one_later_task,
            r"tasks\[0\]\.mechanisms\[\d+\] \('dpsgd_buffer'\).*1 later tasks.*rereads it in 4",
        ),
        ("cosine", _no_training_entry, r"tasks\[3\]: no training entry|training entries"),
        (
            "cosine",
            _count_in_entry,
            r"tasks\[0\]\.mechanisms\[\d+\] \('gaussian'\).*\['samples'\].*not public",
        ),
        ("cosine", _understated_overall, r"overall\.epsilon: the file states"),
        ("agem", _understated_dpsgd, r"tasks\[1\]\.mechanisms\[\d+\] \('dpsgd'\).*accountant gives"),
    ],
)
def test_forged_ledgers_are_rejected_naming_the_entry(ledgers, ledger, forge, message):
    _, led = ledgers
    forged = _forge(led[ledger], forge)
    with pytest.raises((LedgerError, PrivacyBudgetExceeded), match=message):
        verify_privacy(forged, plan=_plan(ledger))


@pytest.mark.parametrize(
    ("factor", "error", "message"),
    [
        (1.1, PrivacyBudgetExceeded, r"sigma: the file states σ = .*, its entries use σ = "),
        (0.9, LedgerError, r"sigma: the file states σ = .*, its entries use σ = "),
        (0.5, LedgerError, r"sigma: the file states σ = .*, its entries use σ = "),
    ],
)
def test_a_cosine_runs_sigma_must_be_its_entries(ledgers, factor, error, message):
    """The cosine run's restated σ is its Gaussian entries' σ: more noise stated than added understates
    the loss, less noise stated is on the safe side but not the run's σ either; both are rejected."""
    _, led = ledgers
    sigma = _entry(led["cosine"], 0, "gaussian")["sigma"]
    assert led["cosine"]["sigma"] == sigma
    forged = _forge(led["cosine"], lambda p: p.update(sigma=sigma * factor))
    with pytest.raises(error, match=message + re.escape(repr(sigma))):
        verify_privacy(forged, target=Budget(1.0, 1e-5), n_tasks=T)
    forged = _forge(led["agem"], lambda p: p.update(sigma=1.0))  # DP-SGD entries list no σ to restate
    with pytest.raises(LedgerError, match="sigma: the file states σ = 1.0, but no entry lists a σ"):
        verify_privacy(forged, plan=_plan("agem"))


def test_target_comes_from_the_config_not_the_file(ledgers):
    _, led = ledgers
    forged = _forge(led["cosine"], lambda p: p["target"].update(epsilon=8.0))
    verify_privacy(forged)  # self-consistent on its own terms ...
    with pytest.raises(LedgerError, match="config's is"):
        verify_privacy(forged, target=Budget(1.0, 1e-5))  # ... but not the config's run


def test_a_buffer_count_is_checked_against_the_runs_task_count(ledgers):
    _, led = ledgers
    with pytest.raises(LedgerError, match="n_tasks: the file says 5, the plan has 6 tasks"):
        verify_privacy(led["agem"], plan=_plan("agem", n_tasks=6))


def test_cli_verifies_and_rejects(ledgers, tmp_path, capsys):
    folder, led = ledgers
    flags = ["--epsilon", "1", "--delta", "1e-5", "--tasks", str(T)]
    main(["ledger", "verify", str(folder / "cosine.json"), *flags])
    main(["ledger", "verify", str(folder / "agem.json"), *flags, "--learner", "agem_head"])
    out = capsys.readouterr().out
    assert out.count("verified") == 2 and "guarantee holds" in out
    with pytest.raises(SystemExit) as exc:  # DP-A-GEM's own block is checked against the learner named
        main(["ledger", "verify", str(folder / "agem.json"), *flags])
    assert exc.value.code == 1 and "unknown top-level keys ['agem']" in capsys.readouterr().err
    bad = tmp_path / "forged.json"
    write_json(bad, _forge(led["cosine"], _tiny_sensitivity))
    with pytest.raises(SystemExit) as exc:
        main(["ledger", "verify", str(bad), "--json"])
    assert exc.value.code == 1
    res = json.loads(capsys.readouterr().out)
    assert res["verified"] is False and "tasks[2]" in res["error"] and "gaussian" in res["error"]
    (tmp_path / "junk.json").write_text("not json")
    with pytest.raises(SystemExit) as exc:
        main(["ledger", "verify", str(tmp_path / "junk.json")])
    assert exc.value.code == 1 and "cannot read a ledger" in capsys.readouterr().err


# --- independent noise per release ------------------------------------------------------------


def _cosine_noise(x, y, xt, yt, sc, stream, backbone):
    labels = _labels(sc, y, 1.0, "base", stream=stream)
    _, _, model, _ = run_prototype_learner(
        (x, y, np.arange(len(y))), (xt, yt), sc, labels, learner="cosine", backbone=backbone
    )
    from dpcl.learners.cosine import normalize_rows

    exact = np.zeros_like(model["sums"], dtype=np.float64)
    np.add.at(exact, y, normalize_rows(x))
    return model["sums"] - exact


def test_two_benchmarks_on_the_same_data_draw_independent_noise():
    x, y, xt, yt = _data(per_class=20, dim=64)
    sc = disjoint_scenario(y, T, seed=0)
    a = _cosine_noise(x, y, xt, yt, sc, ("cifar100", "disjoint-t5"), "vit")
    b = _cosine_noise(x, y, xt, yt, sc, ("cifar100", "iblurry-n50-m10-t5"), "vit")
    c = _cosine_noise(x, y, xt, yt, sc, ("cifar100", "disjoint-t5"), "vit_other")
    again = _cosine_noise(x, y, xt, yt, sc, ("cifar100", "disjoint-t5"), "vit")
    assert np.allclose(a, again, atol=1e-4)  # same release, same noise (determinism)
    sigma = float(np.std(a))
    n = a.size
    for other in (b, c):
        # independent N(0, σ²) noise: the sample correlation is ~N(0, 1/n); 5 s.e. bound
        r = float(np.corrcoef(a.ravel(), other.ravel())[0, 1])
        assert abs(r) < 5 / math.sqrt(n), r
        # the difference of the two releases keeps the noise of both (variance 2σ²), not ~0
        assert float(np.std(a - other)) == pytest.approx(math.sqrt(2) * sigma, rel=5 / math.sqrt(n) * 2)


def test_label_release_noise_is_keyed_by_the_data_stream():
    from dpcl.privacy.label_release import tsgd_threshold

    k = tsgd_threshold(0.1, 1e-6)
    y = np.repeat(np.arange(200), k)  # every class at the threshold: kept with probability ~1/2

    def kept(stream):
        res = output_label_spaces(
            parse_label_method("release-f0.1"),
            [y],
            200,
            Budget(1.0, 1e-5),
            0,
            run_key=("release", *stream, "1"),
        )
        return set(res["tasks"][0]["labels"])

    a, b = kept(("cifar100", "disjoint-t10")), kept(("cifar100", "iblurry-n50-m10-t10"))
    assert kept(("cifar100", "disjoint-t10")) == a
    # independent releases disagree on a label with probability 2p(1-p) ≈ 1/2: expect ~100 of 200
    assert len(a ^ b) > 50


def test_cli_checks_against_the_config_and_the_runs_path(tmp_path, capsys):
    """--config: learner, label method, target, task count and nominal size from the config and
    the path; the same genuine file under another learner's or label method's path is rejected."""
    from pathlib import Path

    from dpcl.cli import main

    data = Path(__file__).parent / "ledgers"
    cfg = str(Path(__file__).parents[2] / "config" / "config.yaml")

    def place(name: str, learner: str, eps: str, method: str) -> Path:
        run = tmp_path / "runs" / learner / "fashion_mnist" / "effnet_lite0" / "disjoint-t5" / "seed0"
        path = run / f"eps{eps}" / method / "privacy.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text((data / name).read_text())
        return path

    good = place("agem_head_eps1_base.json", "agem_head", "1", "base")
    main(["ledger", "verify", "--config", cfg, str(good)])
    assert "guarantee holds" in capsys.readouterr().out
    for path, message in (
        (place("agem_head_eps1_base.json", "peft_head", "1", "base"), "unknown top-level keys ['agem']"),
        (place("peft_head_eps1_base.json", "peft_head", "1", "release-f0.1"), "label method"),
        (place("peft_head_eps1_base.json", "peft_head", "8", "base"), "config's is"),
    ):
        with pytest.raises(SystemExit) as exc:
            main(["ledger", "verify", "--config", cfg, str(path), "--json"])
        assert exc.value.code == 1
        assert message in json.loads(capsys.readouterr().out)["error"]
    main(
        ["ledger", "verify", str(good), "--learner", "agem_head", "--nominal-size", "50000", "--json"]
    )  # δ < 1/N
    assert json.loads(capsys.readouterr().out)["verified"] is True
    # δ = 1e-5 is not below 1/N for a nominal size of 200,000
    with pytest.raises(SystemExit) as exc:
        main(["ledger", "verify", str(good), "--learner", "agem_head", "--nominal-size", "200000", "--json"])
    assert "below 1/N" in json.loads(capsys.readouterr().out)["error"]
