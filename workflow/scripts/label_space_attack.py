"""Fig. 1 attack table (thin wrapper: dpcl.privacy.attack.attack_table)."""

from dpcl.io import tee_stderr, write_text
from dpcl.privacy.attack import attack_table, attack_table_markdown

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
c = sm.params.cfg
df = attack_table(c["epsilons"], sm.params.delta, c["trials"], c["seed"], methods=tuple(c["methods"]))
write_text(sm.output.csv, df.to_csv(index=False))
write_text(sm.output.md, attack_table_markdown(df))
