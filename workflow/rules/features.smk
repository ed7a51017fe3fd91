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
    threads: 8  # at most --cores locally; --cpus-per-task on SLURM
    resources:
        mem_mb=4000,
        runtime=60,  # minutes
    params:
        dataset_cfg=lambda w: config["datasets"][w.dataset],
        backbone_cfg=lambda w: config["backbones"][w.backbone],
    script:
        "../scripts/features.py"
