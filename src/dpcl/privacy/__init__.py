"""Privacy mechanisms (analytic Gaussian, k-TSGD and Laplace label release), accounting (budget
split, DP-SGD PRV/RDP) and the per-run ledger with its verifier ([LabelSpace] Sec. 3-4, App. B-C).

Imports nothing from learners/, data/, report/, audits/ or stages/: mechanisms know no learner, no
data set and no presentation (:data:`MAY_IMPORT`: sorted_ints, seeding, io; the DP active-learning group
ledger's check against its schedules is the one exception, listed in tests/test_layers.py).
"""

#: what this package's modules may import from the rest of dpcl (a package, a top-level module, or
#: one module of a package), module-level and function-level imports alike: tests/test_layers.py
MAY_IMPORT = ("sorted_ints", "seeding", "io")
