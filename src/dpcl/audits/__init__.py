"""The label-space attack game ([LabelSpace] Fig. 1) and empirical privacy audits (canary-based,
Clopper-Pearson) of mechanisms and learners.

May import (:data:`MAY_IMPORT`): privacy/, training/, learners/, data/, backbones, features,
sorted_ints, seeding, io. Audits sit above the learners they audit; privacy/ never imports them.
"""

#: what this package's modules may import from the rest of dpcl (a package, a top-level module, or
#: one module of a package), module-level and function-level imports alike: tests/test_layers.py
MAY_IMPORT = (
    "privacy",
    "training",
    "learners",
    "data",
    "backbones",
    "features",
    "sorted_ints",
    "seeding",
    "io",
)
