# Output label spaces O_t for every (ε, label method) of one seed in one job (cheap).


rule label_spaces:
    input:
        manifest=f"{RES}/{{dataset}}/MANIFEST.json",
        scenario=f"{R}/scenarios/{{dataset}}/{{scenario}}/seed{{seed}}.json",
    output:
        expand(
            f"{R}/labels/{{{{dataset}}}}/{{{{scenario}}}}/seed{{{{seed}}}}/eps{{eps}}/{{method}}.json",
            eps=EPS,
            method=METHODS,
        ),
    log:
        f"{R}/logs/labels/{{dataset}}_{{scenario}}_seed{{seed}}.log",
    priority: 90
    conda:
        "../envs/dpcl.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        epsilons=config["epsilons"],
        eps_tags=EPS,
        methods=METHODS,
        delta=config["delta"],
    script:
        "../scripts/label_spaces.py"
