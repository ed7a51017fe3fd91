"""The canary audit (dpcl.stages.canary_audit): every registered learner's own code with Dirac canaries
in its private data, each canary scored on every release that read canaries as the mechanism primitives
report them, against the run's (ε, δ) claim. The documented example of a user's learner is audited with
no audit code of its own; the same learner with half its noise is refuted. The broken copy lives here."""

from __future__ import annotations

from pathlib import Path

from helpers import broken_copy

from dpcl.stages.canary_audit import canary_audit_rows

DELTA = 1e-5
EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "my_learner.py"


def _row(name: str) -> dict:
    (row,) = canary_audit_rows([1.0], DELTA, seed=0, runs=16, canaries=1000, learners=[name])
    return row


def test_the_documented_example_is_audited_and_not_refuted(user_learners):
    """Its class sums are one Gaussian release per task with sensitivity 1: the claim's μ (0.268 at
    ε = 1) is its true μ. With ~6,000 trials per world the two Clopper-Pearson bounds (α/4 each) cost
    about 0.036 and the estimate's sd is about 0.045: the bound is expected near 0.23 and falls below
    0.4 of the claim (0.107) with probability below 1 %."""
    user_learners([str(EXAMPLE)])
    row = _row("my_sums")
    assert row["verdict"] == "not refuted (add/remove)"
    assert 0.4 * row["claimed_mu"] < row["mu_lower_bound"] <= row["claimed_mu"]
    assert row["trials"] > 5000


def test_the_example_with_half_its_noise_is_refuted(user_learners, tmp_path):
    """The same file with σ/2 passed to the primitive (its ledger still states σ): true μ 0.54, twice
    what ε = 1 allows."""
    src = EXAMPLE.read_text()
    old = "task.x, task.y, task.label_space, sigma, inputs.rng_for"
    assert src.count(old) == 1
    path = tmp_path / "half_noise.py"
    path.write_text(
        src.replace(old, old.replace("sigma,", "sigma / 2,"))
        .replace('name="my_sums"', 'name="half_noise"')
        .replace('module="my_learner"', 'module="half_noise"')
    )
    user_learners([str(path)])
    row = _row("half_noise")
    assert row["verdict"].startswith("refuted")
    assert row["mu_lower_bound"] > 1.5 * row["claimed_mu"]


def test_a_head_learner_with_noise_at_two_thirds_is_refuted(monkeypatch):
    """train_head's noise at ⅔ of the σ its ledger states (a copy of train_head with that one change):
    the PEFT heads' row is refuted on its μ bound."""
    import dpcl.learners.peft as peft
    import dpcl.training.heads as heads

    broken = broken_copy(heads, "train_head", ("sigma=noise_multiplier,", "sigma=noise_multiplier * 2 / 3,"))
    monkeypatch.setattr(peft, "train_head", broken)
    row = _row("peft_head")
    assert row["verdict"].startswith("refuted") and row["mu_lower_bound"] > row["claimed_mu"]


def test_a_film_learner_is_audited_and_its_noise_at_a_quarter_refuted(monkeypatch):
    """A FiLM learner's canaries are images with a class of their own, attributed by the FiLM primitive at
    each release's state, bounded by the one-run audit over one run of 1,000 canaries. The correct PEFT
    FiLM row stays below its claim (its bound near 0.1 at ε = 1); with the primitive's noise at σ/4 (the
    release still states σ) the true μ is 4 x 0.27, whose top guesses are nearly all right: the bound
    (about 1.7) exceeds ε = 1."""
    import dpcl.training.film as film

    row = _row("peft_film")
    assert row["verdict"] == "not refuted (add/remove)" and row["mu_lower_bound"] is None
    assert "1000 canaries" in row["setting"]
    broken = broken_copy(
        film, "noisy_grad_sum", ("io.noise(params, std, gen", "io.noise(params, std / 4, gen")
    )
    monkeypatch.setattr(film, "noisy_grad_sum", broken)
    row = _row("peft_film")
    assert row["verdict"].startswith("refuted") and row["epsilon_lower_bound"] > 1.0


def test_fm_agem_is_audited_and_its_noise_at_a_quarter_refuted(monkeypatch):
    """FM-A-GEM reads its records through a public projection: its Dirac canaries (one point after the
    projection) get a class of their own, and each is scored on its own row of b̃_t (the Taylor
    primitive's attribution), 16 runs x 1,000 canaries under the one-run bound. Correct: not refuted
    (bound near 0.25 at ε = 1); the coefficients' noise at σ/4 (its ledger still states σ): refuted (bound
    about 1.5)."""
    import dpcl.learners.fm_agem as fm

    row = _row("fm_agem")
    assert row["verdict"] == "not refuted (add/remove)" and row["epsilon_lower_bound"] < 1.0
    orig = fm.release_coefficients
    monkeypatch.setattr(
        fm, "release_coefficients", lambda z, rows, k, sigma, gen: orig(z, rows, k, sigma / 4, gen)
    )
    row = _row("fm_agem")
    assert row["verdict"].startswith("refuted") and row["epsilon_lower_bound"] > 1.0
