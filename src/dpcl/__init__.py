"""dpcl: differentially private continual learning with pre-trained backbones.

The library is pure Python (no Snakemake import): every pipeline stage is a plain
function over arrays and paths, called by the thin scripts in ``workflow/scripts``,
by the ``dpcl`` command line and by the tests.
"""

__version__ = "0.2.0"
