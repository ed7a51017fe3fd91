# Obtain a data set into resources/ (Debian package copy or verified download).


rule obtain_dataset:
    output:
        f"{RES}/{{dataset}}/MANIFEST.json",
    params:
        cfg=lambda w: config["datasets"][w.dataset],
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,  # minutes (a download, where no local copy exists)
    log:
        f"{R}/logs/obtain_dataset/{{dataset}}.log",
    script:
        "../scripts/obtain_dataset.py"
