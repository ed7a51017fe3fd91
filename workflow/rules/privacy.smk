# Data-independent privacy figures: label drop probability (Fig. 2) and its lower bound (Fig. A1).


rule privacy_figures:
    output:
        fig2=multiext(f"{R}/figures/fig2_label_drop_probability", ".png", ".pdf"),
        figA1=multiext(f"{R}/figures/figA1_drop_lower_bound", ".png", ".pdf"),
    params:
        cfg=config["privacy_figures"],
    log:
        f"{R}/logs/privacy_figures.log",
    script:
        "../scripts/privacy_figures.py"
