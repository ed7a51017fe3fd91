# Obtain a data set into resources/ (Debian package copy or verified download).


rule obtain_dataset:
    output:
        f"{RES}/{{dataset}}/MANIFEST.json",
    log:
        f"{R}/logs/obtain_dataset/{{dataset}}.log",
    priority: 100  # first the data and features, then the long chains (DP-A-GEM, DP-AL) before the short jobs
    conda:
        "../envs/dpcl.yaml"
    threads: 1
    resources:
        mem_mb=6000,  # ImageNet-R decodes 30,000 JPEGs; 5-datasets holds ~2 GB of arrays
        runtime=60,  # minutes (a download, where no local copy exists)
    params:
        # only the keys that change what is obtained (a new train_per_class reruns features, not this)
        cfg=lambda w: {
            k: v
            for k, v in config["datasets"][w.dataset].items()
            if k
            in (
                "source",
                "verify",
                "local_dir",
                "split_seed",
                "image_size",
                "format",
                "root",
                "test_fraction",
                "public_label_names",
            )
        },
    script:
        "../scripts/obtain_dataset.py"
