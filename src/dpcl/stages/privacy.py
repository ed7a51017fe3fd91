"""Stages of ``workflow/rules/privacy.smk``: the data-free privacy figures (Figs. 2, A1), the
label-space attack game (Fig. 1) and the empirical audit table."""

from __future__ import annotations

from pathlib import Path


def privacy_figures(cfg: dict, fig2: list[str | Path], figA1: list[str | Path]) -> None:
    """Fig. 2 (k-TSGD drop probability by class size) and Fig. A1 (the lower bound for any DP release)."""
    from ..report.figures import plot_label_drop

    plot_label_drop(cfg["epsilons"], cfg["deltas"], cfg["max_class_size"], list(fig2))
    plot_label_drop(cfg["epsilons"], cfg["deltas"], cfg["max_class_size"], list(figA1), lower_bound=True)


def label_space_attack(cfg: dict, delta: float, out_csv: str | Path, out_md: str | Path) -> None:
    """Fig. 1's attack table: the optimal attacker's accuracy against each label method."""
    from ..audits.attack import attack_table, attack_table_markdown
    from ..io import write_text

    df = attack_table(cfg["epsilons"], delta, cfg["trials"], cfg["seed"], methods=tuple(cfg["methods"]))
    write_text(out_csv, df.to_csv(index=False))
    write_text(out_md, attack_table_markdown(df))


def privacy_audit(cfg: dict, delta: float, out_csv: str | Path, out_md: str | Path) -> None:
    """The empirical audit table: Clopper-Pearson lower bounds on ε against the claimed ε."""
    from ..audits.audit import audit_table, audit_table_markdown
    from ..io import write_text

    df = audit_table(cfg["epsilons"], delta, cfg["trials"], cfg["seed"])
    write_text(out_csv, df.to_csv(index=False))
    write_text(out_md, audit_table_markdown(df))
