"""Continual learners on a frozen pre-trained backbone: ``cosine`` (Alg. 1), ``peft`` (the PEFT
ensemble, Alg. 2, head-only and FiLM, with the Naive / Non-CL baselines, Alg. A1-A2), ``agem`` and
``agem_film`` (the enhanced DP-A-GEM baseline, App. D.4) and ``aggregation`` (Eq. 11, App. D.2).

May import: training/, privacy/, data/ (label spaces), seeding. Never stages/ (no workflow, no files)
or report/ (no presentation).
"""
