"""Each ledger entry's mechanism as a ``dp_accounting`` event, written beside the entry.

A ledger entry lists a mechanism's public parameters in dpcl's words (σ, q, steps, a query's
sensitivity). Its ``dp_event`` field says the same in the words of Google's ``dp_accounting``: the
:class:`dp_accounting.DpEvent` of the mechanism the entry accounts, serialised as the event's own
``to_named_tuple()`` form (``module_name``, ``class_name`` and the event's fields, nested events as
nested objects), so that ``DpEvent.from_named_tuple`` reads it back and ``dp_accounting``'s PLD and
RDP accountants compose a whole ledger with no dpcl code.

The event is derived from the entry's public parameters, never stated by a learner; the verifier
derives it again and rejects a file whose event differs in any field, in either direction
(:func:`dpcl.privacy.verify.verify_task_ledger`). The events, by mechanism kind:

- ``gaussian`` (noisy sums at L2 sensitivity Δ, noise std σ): ``GaussianDpEvent(σ / Δ)``;
- ``dpsgd`` and a ``dpsgd_buffer`` read whole (σ, Poisson rate q, n steps):
  ``SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(σ)), n)``;
- ``data_independent`` (reads no data): ``NoOpDpEvent()``;
- the non-private kinds (``nonprivate``, the Label Oracle and its twin, and any kind registered as
  not DP, ε = ∞): ``NonPrivateDpEvent()``;
- **no event** (``UnsupportedDpEvent()``, which an accountant refuses rather than misjudges):
  k-TSGD and Laplace thresholding of label counts (an (ε, δ) release over a label domain the data
  decide, whose δ is the chance that a label one record adds passes the threshold: no
  ``dp_accounting`` event has it, and ``LaplaceDpEvent`` would drop the δ), and a buffer whose block
  is chosen uniformly at each step and then Poisson-sampled (the ledger bounds it by a PLD mixture
  with the identity, :mod:`dpcl.privacy.pld`; a nested ``PoissonSampledDpEvent`` is not supported
  by either accountant, and ``PoissonSampledDpEvent(q/τ, …)`` would understate it). An entry
  without an event composes with the rest by basic composition of its stated (ε, δ), as the
  ledger composes every entry.
"""

from __future__ import annotations

import functools
import json
from typing import Any

#: why a kind (or a kind in one of its forms) has no dp_accounting event (the module docstring)
NO_EVENT: dict[str, str] = {
    "ktsgd_label_release": "k-truncated geometric thresholding: no dp_accounting event has its δ",
    "laplace_label_release": "Laplace thresholding: LaplaceDpEvent would drop the threshold's δ",
    "dpsgd_buffer/uniform": "a block chosen with probability 1/τ, then Poisson-sampled: no supported event",
}


def to_json(event: Any) -> dict[str, Any]:
    """A ``dp_accounting`` event as JSON: its ``to_named_tuple()`` form, nested events as objects."""

    def plain(value: Any) -> Any:
        if hasattr(value, "_fields"):
            return {field: plain(getattr(value, field)) for field in value._fields}
        if isinstance(value, list | tuple):
            return [plain(v) for v in value]
        return value

    return plain(event.to_named_tuple())


def from_json(obj: dict[str, Any]) -> Any:
    """The ``dp_accounting`` event of :func:`to_json`'s form, read back by ``DpEvent.from_named_tuple``."""
    from collections import namedtuple

    from dp_accounting import DpEvent

    def named(value: Any) -> Any:
        if isinstance(value, dict):
            return namedtuple("Event", list(value))(**{k: named(v) for k, v in value.items()})
        if isinstance(value, list):
            return [named(v) for v in value]
        return value

    return DpEvent.from_named_tuple(named(obj))


def entry_event(
    entry: dict[str, Any], *, non_private: bool, sensitivity: float | None = None
) -> dict[str, Any]:
    """The JSON ``dp_event`` of a ledger entry whose kind and parameters the ledger has checked.

    ``non_private``: the kind is not DP (its entry says ε = ∞), so its event is ``NonPrivateDpEvent``
    whatever parameters it lists. ``sensitivity``: a ``gaussian`` entry's, the ledger's own from the
    query it answers (:data:`dpcl.privacy.ledger.QUERY_SENSITIVITY`), never the entry's words.
    """
    kind = entry["mechanism"]
    if non_private:
        return _event_json("non_private")
    if kind == "data_independent":
        return _event_json("no_op")
    if kind == "gaussian":
        if sensitivity is None:
            raise ValueError("a gaussian entry's event needs the sensitivity of the query it answers")
        return _event_json("gaussian", float(entry["sigma"]) / sensitivity)
    if kind in ("dpsgd", "dpsgd_buffer") and "block_choice" not in entry:
        return _event_json(
            "dpsgd", float(entry["sample_rate"]), float(entry["noise_multiplier"]), int(entry["steps"])
        )
    if kind in NO_EVENT or f"{kind}/{entry.get('block_choice')}" in NO_EVENT:
        return _event_json("unsupported")
    raise ValueError(f"no dp_accounting event is defined for a {kind!r} entry")


def _event_json(form: str, *params: float) -> dict[str, Any]:
    """The JSON of one event form at ``params``: a fresh dict each call, from a cache of its text
    (``to_named_tuple`` builds a named-tuple class per call, about 0.3 ms, and the ledger, its verifier
    and the mutation test ask for the same few events many times)."""
    return json.loads(_event_text(form, *params))


@functools.lru_cache(maxsize=4096)
def _event_text(form: str, *params: float) -> str:
    import dp_accounting as dpa

    if form == "non_private":
        event: Any = dpa.NonPrivateDpEvent()
    elif form == "no_op":
        event = dpa.NoOpDpEvent()
    elif form == "gaussian":
        event = dpa.GaussianDpEvent(params[0])
    elif form == "dpsgd":
        q, sigma, steps = params
        event = dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(sigma)), int(steps))
    else:
        event = dpa.UnsupportedDpEvent()
    return json.dumps(to_json(event))
