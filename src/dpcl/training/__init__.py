"""DP-SGD training engines: ``heads`` (linear heads on cached features, closed-form per-sample
clipping), ``film`` (opacus hooks on images, FiLM parameters + head), ``projection`` (the A-GEM
projection both engines apply), and the tuning studies: ``tuning`` (Optuna, App. D.1) and
``grid_search`` (a fixed grid); a learner supplies only the score of a trial, its own loop.

May import (:data:`MAY_IMPORT`): privacy/ (accounting), data/ (data-set names and sizes), backbones,
features, devices, sorted_ints, seeding, io. Never learners/, stages/ or report/:
the learners drive these engines, not the other way round.
"""

#: what this package's modules may import from the rest of dpcl (a package, a top-level module, or
#: one module of a package), module-level and function-level imports alike: tests/test_layers.py
MAY_IMPORT = ("privacy", "data", "backbones", "features", "devices", "seeding", "io", "sorted_ints")
