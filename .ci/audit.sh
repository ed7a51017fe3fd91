#!/usr/bin/env bash
# The strong privacy audits (config/audit.yaml over the default config: every DP learner's white-box
# audit at epsilon 1, 2, 4 and 8 beside the mechanisms' and the learners' canary audits), then checks the
# table: no correct mechanism or learner is refuted (its lower bounds stay at or below its claims), every
# variant broken on purpose and every method audited as published whose claim does not hold is refuted,
# and every white-box row reaches half of its claimed mu (the audit has power).
set -euo pipefail
cd "$(dirname "$0")/.."
out=results/audit
mkdir -p "$out"
start=$SECONDS
if ! snakemake --cores all --configfile config/config.yaml config/audit.yaml \
    -- "$out/tables/privacy_audit.md" > "$out/snakemake.log" 2>&1; then
    tail -n 80 "$out/snakemake.log"
    exit 1
fi
echo "strong privacy audits: $((SECONDS - start)) s"
python - "$out/tables/privacy_audit.csv" <<'PY'
import math
import sys

import pandas as pd

df = pd.read_csv(sys.argv[1])
assert len(df), "empty audit table"
violated = df["verdict"].str.startswith("refuted")
bad = df[violated != df["broken"].astype(bool)]
assert bad.empty, f"verdicts against expectation:\n{bad[['mechanism', 'claimed_epsilon', 'verdict']]}"
white = df[df["mechanism"].str.contains("(white-box)", regex=False)]
for _, r in white.iterrows():
    if isinstance(r.get("mu_lower_bound"), float) and math.isfinite(r["mu_lower_bound"]):
        assert r["mu_lower_bound"] >= 0.5 * r["claimed_mu"], f"weak: {r['mechanism']} at {r['claimed_epsilon']}"
print(f"{len(df)} rows, {int(violated.sum())} refuted as expected, {len(white)} white-box rows")
PY
cat "$out/tables/privacy_audit.md"
