# dpcl workflow: feature caching → scenario → label release → per-task DP training and
# evaluation → tables and figures. All logic lives in src/dpcl; rules only name files.
#
#   snakemake --cores all                                   # embedded default benchmark
#   snakemake --cores all --configfile my.yaml              # your settings (validated)

import os
import re
import sys

from dpcl.config import ConfigError, benchmark_dataset, eps_tag, run_targets, validate_config
from dpcl.learners import registry as learners

# The embedded default, unless the user names config files (which then replace it rather
# than merge with it); --config key=value overrides apply either way.
if not workflow.overwrite_configfiles:

    configfile: os.path.join(workflow.basedir, "config", "config.yaml")


try:
    validate_config(config)  # registers the learners of learner_modules (a user's own) first
except ConfigError as err:
    raise WorkflowError(str(err)) from None
learners.export_modules(config["learner_modules"])  # every job's process registers them too

# Warm worker (workflow/scripts/warm_worker.py, workflow plumbing beside the rule scripts that use
# it): local jobs fork from one process that has imported torch & co. once; cluster jobs and jobs
# inside a SLURM allocation start their own interpreter, and so does every job when the environment
# says DPCL_WARM_WORKER=0.
sys.path.insert(0, os.path.join(workflow.basedir, "workflow", "scripts"))
from warm_worker import configure_for_workflow

sys.path.pop(0)  # the rule scripts' names stay off the workflow's own import path
configure_for_workflow(config["warm_worker"], workflow.local_exec)
# glibc's allocator: keep the memory a job frees for its next arrays (mallopt(3)'s environment
# variables, read when a job's process starts). Without them glibc maps every array above its mmap
# threshold on its own and unmaps it on free, so wide heads (Public Labels x1000) fault in fresh
# pages for every array; with them freed arrays are reused in place. Same arithmetic, same outputs;
# a job's resident memory stays at its peak until it exits. A user's own setting of either wins.
KEEP_FREED_MEMORY = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(1 << 40)}
if config["keep_freed_memory"] and not any(k in os.environ for k in KEEP_FREED_MEMORY):
    os.environ.update(KEEP_FREED_MEMORY)


# Snakemake's own report (snakemake --report report.zip): this description, and the outputs
# marked report(...) in the rules with their captions (workflow/report/*.rst).
report: "workflow/report/workflow.rst"


R = config["results"]
RES = config["resources"]
EPS = [eps_tag(e) for e in config["epsilons"]]
METHODS = config["label_methods"]
SEEDS = config["seeds"]


wildcard_constraints:
    seed=r"\d+",
    eps=r"[0-9.e+-]+|inf",
    split="train|test|tune|pool",
    dataset=r"[A-Za-z0-9_]+",
    backbone=r"[A-Za-z0-9_.-]+",
    benchmark="|".join(re.escape(b) for b in config["benchmarks"]),
    scenario=r"[a-z]+(-n[0-9.]+-m[0-9.]+)?-t\d+",
    task=r"\d+",
    method=r"[a-z0-9.-]+",
    learner=learners.wildcard(),  # every registered learner (dpcl.learners.registry)


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/features.smk"
include: "workflow/rules/scenarios.smk"
include: "workflow/rules/labels.smk"
include: "workflow/rules/prototypes.smk"
include: "workflow/rules/heads.smk"
include: "workflow/rules/agem.smk"
include: "workflow/rules/projected.smk"
include: "workflow/rules/learners.smk"
include: "workflow/rules/film.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/privacy.smk"
include: "workflow/rules/paper_tables.smk"
include: "workflow/rules/active.smk"
include: "workflow/rules/paper_figures.smk"  # keep last: report.html collects every other target


# Under a cluster executor (snakemake --profile slurm) these cheap steps run on the
# submitting machine instead of waiting in the queue; a download also needs the internet,
# which compute nodes often lack. No effect on local runs. Resources: see the rules and
# profiles/slurm/config.yaml.
localrules:
    obtain_dataset,
    report,
    summary_table,
    privacy_figures,
    aggregation_figure,
    fig3_desai,
    paper_figures,
    paper_tables,
    html_report,
    active_report,


rule all:
    default_target: True
    input:
        all_reports(),
        aggregation_figure_files(),
        fig3_files(),
        html_report_files(),
        paper_table_files(),
        active_report_files(),


# Every rule reruns when the library code its script reaches changes: its
# parameter dpcl_code is a hash of the script and every dpcl module it imports, transitively
# (dpcl.provenance.code_hash), and Snakemake's parameter trigger compares it with the last run.
from dpcl.provenance import code_hash

for _rule in workflow.rules:
    if _rule.script:
        _rule.set_params(dpcl_code=code_hash(os.path.join(_rule.basedir, _rule.script)))
