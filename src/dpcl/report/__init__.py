"""Tables and figures from result files (metrics.json, reference CSVs).

Reads results, never trains: no import of training/ or stages/ (rule names and similar constants
are passed in by stages/), and of learners/ only the registry (``dpcl.learners.registry``: what a
learner is called and which comparison it belongs to). Mechanism formulas (privacy/) and scenario splits (data/) may
be imported for the figures that plot them (Figs. 2, A1, 7).
"""
