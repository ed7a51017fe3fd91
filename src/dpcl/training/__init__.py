"""DP-SGD training engines: ``heads`` (linear heads on cached features, closed-form per-sample
clipping), ``film`` (opacus hooks on images, FiLM parameters + head), ``projection`` (the A-GEM
projection both engines apply) and ``tuning`` (Optuna, App. D.1).

May import: privacy/ (accounting), data/ (data-set names and sizes), backbones, features, seeding, io. Never learners/, stages/ or report/:
the learners drive these engines, not the other way round.
"""
