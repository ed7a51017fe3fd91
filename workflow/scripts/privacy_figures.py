"""Fig. 2 and Fig. A1 (thin wrapper: dpcl.report.figures.plot_label_drop)."""

from dpcl.io import tee_stderr
from dpcl.report.figures import plot_label_drop

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
c = sm.params.cfg
plot_label_drop(c["epsilons"], c["deltas"], c["max_class_size"], list(sm.output.fig2))
plot_label_drop(c["epsilons"], c["deltas"], c["max_class_size"], list(sm.output.figA1), lower_bound=True)
