"""Privacy mechanisms (analytic Gaussian, k-TSGD and Laplace label release), accounting (budget
split, DP-SGD PRV/RDP) and the per-run ledger with its verifier ([LabelSpace] Sec. 3-4, App. B-C).

Imports nothing from learners/, data/, report/, audits/ or stages/: mechanisms know no learner, no
data set and no presentation.
"""
