"""Differentially private active learning ([Schwethelm2025]): schedules, acquisition, DP selection.

May import (:data:`MAY_IMPORT`): privacy/ (accounting, mechanisms), training/ (the DP-SGD engine),
metrics, sorted_ints, seeding, io."""

#: what this package's modules may import from the rest of dpcl (a package, a top-level module, or
#: one module of a package), module-level and function-level imports alike: tests/test_layers.py
MAY_IMPORT = ("privacy", "training", "seeding", "io", "sorted_ints", "metrics")
