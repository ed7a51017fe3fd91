# Data-independent privacy figures: label drop probability (Fig. 2) and its lower bound (Fig. A1).


rule privacy_figures:
    output:
        fig2=multiext(f"{R}/figures/fig2_label_drop_probability", ".png", ".pdf"),
        figA1=multiext(f"{R}/figures/figA1_drop_lower_bound", ".png", ".pdf"),
    log:
        f"{R}/logs/privacy_figures.log",
    conda:
        "../envs/dpcl.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        cfg=config["privacy_figures"],
    script:
        "../scripts/privacy_figures.py"


rule label_space_attack:
    output:
        csv=f"{R}/tables/fig1_label_space_attack.csv",
        md=f"{R}/tables/fig1_label_space_attack.md",
    log:
        f"{R}/logs/label_space_attack.log",
    conda:
        "../envs/dpcl.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        cfg=config["attack"],
        delta=config["delta"],
    script:
        "../scripts/label_space_attack.py"


rule privacy_audit:
    output:
        csv=f"{R}/tables/privacy_audit.csv",
        md=f"{R}/tables/privacy_audit.md",
    log:
        f"{R}/logs/privacy_audit.log",
    conda:
        "../envs/dpcl.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        cfg=config["audit"],
        delta=config["delta"],
    script:
        "../scripts/privacy_audit.py"
