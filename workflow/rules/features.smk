# Feature caching: one job per dataset × backbone × split, shared by every run.

from dpcl.backbones import checkpoint_files


rule features:
    input:
        f"{RES}/{{dataset}}/MANIFEST.json",
        checkpoint=lambda w: checkpoint_files(config["backbones"][w.backbone]),  # a local file: reruns on change
    output:
        f"{R}/features/{{dataset}}/{{backbone}}/{{split}}.npz",
    log:
        f"{R}/logs/features/{{dataset}}_{{backbone}}_{{split}}.log",
    priority: 90
    conda:
        "../envs/dpcl.yaml"
    # half the cores, at most 8 (--cpus-per-task on SLURM): two feature jobs run at once, and a job never
    # needs every core (Snakemake holds no core back for it, so it would wait for a moment when no other
    # job runs)
    threads: max(1, min(8, (workflow.cores or 2) // 2))
    resources:
        mem_mb=4000,
        runtime=60,  # minutes
    params:
        dataset_cfg=lambda w: config["datasets"][w.dataset],
        backbone_cfg=lambda w: config["backbones"][w.backbone],
    script:
        "../scripts/features.py"
