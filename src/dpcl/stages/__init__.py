"""One module per DAG stage, named like its rule file ``workflow/rules/<stage>.smk`` (``common``
holds what the learner stages share, like ``common.smk``): the only library code that knows the
results/ layout — paths in, files out. ``workflow/scripts/*.py`` call these and nothing else.

May import everything below it: learners/, training/, privacy/, audits/, data/, report/ and the
top-level modules.
"""
