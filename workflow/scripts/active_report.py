"""DP-AL summary, tables and figures (thin wrapper: dpcl.stages.active.summarise and report)."""

from warm_worker import run_in_warm_worker

run_in_warm_worker()  # with warm_worker on, the rest runs in a pre-imported process (warm_worker.py)

from dpcl.io import tee_stderr
from dpcl.stages.active import report, summarise

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
summarise(list(sm.input.metrics), sm.output.summary)
report(
    sm.output.summary,
    dict(zip(sm.params.names, sm.input.schedules, strict=True)),
    out_tables=sm.params.tables,
    out_figures=sm.params.figures,
    epsilon=float(sm.params.epsilon),
    selection_epsilon=float(sm.params.selection_epsilon),
    fig5=bool(sm.params.fig5),
    table2_settings=list(sm.params.table2_settings),
)
