# Obtain a data set into resources/ (Debian package copy or verified download).


rule obtain_dataset:
    output:
        f"{RES}/{{dataset}}/MANIFEST.json",
    params:
        cfg=lambda w: config["datasets"][w.dataset],
    log:
        f"{R}/logs/obtain_dataset/{{dataset}}.log",
    script:
        "../scripts/obtain_dataset.py"
