"""Data sets (loaders and real downloads), scenarios (task splits) and output label spaces.

May import: privacy/ (the label-release mechanisms), seeding, io. Never learners/, stages/ or report/.
"""
