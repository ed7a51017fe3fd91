"""The label methods' config tags (``oracle``, ``base``, ``public-xN[-cP][-grow][-unknown|-parent]``,
``release-fF``, ``release-laplace-fF``) and their parse: which label-space mechanism a run's plan names.
What each method does with the data is :mod:`dpcl.data.label_space`'s; the ledger verifier
(:mod:`dpcl.privacy.verify`) reads only the kind and mechanism a tag names."""

from __future__ import annotations

import re
from dataclasses import dataclass

_TAG = re.compile(
    r"^(?:(oracle)|(base)|public-x(\d+)(?:-c(0|[1-9]\d?))?(-grow)?(?:-(unknown|parent))?"
    r"|release-(?:(laplace)-)?f(0?\.\d+|[01]\.\d+))$"
)


@dataclass(frozen=True)
class LabelMethod:
    kind: str  # oracle | base | public | release
    multiplier: int = 1
    fraction: float | None = None
    mechanism: str = "tsgd"  # release only: tsgd | laplace
    coverage: int = 100  # public only: percent of the base labels that are public
    schedule: str = "fixed"  # public only: fixed | grow
    remap: str = "drop"  # public only: drop | unknown | parent (R_t^label, Eq. 8)

    @property
    def tag(self) -> str:
        if self.kind == "public":
            cov = "" if self.coverage == 100 else f"-c{self.coverage}"
            grow = "-grow" if self.schedule == "grow" else ""
            rule = "" if self.remap == "drop" else f"-{self.remap}"
            return f"public-x{self.multiplier}{cov}{grow}{rule}"
        if self.kind == "release":
            mech = "" if self.mechanism == "tsgd" else f"{self.mechanism}-"
            return f"release-{mech}f{self.fraction:g}"
        return self.kind

    @property
    def data_dependent(self) -> bool:
        return self.kind in ("oracle", "release")


def parse_label_method(tag: str) -> LabelMethod:
    """Parse a config tag such as ``release-f0.1`` or ``public-x1000``."""
    m = _TAG.match(str(tag))
    if not m:
        raise ValueError(
            f"unknown label method {tag!r}: allowed are 'oracle', 'base', "
            "'public-xN[-cP][-grow][-unknown|-parent]' (N >= 1, 0 <= P <= 100), "
            "'release-fF' and 'release-laplace-fF' (0 < F < 1)"
        )
    if m.group(1):
        return LabelMethod("oracle")
    if m.group(2):
        return LabelMethod("base")
    if m.group(3):
        n = int(m.group(3))
        if n < 1:
            raise ValueError(f"label method {tag!r}: the public multiplier must be >= 1")
        cov = 100 if m.group(4) is None else int(m.group(4))
        if not 0 <= cov <= 100 or (m.group(4) is not None and cov == 100):
            raise ValueError(f"label method {tag!r}: the coverage -cP needs 0 <= P < 100 (omit it for 100)")
        rule = m.group(6) or "drop"
        if rule != "drop" and cov == 100:
            raise ValueError(
                f"label method {tag!r}: with every base label public no data label is remapped; "
                f"'-{rule}' needs a coverage below 100, e.g. 'public-x{n}-c50-{rule}'"
            )
        if cov == 0 and rule == "drop":
            raise ValueError(
                f"label method {tag!r}: no base label is public, so drop would discard every sample; "
                "add '-unknown' or '-parent'"
            )
        return LabelMethod(
            "public", multiplier=n, coverage=cov, schedule="grow" if m.group(5) else "fixed", remap=rule
        )
    f = float(m.group(8))
    if not 0 < f < 1:
        raise ValueError(f"label method {tag!r}: the release fraction must lie in (0, 1)")
    return LabelMethod("release", fraction=f, mechanism=m.group(7) or "tsgd")
