"""Tables and figures from result files (metrics.json, reference CSVs).

Reads results, never trains (:data:`MAY_IMPORT`): no import of training/ or stages/ (rule names and
similar constants are passed in by stages/), and of learners/ only the registry (``dpcl.learners.registry``: what a
learner is called and which comparison it belongs to). Mechanism formulas (privacy/) and scenario splits (data/) may
be imported for the figures that plot them (Figs. 2, A1, 7).
"""

#: what this package's modules may import from the rest of dpcl (a package, a top-level module, or
#: one module of a package), module-level and function-level imports alike: tests/test_layers.py
MAY_IMPORT = (
    "privacy",
    "data",
    "active",
    "learners.registry",
    "config",
    "provenance",
    "metrics",
    "sorted_ints",
    "seeding",
    "io",
)
