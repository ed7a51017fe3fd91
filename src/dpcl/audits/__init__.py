"""The label-space attack game ([LabelSpace] Fig. 1) and empirical privacy audits (canary-based,
Clopper-Pearson) of mechanisms and learners.

May import: privacy/, training/, learners/, data/, backbones, seeding. Audits sit above the learners they audit; privacy/
never imports them.
"""
