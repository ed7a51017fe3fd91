# Task split per seed: class order and train-sample indices per task.


rule scenario:
    input:
        f"{RES}/{{dataset}}/MANIFEST.json",
    output:
        f"{R}/scenarios/{{dataset}}/{{scenario}}/seed{{seed}}.json",
    params:
        dataset_cfg=lambda w: config["datasets"][w.dataset],
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    log:
        f"{R}/logs/scenario/{{dataset}}_{{scenario}}_seed{{seed}}.log",
    script:
        "../scripts/scenario.py"
