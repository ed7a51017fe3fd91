"""One module per DAG stage, named like its rule file ``workflow/rules/<stage>.smk`` (``common``
holds what the learner stages share, like ``common.smk``): the only library code that knows the
results/ layout — paths in, files out. ``workflow/scripts/*.py`` call these and nothing else.

May import everything below it (:data:`MAY_IMPORT`): learners/, training/, privacy/, audits/, active/,
data/, report/ and the top-level library modules (not the CLI or the process plumbing).
"""

#: what this package's modules may import from the rest of dpcl (a package, a top-level module, or
#: one module of a package), module-level and function-level imports alike: tests/test_layers.py
MAY_IMPORT = (
    "learners",
    "training",
    "privacy",
    "audits",
    "active",
    "data",
    "report",
    "backbones",
    "features",
    "config",
    "devices",
    "metrics",
    "provenance",
    "public_pca",
    "sorted_ints",
    "seeding",
    "io",
)
