"""Each ledger entry's dp_accounting event: derived from the entry's parameters, read back by
dp_accounting itself, checked by the verifier in either direction; and the ledger's vocabulary
names no learner (a learner registers a kind of its own and checks its own summary block)."""

from __future__ import annotations

import copy
import json
import math
import re
from pathlib import Path

import dp_accounting as dpa
import pytest

from dpcl.learners import ledger_spec, registry
from dpcl.privacy.accounting import Budget
from dpcl.privacy.dp_events import from_json, to_json
from dpcl.privacy.ledger import (
    PUBLIC_FIELDS,
    LedgerError,
    MechanismKind,
    register_kind,
    verify_mechanism,
)
from dpcl.privacy.verify import Plan, verify_task_ledger

LEDGERS = Path(__file__).parent / "ledgers"
PRIVACY = Path(__file__).resolve().parents[2] / "src" / "dpcl" / "privacy"
#: a buffer entry of task 0 in a 3-task run: reread at every step of the 2 later tasks
BUFFER = {
    "mechanism": "dpsgd_buffer",
    "part": "reference",
    "epsilon": 8.0,
    "delta": 1e-5,
    "noise_multiplier": 1.5,
    "sample_rate": 0.5,
    "steps": 8,
    "steps_per_task": 4,
    "later_tasks": 2,
    "accountant": "rdp",
}


def _event(entry, task=0, n_tasks=3):
    return from_json(verify_mechanism(entry, task, n_tasks)["dp_event"])


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        (
            {
                "mechanism": "gaussian",
                "epsilon": 1.0,
                "delta": 1e-5,
                "sigma": 6.0,
                "query": "class_sums_of_unit_norm_features",
            },
            dpa.GaussianDpEvent(6.0),
        ),
        (  # FM-A-GEM's query has sensitivity √2: the event's noise multiplier is σ / √2
            {
                "mechanism": "gaussian",
                "epsilon": 1.0,
                "delta": 1e-5,
                "sigma": 8.0,
                "query": "taylor_coefficients_projected_features",
            },
            dpa.GaussianDpEvent(8.0 / math.sqrt(2.0)),
        ),
        (
            {
                "mechanism": "dpsgd",
                "epsilon": 8.0,
                "delta": 1e-5,
                "noise_multiplier": 1.5,
                "sample_rate": 0.25,
                "steps": 12,
                "accountant": "rdp",
            },
            dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(0.25, dpa.GaussianDpEvent(1.5)), 12),
        ),
        (  # the buffer read whole at every step
            BUFFER,
            dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(0.5, dpa.GaussianDpEvent(1.5)), 8),
        ),
        (  # a uniformly chosen block, then sampled: no supported event
            dict(BUFFER, accountant="pld", block_choice="uniform"),
            dpa.UnsupportedDpEvent(),
        ),
        (
            {"mechanism": "ktsgd_label_release", "epsilon": 0.1, "delta": 1e-5, "k": 200},
            dpa.UnsupportedDpEvent(),
        ),
        (
            {"mechanism": "laplace_label_release", "epsilon": 0.1, "delta": 1e-5, "tau": 200.0},
            dpa.UnsupportedDpEvent(),
        ),
        ({"mechanism": "data_independent", "epsilon": 0.0, "delta": 0.0}, dpa.NoOpDpEvent()),
        ({"mechanism": "nonprivate", "epsilon": math.inf, "delta": 0.0}, dpa.NonPrivateDpEvent()),
        ({"mechanism": "label_oracle", "epsilon": math.inf, "delta": 1.0}, dpa.NonPrivateDpEvent()),
    ],
)
def test_each_kind_names_the_event_of_its_mechanism(entry, expected):
    assert _event(entry) == expected


def test_an_event_survives_json_and_dp_accounting_reads_it_back():
    event = dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(0.1, dpa.GaussianDpEvent(0.9)), 300)
    text = json.dumps(to_json(event))
    assert from_json(json.loads(text)) == event
    acc = dpa.pld.PLDAccountant()
    acc.compose(from_json(json.loads(text)))
    assert 0 < acc.get_epsilon(1e-5) < math.inf


@pytest.mark.parametrize("factor", [0.5, 2.0])
def test_the_verifier_rejects_an_event_that_differs_from_the_entrys_parameters(factor):
    """An event stating more noise (understates the loss) or less (the safe side) is not the entry's."""
    genuine = json.loads((LEDGERS / "peft_head_eps1_base.json").read_text())
    plan = Plan(target=Budget(1.0, 1e-5), n_tasks=5, spec=ledger_spec("peft_head"), label_method="base")
    verify_task_ledger(genuine, plan)
    forged = copy.deepcopy(genuine)
    step = forged["tasks"][2]["mechanisms"][1]["dp_event"]["event"]["event"]
    step["noise_multiplier"] *= factor
    with pytest.raises(LedgerError, match=r"tasks\[2\]\.mechanisms\[1\]\.dp_event"):
        verify_task_ledger(forged, plan)
    forged = copy.deepcopy(genuine)
    del forged["tasks"][0]["mechanisms"][0]["dp_event"]
    with pytest.raises(LedgerError, match=r"tasks\[0\]\.mechanisms\[0\]\.dp_event: states None"):
        verify_task_ledger(forged, plan)


def test_only_a_kind_that_is_not_dp_can_be_registered():
    with pytest.raises(ValueError, match="only a kind that is not DP"):
        MechanismKind("my_gaussian", fields={"sigma": "positive"}, private=True)
    with pytest.raises(ValueError, match="need a type"):
        MechanismKind("my_baseline", fields={"width": "string"})
    with pytest.raises(ValueError, match="already registered"):
        register_kind(MechanismKind("dpsgd", fields={}))
    # a learner's own kind: known after its module is imported, idempotent, ε = ∞ and NonPrivateDpEvent
    ledger_spec("l2dpml")
    assert "Delta_R" in PUBLIC_FIELDS["l2dpml_functional"]
    entry = {"mechanism": "l2dpml_functional", "epsilon": math.inf, "delta": 1.0, "Delta_R": 2.0}
    assert _event(entry) == dpa.NonPrivateDpEvent()
    with pytest.raises(LedgerError, match="must say ε = inf"):
        verify_mechanism(dict(entry, epsilon=1.0))


def test_the_privacy_package_names_no_learner():
    """No registered learner's name, display name or method name in dpcl.privacy's code and prose: a
    learner's own kinds and summary checks live in its module (register_kind, LedgerSpec.summary_check),
    and the mechanisms are described as mechanisms (a memory buffer's rereads, not a method's)."""
    names = set(registry.names()) | {m.rsplit(".", 1)[-1] for m in registry.MODULES}
    displays = {registry.get(n).display for n in registry.names()}
    # the methods the displays name: "DP-A-GEM (FiLM)" -> DP-A-GEM and FiLM, "Desai et al. DP-CL ..." -> Desai et al.
    methods = {re.split(r" \(| DP-CL", d)[0] for d in displays}
    methods |= {w for d in displays for w in re.findall(r"\((\w+)\)", d) if w[0].isupper()}
    assert {"DP-A-GEM", "FiLM", "Desai et al.", "Naive"} <= methods
    found = []
    for path in sorted(PRIVACY.glob("*.py")):
        text = path.read_text()
        found += [(path.name, n) for n in names if re.search(rf"\b{re.escape(n)}\b", text)]
        found += [(path.name, d) for d in displays | methods if d in text]
    assert not found


def test_a_learners_own_summary_block_comes_with_its_check():
    """A block the verifier could not recompute would put unchecked figures in the release."""
    from dpcl.privacy.verify import EntrySpec, LedgerSpec

    with pytest.raises(ValueError, match="needs its check"):
        LedgerSpec(training=(EntrySpec("dpsgd"),), summary="mine")
    with pytest.raises(ValueError, match="needs its check"):
        LedgerSpec(training=(EntrySpec("dpsgd"),), summary_check=lambda block, ledger, total: None)
