"""Privacy mechanisms (analytic Gaussian, k-TSGD and Laplace label release), accounting (budget
split, DP-SGD PRV/RDP) and the per-run ledger with its verifier ([LabelSpace] Sec. 3-4, App. B-C).

Imports nothing from learners/, active/, data/, report/, audits/ or stages/: mechanisms know no learner,
no data set and no presentation (:data:`MAY_IMPORT`: sorted_ints, seeding, io). The per-record group
ledger of DP active learning, whose verifier rebuilds the run's schedules, lives with them
(``dpcl.active.group_ledger``).
"""

#: what this package's modules may import from the rest of dpcl (a package, a top-level module, or
#: one module of a package), module-level and function-level imports alike: tests/test_layers.py
MAY_IMPORT = ("sorted_ints", "seeding", "io")
