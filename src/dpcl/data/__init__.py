"""Data sets (loaders and real downloads), scenarios (task splits) and output label spaces.

May import (:data:`MAY_IMPORT`): privacy/ (the label-release mechanisms), seeding, io, sorted_ints. Never
learners/, stages/ or report/.
"""

#: what this package's modules may import from the rest of dpcl (a package, a top-level module, or
#: one module of a package), module-level and function-level imports alike: tests/test_layers.py
MAY_IMPORT = ("privacy", "seeding", "io", "sorted_ints")
