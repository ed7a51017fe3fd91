from dpcl.stages.privacy import audit_parts, audit_setting

# Data-independent privacy figures: label drop probability (Fig. 2) and its lower bound (Fig. A1).


rule privacy_figures:
    output:
        fig2=[
            report(
                f"{R}/figures/fig2_label_drop_probability.png",
                caption="../report/privacy_figure.rst",
                category="5. Privacy",
            ),
            f"{R}/figures/fig2_label_drop_probability.pdf",
        ],
        figA1=[
            report(
                f"{R}/figures/figA1_drop_lower_bound.png",
                caption="../report/privacy_figure.rst",
                category="5. Privacy",
            ),
            f"{R}/figures/figA1_drop_lower_bound.pdf",
        ],
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
        csv=report(
            f"{R}/tables/fig1_label_space_attack.csv",
            caption="../report/label_space_attack.rst",
            category="5. Privacy",
        ),
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


# the audit table's independent parts (dpcl.stages.privacy.audit_parts: the mechanisms, the learners'
# canary audits, each white-box audit over every claimed ε), one job each, merged by privacy_audit
AUDIT_PARTS = audit_parts(config["audit"])
# the pipeline's setting the learners are audited in: their DP-SGD, memory-buffer and learner blocks, a
# user's learner_options and the label methods each learner's jobs run (dpcl.stages.audit_runs)
AUDIT_SETTING = audit_setting(config, {name: methods_for(name) for name in learners.names()})


rule privacy_audit_part:
    output:
        f"{R}/privacy_audit/{{part}}.json",
    log:
        f"{R}/logs/privacy_audit/{{part}}.log",
    wildcard_constraints:
        part="|".join(re.escape(p) for p in AUDIT_PARTS),
    priority: 65
    conda:
        "../envs/dpcl.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        cfg=config["audit"],
        delta=config["delta"],
        setting=AUDIT_SETTING,
    script:
        "../scripts/privacy_audit_part.py"


rule privacy_audit:
    input:
        parts=expand(f"{R}/privacy_audit/{{part}}.json", part=AUDIT_PARTS),
    output:
        csv=report(
            f"{R}/tables/privacy_audit.csv", caption="../report/privacy_audit.rst", category="5. Privacy"
        ),
        md=f"{R}/tables/privacy_audit.md",
        png=report(
            f"{R}/figures/privacy_audit_claims.png",
            caption="../report/privacy_audit_figure.rst",
            category="5. Privacy",
        ),
        pdf=f"{R}/figures/privacy_audit_claims.pdf",
    log:
        f"{R}/logs/privacy_audit.log",
    priority: 65
    conda:
        "../envs/dpcl.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        cfg=config["audit"],
        delta=config["delta"],
        parts=AUDIT_PARTS,
    script:
        "../scripts/privacy_audit.py"
