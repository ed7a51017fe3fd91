"""Citations: every paper the repository cites goes by a short key in square brackets that
resolves to an entry of docs/references.md, and that page has no entry nobody cites.

Checked over every git-tracked text file: no numbered-copy citations ("paper" + a three-digit
number), no bare author-year citations outside the references page, every citation key used
has an entry, and every entry is cited somewhere else. Each failure lists file:line.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from helpers import tracked_texts

ROOT = Path(__file__).resolve().parent.parent
REFERENCES = "docs/references.md"

#: a citation of a numbered paper copy, e.g. "paper" or "papers" followed by 000-009
NUMBERED = re.compile(r"\bpapers? 00\d\b", re.IGNORECASE)
#: a bracketed key: an author surname and year (optionally a/b), or a word that the references define
#: (e.g. the key of the anonymous main paper); "[Key](url)" is a Markdown link, not a citation
BRACKETED = re.compile(r"\[([A-Z][A-Za-z]+(?:\d{4}[a-z]?)?)\](?!\()")
AUTHOR_YEAR_KEY = re.compile(r"[A-Z][A-Za-z]+\d{4}[a-z]?")
#: an entry of the references page: its MyST label, then the bold key
ENTRY = re.compile(r"^\(ref-([A-Za-z]+(?:\d{4}[a-z]?)?)\)=\n\*\*\[([^\]]+)\]\*\*", re.MULTILINE)
#: a bare author-year citation: "Name et al. YYYY", "Name & Name (YYYY)", "Name, Name and Name YYYY",
#: or a single author in parentheses "(Name YYYY)" / "(Name, YYYY)"
BARE = [
    re.compile(r"\b[A-Z][A-Za-z\-]+ (et al\.|(and|&) [A-Z][A-Za-z\-]+),? \(?(19|20)\d\d"),
    re.compile(r"\((?:[A-Z][a-z]+[A-Za-z\-]*),? (19|20)\d\d[a-z]?[,;)]"),
]


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _where(hits: list[str]) -> str:
    return f"{len(hits)} found:\n  " + "\n  ".join(hits)


@cache
def _entries() -> dict[str, int]:
    """Key -> line of its entry on the references page (the label and the bold key must agree)."""
    text = tracked_texts()[REFERENCES]
    entries = {}
    for m in ENTRY.finditer(text):
        assert m.group(1) == m.group(2), f"{REFERENCES}:{_line(text, m.start())}: label {m.group(1)!r} " \
            f"names entry [{m.group(2)}]"  # fmt: skip
        assert m.group(1) not in entries, f"{REFERENCES}: key [{m.group(1)}] has two entries"
        entries[m.group(1)] = _line(text, m.start())
    return entries


def _citations() -> list[tuple[str, int, str]]:
    """(file, line, key) of every bracketed key that is a citation: AuthorYear form, or a defined key."""
    keys = _entries()
    found = []
    for rel, text in tracked_texts().items():
        for m in BRACKETED.finditer(text):
            key = m.group(1)
            if AUTHOR_YEAR_KEY.fullmatch(key) or key in keys:
                found.append((rel, _line(text, m.start()), key))
    return found


def test_references_page_has_sorted_labelled_entries():
    text = tracked_texts()[REFERENCES]
    assert text.startswith("# References\n")
    entries = _entries()
    assert len(entries) == text.count("(ref-"), "every '(ref-' label must introduce a well-formed entry"
    for section in text.split("\n## ")[1:]:
        keys = [m.group(1) for m in ENTRY.finditer("\n" + section.split("\n", 1)[1])]
        assert keys == sorted(keys), f"{REFERENCES}, section {section.splitlines()[0]!r}: not sorted by key"


def test_no_numbered_paper_citations():
    hits = [
        f"{rel}:{_line(text, m.start())}: {m.group(0)!r}"
        for rel, text in tracked_texts().items()
        for m in NUMBERED.finditer(text)
    ]
    assert not hits, "cite papers by key (docs/references.md), not by copy number; " + _where(hits)


def test_every_citation_key_has_an_entry():
    keys = _entries()
    hits = [f"{rel}:{line}: [{key}]" for rel, line, key in _citations() if key not in keys]
    assert not hits, f"citation keys without an entry in {REFERENCES}; " + _where(hits)


def test_every_entry_is_cited():
    cited = {key for rel, _, key in _citations() if rel != REFERENCES}
    dead = [f"{REFERENCES}:{line}: [{key}]" for key, line in _entries().items() if key not in cited]
    assert not dead, "entries cited nowhere else; " + _where(dead)


def test_no_bare_author_year_citations():
    hits = [
        f"{rel}:{_line(text, m.start())}: {m.group(0)!r}"
        for rel, text in tracked_texts().items()
        if rel != REFERENCES
        for pattern in BARE
        for m in pattern.finditer(text)
    ]
    assert not hits, f"cite by key (an entry of {REFERENCES}), not by author and year; " + _where(hits)
