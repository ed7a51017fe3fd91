"""The README and docs/ name only things that exist: repository paths, result files, config keys and
command-line flags; their measured numbers come from generated files; nothing points outside the
repository. (`.ci/run` builds the docs themselves with warnings as errors.)"""

from __future__ import annotations

import argparse
import functools
import json
import re
import shlex
import sys
from pathlib import Path

import pytest
import yaml
from helpers import tracked_texts

ROOT = Path(__file__).resolve().parent.parent
DOC_FILES = [ROOT / "README.md"] + sorted(
    p for p in (ROOT / "docs").glob("*.md") if not p.name.startswith("_")
)
REPO_DIRS = (".ci", "src", "tests", "workflow", "config", "benchmarks", "docs", "profiles", "slurm")
OUTPUT_DIRS = ("results", "resources")
ROOT_FILES = ("Snakefile", "pyproject.toml", "environment.yml", "README.md")
BUILD_OUTPUTS = ("docs/_build",)  # written by sphinx-build

sys.path[:0] = [str(ROOT / "docs"), str(ROOT / "docs" / "_ext")]
import dpcl_docs  # noqa: E402
import update_numbers  # noqa: E402


def doc_id(path: Path) -> str:
    return str(path.relative_to(ROOT))


# --------------------------------------------------------------------------- markdown parsing


def code_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced code block."""
    return re.findall(r"^```([^\n`]*)\n(.*?)^```", text, flags=re.S | re.M)


def inline_code(text: str) -> list[str]:
    """Every inline code span outside fenced blocks."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.findall(r"(?<!`)`([^`\n]+)`(?!`)", prose)


def command_lines(text: str) -> list[str]:
    """Shell command lines of bash/sh/console/unlabelled code blocks, comments removed."""
    lines = []
    for lang, body in code_blocks(text):
        if lang.strip() not in ("", "bash", "sh", "console", "shell"):
            continue
        for line in body.splitlines():
            line = re.sub(r"(^|\s)#.*$", "", line).strip().removeprefix("$ ")
            if line:
                lines.append(line)
    return lines


# --------------------------------------------------------------------------- paths


def _strip(token: str) -> str:
    token = token.strip("'\"")
    token = re.sub(r"[),.;:]+$", "", token)
    return token.split("#")[0]


def path_tokens(text: str) -> set[str]:
    tokens = set()
    candidates = list(inline_code(text))
    for line in command_lines(text):
        candidates += line.split()
    candidates += re.findall(r"\]\(([^)#\s]+)", text)  # markdown link targets
    for raw in candidates:
        for token in raw.split():
            token = _strip(token)
            head = token.split("/")[0]
            if (head in REPO_DIRS + OUTPUT_DIRS and "/" in token) or token in ROOT_FILES:
                tokens.add(token)
    return tokens


def _expand_braces(pattern: str) -> list[str]:
    match = re.search(r"\{([^{}]*,[^{}]*)\}", pattern)
    if not match:
        return [pattern]
    out = []
    for alt in match.group(1).split(","):
        out += _expand_braces(pattern[: match.start()] + alt + pattern[match.end() :])
    return out


def _globbed(pattern: str) -> str:
    """Placeholders ({dataset}, <name>, A{3..10}, N) become glob wildcards."""
    pattern = re.sub(r"\{[^{}]*\}|<[^<>]*>", "*", pattern)
    return re.sub(r"\*+", "*", pattern)


@functools.cache
def code_corpus() -> str:
    """The tracked text of the workflow, the library, the configs and CI (never build products such as
    an egg-info copy of an older README)."""
    folders = ("Snakefile", "workflow/", "src/", "config/", "tests/slurm/", ".ci/")
    return "\n".join(text for rel, text in tracked_texts().items() if rel.startswith(folders))


def missing_paths(doc: Path) -> list[str]:
    text = doc.read_text()
    missing = []
    for token in sorted(path_tokens(text)):
        if token.split("/")[0] in OUTPUT_DIRS:
            # a result file: every literal part of its name must be something the workflow writes
            for pattern in _expand_braces(token):
                for part in re.split(r"[/{}<>*]+", pattern):
                    stem = part.split(".")[0]
                    # a name may be assembled from pieces (f"table_{name}"): each piece must occur
                    for piece in re.split(r"[_\-]+", stem) if stem not in code_corpus() else []:
                        if len(piece) > 2 and piece not in code_corpus():
                            missing.append(f"{token} ({piece!r} appears nowhere in the workflow or library)")
            continue
        for pattern in _expand_braces(token):
            if "..." in pattern or "PATH" in pattern or pattern.startswith(BUILD_OUTPUTS):
                continue
            if not list(ROOT.glob(_globbed(pattern).rstrip("/"))):
                missing.append(token)
    return missing


@pytest.mark.parametrize("doc", DOC_FILES, ids=doc_id)
def test_named_paths_exist(doc):
    missing = sorted(set(missing_paths(doc)))
    assert not missing, f"{doc_id(doc)} names paths that do not exist: {missing}"


# --------------------------------------------------------------------------- config keys


@functools.cache
def schema() -> dict:
    from dpcl.config import load_schema

    return load_schema()


def _child(node: dict, key: str) -> dict | None:
    if key in node.get("properties", {}):
        return node["properties"][key]
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        return extra
    for alt in node.get("anyOf", []) + node.get("oneOf", []):
        found = _child(alt, key)
        if found is not None:
            return found
    return None


def key_exists(path: list[str]) -> bool:
    node = schema()
    for key in path:
        node = _child(node, key)
        if node is None:
            return False
    return True


def is_code_name(span: str) -> bool:
    """`learners.agem` (a module of dpcl) or `agem.smk` (a rule file), not a config key."""
    module = ROOT / "src" / "dpcl" / span.replace(".", "/")
    return module.with_suffix(".py").exists() or module.is_dir() or span.endswith((".smk", ".py", ".yaml"))


def dotted_keys(text: str) -> set[str]:
    """Inline spans like `audit.whitebox_runs`, `datasets.<name>.pool_per_class` or `tuning.protocol: paper`
    whose first part is a top-level config key."""
    top = set(schema()["properties"])
    keys = set()
    for span in inline_code(text):
        span = span.split(":")[0].strip()
        if re.fullmatch(r"[a-z_]+(\.(<[a-z]+>|[a-z_0-9]+))+", span) and span.split(".")[0] in top:
            if not is_code_name(span):
                keys.add(span)
    return keys


def yaml_keys(text: str) -> set[str]:
    """Every key path of a YAML code block that is a config fragment (its top-level keys are config keys)."""
    top = set(schema()["properties"])
    keys = set()

    def walk(node, prefix):
        if isinstance(node, dict):
            for k, v in node.items():
                keys.add(f"{prefix}{k}")
                walk(v, f"{prefix}{k}.")

    for lang, body in code_blocks(text):
        if lang.strip() != "yaml":
            continue
        data = yaml.safe_load(body)
        if isinstance(data, dict) and set(data) <= top:
            walk(data, "")
    return keys


@pytest.mark.parametrize("doc", DOC_FILES, ids=doc_id)
def test_named_config_keys_exist(doc):
    text = doc.read_text()
    named = dotted_keys(text) | yaml_keys(text)
    unknown = sorted(k for k in named if not key_exists(re.sub(r"<[a-z]+>", "x", k).split(".")))
    assert not unknown, f"{doc_id(doc)} names config keys the schema does not have: {unknown}"


# --------------------------------------------------------------------------- command-line flags


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings}


@functools.cache
def dpcl_commands() -> dict[str, argparse.ArgumentParser]:
    """'dpcl ledger verify' -> its parser, for every command (the walk the CLI reference page uses)."""
    from dpcl.cli import build_parser

    return dict(dpcl_docs.subcommands(build_parser()))


@functools.cache
def snakemake_flags() -> frozenset[str]:
    from snakemake.cli import get_argument_parser

    return frozenset(_options(get_argument_parser()))


@functools.cache
def all_dpcl_flags() -> frozenset[str]:
    return frozenset().union(*(_options(p) for p in dpcl_commands().values()))


def _flags(tokens: list[str]) -> list[str]:
    out = []
    for token in tokens:
        token = token.strip("[]")
        if token.startswith("--") and len(token) > 2:
            out.append(token.split("=")[0])
    return out


def unknown_flags(text: str) -> list[str]:
    bad = []
    for line in command_lines(text):
        for command in re.split(r"\s*(?:&&|\|\||\||;)\s*", line):
            try:
                tokens = shlex.split(command)
            except ValueError:
                tokens = command.split()
            if not tokens:
                continue
            if tokens[0] == "dpcl":
                command = "dpcl"
                for token in tokens[1:]:
                    if f"{command} {token}" not in dpcl_commands():
                        break
                    command = f"{command} {token}"
                known = _options(dpcl_commands()[command])
            elif tokens[0] == "snakemake":
                known = snakemake_flags()
            else:
                continue
            bad += [f"{f} (in `{command}`)" for f in _flags(tokens) if f not in known]
    for span in inline_code(text):
        if span.startswith("--"):
            known = all_dpcl_flags() | snakemake_flags()
            bad += [f"{f} (in `{span}`)" for f in _flags(span.split()) if f not in known]
    return bad


@pytest.mark.parametrize("doc", DOC_FILES, ids=doc_id)
def test_named_cli_flags_exist(doc):
    bad = unknown_flags(doc.read_text())
    assert not bad, f"{doc_id(doc)} names command-line flags that do not exist: {bad}"


def test_checks_catch_what_they_should(tmp_path):
    """The detectors flag a renamed path, key and flag (and pass the real ones)."""
    doc = tmp_path / "page.md"
    doc.write_text(
        "`src/dpcl/no_such_module.py`, `results/tables/qzqzq_table.md`, `audit.no_such_key`\n\n"
        "```bash\ndpcl ledger verify --no-such-flag x.json\nsnakemake --cores all --no-such-option\n```\n"
    )
    missing = missing_paths(doc)
    assert "src/dpcl/no_such_module.py" in missing
    assert any("qzqzq" in m for m in missing)
    assert not key_exists(["audit", "no_such_key"]) and key_exists(["audit", "whitebox_runs"])
    assert key_exists(["datasets", "x", "pool_per_class"])
    bad = unknown_flags(doc.read_text())
    assert any("--no-such-flag" in b for b in bad) and any("--no-such-option" in b for b in bad)
    assert "--cores" not in {b.split()[0] for b in bad}
    assert "audit.no_such_key" in dotted_keys(doc.read_text())


# --------------------------------------------------------------------------- README and numbers


def test_readme_is_short():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; move detail into docs/"


def test_readme_numbers_come_from_the_generated_files():
    """The README's default table and timings are exactly what docs/update_numbers.py writes from
    docs/_numbers/ (rerun it after a run instead of editing them by hand)."""
    text = (ROOT / "README.md").read_text()
    for name, body in update_numbers.readme_blocks().items():
        assert f"<!-- numbers:{name} -->\n{body}<!-- /numbers:{name} -->" in text, name


def test_numbers_are_rewritten_from_a_run(tmp_path):
    """update_numbers reads the pipeline's table and CI's timings and renders them."""
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "split_fmnist.md").write_text(
        "### t\n\n| ε | Classifier |\n|---|---|\n| 1 | Cosine Classifier |\n\nnote\n"
    )
    (tmp_path / "ci").mkdir()
    (tmp_path / "ci" / "timings.tsv").write_text("default\t299\npytest\t61\ntotal\t1200\n")
    (tmp_path / "ci" / "pytest.xml").write_text(
        '<testsuites><testsuite tests="12" time="61.0"/></testsuites>'
    )
    assert (
        update_numbers.default_table(tmp_path) == "| ε | Classifier |\n|---|---|\n| 1 | Cosine Classifier |\n"
    )
    timings = update_numbers.read_timings(tmp_path)
    tests = update_numbers.read_tests(tmp_path)
    assert tests == (12, 61.0)
    assert "| embedded default pipeline, clean `results/` | 4 min 59 s |" in update_numbers.timings_page(
        timings, tests
    )
    summary = update_numbers.timings_summary(timings, tests)
    assert "the default pipeline 4 min 59 s" in summary and "12 tests 1 min 1 s" in summary
    machine = {
        "dim": 1280,
        "expected_batch": 256,
        "roofs": {"gflops": 300.4, "gbytes_per_s": 14.04, "mnormals_per_s": 110.2},
        "steps": [
            {"outputs": 10, "private_over_bound": 2.71, "private_over_nonprivate": 1.311},
            {"outputs": 2, "private_over_bound": 2.84, "private_over_nonprivate": 1.256},
        ],
    }
    (tmp_path / "ci" / "machine.json").write_text(json.dumps(machine))
    with_machine = update_numbers.timings_summary(timings, tests, update_numbers.read_machine(tmp_path))
    assert with_machine.startswith(summary) and "300 GFLOP/s, copy 14.0 GB/s, 110 M normals/s" in with_machine
    assert (
        "2 / 10 outputs) took 2.84× / 2.71× its roofline bound, private/non-private 1.26 / 1.31"
        in with_machine
    )
    assert update_numbers.read_cpu(tmp_path) == {}  # two columns: no CPU column in the page
    assert "CPU time" not in update_numbers.timings_page(timings, tests)
    (tmp_path / "ci" / "timings.tsv").write_text("default\t299\t590\npytest\t61\ntotal\t1200\t2100\n")
    cpu = update_numbers.read_cpu(tmp_path)
    assert cpu == {"default": 590.0, "total": 2100.0} and update_numbers.read_timings(tmp_path) == timings
    page = update_numbers.timings_page(timings, tests, cpu)
    assert "| embedded default pipeline, clean `results/` | 4 min 59 s | 9 min 50 s | 1.97 |" in page
    assert "| test suite (`python -m pytest -n auto`) | 1 min 1 s (12 tests) | – | – |" in page
    assert "all of `.ci/run` 20 min 0 s (35 min 0 s of CPU time)" in update_numbers.timings_summary(
        timings, tests, cpu=cpu
    )
    (tmp_path / "ci" / "timings.tsv").write_text("defualt\t1\n")
    with pytest.raises(SystemExit, match="unknown step"):
        update_numbers.read_timings(tmp_path)
    (tmp_path / "ci" / "timings.tsv").write_text("default\t1\t2\t3\n")
    with pytest.raises(SystemExit, match="optionally core-seconds"):
        update_numbers.read_timings(tmp_path)


# --------------------------------------------------------------------------- no pointers outside


def test_nothing_points_outside_the_repository():
    """No pointer a reader cannot follow: planning notes outside the repository or tracker numbers."""
    pattern = re.compile(
        r"\bDESIGN\b|\.\./shared|\b[Ii]ssues?[ -]#?\d+|(?:^|[\s(])#\d{1,4}\b(?![\da-fA-F};])"
    )
    this = Path(__file__).resolve()
    hits = [
        f"{rel}:{n}: {line.strip()[:100]}"
        for rel, text in tracked_texts().items()
        if ROOT / rel != this
        for n, line in enumerate(text.splitlines(), 1)
        if pattern.search(line)
    ]
    assert not hits, "pointers outside the repository:\n" + "\n".join(hits)
