"""Sphinx extension of the dpcl docs: the reference pages generated from the code at build time.

* ``_generated/config_reference.md``: every key of the config schema (``dpcl.config.load_schema``, the
  same schema the workflow validates against), its type, default, allowed values and description;
* ``_generated/cli_reference.md``: every ``dpcl`` command with its usage and options, from the argparse
  parser the command line runs (``dpcl.cli.build_parser``);
* ``_generated/api_<package>.md``: an ``automodule`` block for every module of a public package, found
  by walking the package, so a new module is documented without editing a page.

The pages ``configuration.md``, ``cli.md`` and ``api/*.md`` include these files. A schema key without a
description is a build error.
"""

from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import re
from pathlib import Path

API_PACKAGES = ("privacy", "learners", "training", "data", "audits", "active")


class DocsError(RuntimeError):
    """A generated page could not be written from the code (e.g. an undocumented schema key)."""


# --------------------------------------------------------------------------- configuration reference


def _type_text(node: dict) -> str:
    if "enum" in node:
        return "one of " + ", ".join(f"`{json.dumps(v)}`" for v in node["enum"])
    if "const" in node:
        return f"`{json.dumps(node['const'])}`"
    if "anyOf" in node or "oneOf" in node:
        return " or ".join(_type_text(n) for n in node.get("anyOf", node.get("oneOf", [])))
    kind = node.get("type", "any")
    kinds = kind if isinstance(kind, list) else [kind]
    text = " or ".join(kinds)
    if "array" in kinds and isinstance(node.get("items"), dict):
        text += f" of {_type_text(node['items'])}"
    bounds = []
    for key, sign in (
        ("minimum", "≥"),
        ("exclusiveMinimum", ">"),
        ("maximum", "≤"),
        ("exclusiveMaximum", "<"),
    ):
        if key in node:
            bounds.append(f"{sign} {node[key]}")
    if bounds:
        text += " (" + ", ".join(bounds) + ")"
    if "pattern" in node:
        text += f", matching `{node['pattern']}`"
    return text


def _default_text(node: dict) -> str:
    if "default" not in node:
        return "required" if node.get("_required") else "no default"
    return f"default `{json.dumps(node['default'], ensure_ascii=False)}`"


def _entries(node: dict, path: str):
    """(dotted key, schema node) for every documented key below ``node``, depth first."""
    required = set(node.get("required", []))
    for key, child in node.get("properties", {}).items():
        child = dict(child, _required=key in required)
        yield f"{path}{key}", child
        yield from _children(child, f"{path}{key}.")


def _children(node: dict, path: str):
    if node.get("properties"):
        yield from _entries(node, path)
    extra = node.get("additionalProperties")
    if isinstance(extra, dict) and extra.get("properties"):
        yield from _entries(extra, f"{path}<name>.")


def config_reference() -> str:
    from dpcl.config import load_schema

    schema = load_schema()
    lines = []
    top = schema["properties"]
    missing = []
    scalars = [k for k in top if not list(_children(top[k], f"{k}."))]
    blocks = [k for k in top if k not in scalars]
    sections = [("Top-level keys", scalars)] + [(f"`{k}`", [k]) for k in blocks]
    for title, keys in sections:
        entries = []
        for key in keys:
            entries.append((key, dict(top[key], _required=key in schema.get("required", []))))
            entries += list(_children(top[key], f"{key}."))
        lines += [f"### {title}", ""]
        for dotted, node in entries:
            description = " ".join(str(node.get("description", "")).split())
            if not description:
                missing.append(dotted)
            lines += [f"`{dotted}`", f": *{_type_text(node)}; {_default_text(node)}.* {description}", ""]
    if missing:
        raise DocsError(f"config keys without a description in the schema: {', '.join(missing)}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- command-line reference


def subcommands(parser: argparse.ArgumentParser, prefix: str = "dpcl"):
    """(command line, parser) of ``parser`` and of every subcommand below it, depth first."""
    yield prefix, parser
    for action in parser._actions:  # argparse has no public walk over subparsers
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                sub._dpcl_help = helps.get(name)
                yield from subcommands(sub, f"{prefix} {name}")


def cli_reference() -> str:
    from dpcl.cli import build_parser

    lines = []
    for command, parser in subcommands(build_parser()):
        options = [a for a in parser._actions if a.option_strings and not isinstance(a, argparse._HelpAction)]
        positionals = [
            a
            for a in parser._actions
            if not a.option_strings and not isinstance(a, argparse._SubParsersAction)
        ]
        if command != "dpcl" and not options and not positionals:
            continue  # a command group: its commands follow
        lines += [f"### `{command}`", ""]
        summary = getattr(parser, "_dpcl_help", None) or (parser.description or "").split("\n")[0]
        if summary:
            lines += [summary[0].upper() + summary[1:] + ("" if summary.endswith(".") else "."), ""]
        usage = parser.format_usage().removeprefix("usage: ").strip()
        lines += ["```text", " ".join(usage.split()), "```", ""]
        for action in positionals + options:
            name = ", ".join(f"`{s}`" for s in action.option_strings) or f"`{action.metavar or action.dest}`"
            text = " ".join((action.help or "").split()) % {"default": action.default, "prog": command}
            text = text[:1].upper() + text[1:]
            if text and not text.endswith("."):
                text += "."
            if action.choices and not isinstance(action, argparse._SubParsersAction):
                text += " Choices: " + ", ".join(f"`{c}`" for c in action.choices) + "."
            if action.default not in (None, False, argparse.SUPPRESS) and "default" not in text.lower():
                text += f" Default: `{action.default}`."
            lines += [name, f": {text.strip() or '(no help)'}", ""]
    return "\n".join(lines)


# --------------------------------------------------------------------------- API reference


def api_reference(package: str) -> str:
    root = importlib.import_module(f"dpcl.{package}")
    names = [f"dpcl.{package}"] + sorted(
        m.name for m in pkgutil.iter_modules(root.__path__, prefix=f"dpcl.{package}.")
    )
    blocks = []
    for name in names:
        blocks += [f"## `{name}`", "", "```{eval-rst}", f".. automodule:: {name}", "```", ""]
    return "\n".join(blocks)


def write_generated(app) -> None:
    out = Path(app.srcdir) / "_generated"
    out.mkdir(exist_ok=True)
    pages = {"config_reference.md": config_reference(), "cli_reference.md": cli_reference()}
    pages.update({f"api_{p}.md": api_reference(p) for p in API_PACKAGES})
    for name, text in pages.items():
        path = out / name
        if not path.exists() or path.read_text() != text:  # unchanged files keep Sphinx's cache valid
            path.write_text(text)


# |O_t|, |h₁|: the docstrings' notation for a set's size or a vector's length, which reStructuredText would
# read as a substitution reference; outside inline literals the bars are escaped.
_BARS = re.compile(r"(?<![\\|`\w])\|([^|`\s][^|`]*?)\|(?![\w|`])")
_LITERAL = re.compile(r"(``.*?``)")


def escape_bars(app, what, name, obj, options, lines) -> None:
    for i, line in enumerate(lines):
        parts = _LITERAL.split(line)
        lines[i] = "".join(p if p.startswith("``") else _BARS.sub(r"\\|\1\\|", p) for p in parts)


def setup(app):
    app.connect("builder-inited", write_generated)
    app.connect("autodoc-process-docstring", escape_bars)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
