# Task split per seed: class order and train-sample indices per task.


rule scenario:
    input:
        f"{RES}/{{dataset}}/MANIFEST.json",
    output:
        f"{R}/scenarios/{{dataset}}/{{scenario}}/seed{{seed}}.json",
    log:
        f"{R}/logs/scenario/{{dataset}}_{{scenario}}_seed{{seed}}.log",
    priority: 100
    conda:
        "../envs/dpcl.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        dataset_cfg=lambda w: config["datasets"][w.dataset],
    script:
        "../scripts/scenario.py"
