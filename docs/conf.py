"""Sphinx configuration of the dpcl documentation (``sphinx-build -W docs docs/_build/html``).

The pages are MyST Markdown. Three parts are generated at build time by the local extension
``_ext/dpcl_docs.py`` so that they cannot drift from the code: the configuration reference (from the
config schema's descriptions), the command-line reference (from the ``dpcl`` argparse parser) and the
API reference (autodoc of every module of the library's public packages). Measured numbers (the
default benchmark's table, the CI timings) are included from ``docs/_numbers/``, which
``docs/update_numbers.py`` writes from a run's ``results/``.
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))

project = "dpcl"
author = "dpcl developers"
copyright = "dpcl developers"  # noqa: A001 - Sphinx's name

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "dpcl_docs",
]

source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_generated", "_numbers", "examples", "README.md"]
myst_enable_extensions = ["deflist", "colon_fence", "dollarmath"]
myst_heading_anchors = 3

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True}
# torch, timm and opacus are real imports of the library: the docs build in the installed environment

html_theme = "furo"
html_title = "dpcl"
html_static_path: list[str] = []
