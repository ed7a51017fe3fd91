"""Empirical privacy audit table (thin wrapper: dpcl.privacy.audit.audit_table)."""

from dpcl.io import tee_stderr, write_text
from dpcl.privacy.audit import audit_table, audit_table_markdown

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
c = sm.params.cfg
df = audit_table(c["epsilons"], sm.params.delta, c["trials"], c["seed"])
write_text(sm.output.csv, df.to_csv(index=False))
write_text(sm.output.md, audit_table_markdown(df))
