"""How the reports name things: label methods (parsed by :func:`dpcl.privacy.label_methods.parse_label_method`),
ε tags (:func:`dpcl.config.parse_eps_tag`) and learners (:mod:`dpcl.learners.registry`). Every
table and figure takes its names from here; none re-parses a tag or lists learners by hand."""

from __future__ import annotations

from ..config import parse_eps_tag
from ..data.label_space import LabelMethod, parse_label_method

_FIXED = {
    "oracle": "Label Oracle (Baseline)",
    "base": "Base Dataset (Baseline)",
}
_REMAP = {"unknown": "others → unknown", "parent": "others → parent"}


def label_method(tag: str) -> LabelMethod | None:
    """The parsed label method, None for a tag that is not one (e.g. a reference-only column)."""
    try:
        return parse_label_method(tag)
    except ValueError:
        return None


def label_method_name(tag: str) -> str:
    """Display name of a label-method tag: "Public Labels (1000x)", "Public Labels (1000x, growing)",
    "Public Labels (10x, 50 % public, others → unknown)", "Release Labels (10 %)", "Release Labels,
    Laplace (5 %)"; an unknown tag is shown as it is."""
    m = label_method(tag)
    if m is None:
        return tag
    if m.kind in _FIXED:
        return _FIXED[m.kind]
    if m.kind == "public":
        parts = [f"{m.multiplier}x"]
        if m.coverage != 100:
            parts.append(f"{m.coverage} % public")
        if m.schedule == "grow":
            parts.append("growing")
        if m.remap != "drop":
            parts.append(_REMAP[m.remap])
        return f"Public Labels ({', '.join(parts)})"
    pct = f"{100 * m.fraction:g} %"
    return f"Release Labels, Laplace ({pct})" if m.mechanism == "laplace" else f"Release Labels ({pct})"


def release_fraction(tag: str, mechanism: str | None = "tsgd") -> float | None:
    """The fraction F of a Release Labels tag (of ``mechanism``: "tsgd", "laplace", None for either)."""
    m = label_method(tag)
    if m is None or m.kind != "release" or (mechanism is not None and m.mechanism != mechanism):
        return None
    return m.fraction


def public_multiplier(tag: str, plain: bool = True) -> int | None:
    """N of a Public Labels tag ``public-xN``; with ``plain`` only without coverage, schedule or
    remapping options (the paper's ×10/×100/×1000 columns)."""
    m = label_method(tag)
    if m is None or m.kind != "public":
        return None
    if plain and (m.coverage != 100 or m.schedule != "fixed" or m.remap != "drop"):
        return None
    return m.multiplier


def canonical_method(tag: str) -> str:
    """A plain release or public tag in its canonical spelling (``release-f0.10`` -> ``release-f0.1``,
    as paper references spell it); any other tag unchanged."""
    m = label_method(tag)
    if m is None:
        return tag
    if (m.kind == "release" and m.mechanism == "tsgd") or public_multiplier(tag) is not None:
        return m.tag
    return tag


def eps_key(tag: str) -> float:
    """Sort key of an ε tag (``inf`` last)."""
    return parse_eps_tag(str(tag))


def eps_name(tag: str) -> str:
    """An ε tag as tables print it: "non-DP" for ``inf``."""
    return "non-DP" if parse_eps_tag(str(tag)) == float("inf") else str(tag)


def sorted_eps(tags) -> list[str]:
    return sorted(tags, key=eps_key)


def learner_name(name: str) -> str:
    """Table name of a learner (its registry ``display``); an unregistered name as it is."""
    from ..learners import registry

    return registry.get(name).display if name in registry.names() else name


def label_methods_key(name: str) -> str:
    """The config list learner ``name`` takes its label methods from (registry); ``label_methods`` for
    an unregistered name."""
    from ..learners import registry

    return registry.label_methods_key(name) if name in registry.names() else "label_methods"


def learner_label(name: str) -> str:
    """Figure name of a learner (its registry ``label``); an unregistered name as it is."""
    from ..learners import registry

    return registry.get(name).label if name in registry.names() else name


def eps_title(tag: str) -> str:
    """An ε tag as figures label it: "non-DP" or "ε = 8"."""
    name = eps_name(tag)
    return name if name == "non-DP" else f"ε = {tag}"
