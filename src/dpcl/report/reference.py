"""Published numbers of the papers' appendix tables as a tidy DataFrame.

The tables live as CSV files (one per table, ``table_<ID>.csv``) in
``src/dpcl/resources/paper_reference/``, which ``config/paper_reference`` links to (like
``config/schema.yaml``). Their README documents every column, the vocabularies and how the
paper's row and column headers were mapped onto the pipeline's tags. One row per published
number; the key is every column but ``value``.

    >>> ref = load_reference()
    >>> lookup(ref, table="A3", dataset="cifar100", epsilon=1, learner="cosine",
    ...        label_method="oracle", statistic="median")
    78.4
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

REFERENCE_DIR = Path(__file__).resolve().parent.parent / "resources" / "paper_reference"
# config/paper_reference links here

COLUMNS = [
    "source",
    "table",
    "dataset",
    "epsilon",
    "learner",
    "label_method",
    "setting",
    "metric",
    "statistic",
    "value",
]
KEY = [c for c in COLUMNS if c != "value"]

# table -> paper it was transcribed from (000: the main paper [LabelSpace], 003: the short paper [Tobaben2024])
TABLES = {
    "A3": "000",
    "A4": "000",
    "A5": "000",
    "A6": "000",
    "A7": "000",
    "A8": "000",
    "A9": "000",
    "A10": "000",
    "F1": "003",
    "F2": "003",
}
#: the citation key (docs/references.md) of each source paper, for notes and captions
CITATION_KEYS = {"000": "LabelSpace", "003": "Tobaben2024"}
DATASETS = {"cifar100", "imagenet_r", "five_datasets"}
EPSILONS = {"1", "8", "inf"}


def _paper_learners(path: Path) -> tuple[tuple[str, tuple[str, ...], str], ...]:
    """The papers' methods (the reference's learner tags) in Table A8's row order, each with the learners
    of ours that reproduce it and the name its rows carry when ours do not name it ("" otherwise), as
    ``methods.csv`` beside the tables lists them (data about the papers, documented in its README).
    "both" (Table A5: the label release, whichever learner) has no row."""
    df = pd.read_csv(path, dtype=str, keep_default_na=False, na_filter=False)
    if list(df.columns) != ["tag", "name", "learners"]:
        raise ReferenceFormatError(
            f"{path}: columns are {list(df.columns)}, expected ['tag', 'name', 'learners']"
        )
    return tuple((r.tag.strip(), tuple(r.learners.split()), r.name.strip()) for r in df.itertuples())


METRICS = {"aa", "af", "n_labels"}
STATISTICS = {"median", "fourth_best", "second_best", "mean", "std"}
_FRACTION = r"0\.\d*[1-9]"  # 0 < F < 1, no trailing zeros (release-f0.1, not release-f0.10)
LABEL_METHOD_RE = re.compile(
    rf"^(oracle|base|unspecified|public-x[1-9]\d*|release-f{_FRACTION}|release-tuned)$"
)
SETTING_RE = re.compile(r"^(disjoint|datasets|iblurry|siblurry|iblurry-m[1-9]\d*)$")
_VALUE_RE = re.compile(r"^\d+(\.\d+)?$")  # as printed: non-negative decimals


class ReferenceFormatError(ValueError):
    """A reference CSV does not follow the documented schema."""


#: the papers' methods (reference learner tags), the learners of ours that reproduce them, and the name
#: a paper-only method's rows carry (our learners are named by the registry)
PAPER_LEARNERS = _paper_learners(REFERENCE_DIR / "methods.csv")
LEARNERS = {ref for ref, _, _ in PAPER_LEARNERS} | {"both"}


def _check_vocab(df: pd.DataFrame, name: str) -> None:
    checks = {
        "source": lambda v: v in {"000", "003"},
        "table": lambda v: v in TABLES,
        "dataset": lambda v: v in DATASETS,
        "epsilon": lambda v: v in EPSILONS,
        "learner": lambda v: v in LEARNERS,
        "label_method": lambda v: bool(LABEL_METHOD_RE.match(v)),
        "setting": lambda v: bool(SETTING_RE.match(v)),
        "metric": lambda v: v in METRICS,
        "statistic": lambda v: v in STATISTICS,
        "value": lambda v: bool(_VALUE_RE.match(v)),
    }
    for col, ok in checks.items():
        bad = df.loc[~df[col].map(ok)]
        if len(bad):
            line = int(bad.index[0]) + 2  # header is line 1
            raise ReferenceFormatError(
                f"{name}, line {line}: column {col!r} has invalid value {bad[col].iloc[0]!r}"
                f" ({len(bad)} bad row(s); see config/paper_reference/README.md for the vocabulary)"
            )
    mismatch = df.loc[df["table"].map(TABLES) != df["source"]]
    if len(mismatch):
        row = mismatch.iloc[0]
        raise ReferenceFormatError(
            f"{name}, line {int(mismatch.index[0]) + 2}: table {row['table']!r} comes from paper"
            f" {TABLES[row['table']]!r}, not source {row['source']!r}"
        )


def _read_one(path: Path) -> pd.DataFrame:
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False, na_filter=False)
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise ReferenceFormatError(f"{path}: not a readable CSV ({exc})") from exc
    if list(df.columns) != COLUMNS:
        raise ReferenceFormatError(f"{path}: columns are {list(df.columns)}, expected {COLUMNS}")
    if df.empty:
        raise ReferenceFormatError(f"{path}: no rows")
    df = df.apply(lambda s: s.str.strip())
    empty = df.eq("")
    if empty.any().any():
        r, c = next(zip(*empty.to_numpy().nonzero(), strict=True))
        raise ReferenceFormatError(f"{path}, line {int(r) + 2}: empty cell in column {COLUMNS[c]!r}")
    _check_vocab(df, str(path))
    stem = path.stem
    if stem.startswith("table_"):
        tables = set(df["table"])
        if tables != {stem[len("table_") :]}:
            raise ReferenceFormatError(f"{path}: holds tables {sorted(tables)}, expected only {stem[6:]!r}")
    return df


def load_reference(path: str | Path | None = None) -> pd.DataFrame:
    """Load and validate the published numbers.

    ``path``: a directory (every ``table_*.csv`` in it is read), one CSV file, or None for the
    copy shipped with the package. Returns one row per published number with the columns of
    ``COLUMNS``; ``value`` is a float, everything else a string (epsilon: "1", "8", "inf").
    Raises ``ReferenceFormatError`` (a ``ValueError``) naming the file, line and column of the
    first problem: wrong header, empty cell, unknown vocabulary, non-numeric value, a table
    split over files, or a duplicated key.
    """
    path = Path(path) if path is not None else REFERENCE_DIR
    if path.is_dir():
        order = {f"table_{t}": i for i, t in enumerate(TABLES)}  # paper order: A3 ... A10, F1, F2
        files = sorted(path.glob("table_*.csv"), key=lambda f: (order.get(f.stem, len(order)), f.name))
        if not files:
            raise FileNotFoundError(f"no table_*.csv files in {path}")
    elif path.is_file():
        files = [path]
    else:
        raise FileNotFoundError(f"reference tables not found: {path}")
    df = pd.concat([_read_one(f) for f in files], ignore_index=True)
    dup = df.duplicated(KEY, keep=False)
    if dup.any():
        first = df.loc[dup, KEY].iloc[0].to_dict()
        raise ReferenceFormatError(f"duplicate key ({int(dup.sum())} rows), e.g. {first}")
    df["value"] = df["value"].astype(float)
    return df


def _epsilon_tag(eps) -> str:
    """An ε given as a number or a tag ("8", "inf", "non-DP") as the reference spells it."""
    from ..config import eps_tag, parse_eps_tag

    if isinstance(eps, str):
        s = eps.strip().lower()
        try:
            return eps_tag(parse_eps_tag("inf" if s in ("infinity", "non-dp") else s))
        except ValueError:
            return s
    return eps_tag(float(eps))


def lookup(df: pd.DataFrame, **keys) -> float:
    """The single published value matching ``keys`` (column=value; epsilon may be a number).

    Keys left out match anything, but the match must be unique: a ``KeyError`` is raised when
    no row or several rows match (the message lists what differs between the candidates).
    """
    unknown = set(keys) - set(KEY)
    if unknown:
        raise KeyError(f"unknown column(s) {sorted(unknown)}; filter on {KEY}")
    mask = pd.Series(True, index=df.index)
    for col, val in keys.items():
        val = _epsilon_tag(val) if col == "epsilon" else str(val)
        mask &= df[col] == val
    hit = df.loc[mask]
    if len(hit) == 1:
        return float(hit["value"].iloc[0])
    if hit.empty:
        raise KeyError(f"no published number for {keys}")
    varying = {c: sorted(hit[c].unique()) for c in KEY if hit[c].nunique() > 1}
    raise KeyError(f"{len(hit)} published numbers match {keys}; narrow down with {varying}")
