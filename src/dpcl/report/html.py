"""One self-contained HTML page of every table and figure of a workflow run, with the config
that produced them: figures embedded as base64 PNG, tables rendered from their Markdown and
CSV files, no external links, so the page can be mailed or opened offline."""

from __future__ import annotations

import base64
import csv
import html
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..io import write_text
from ..learners import registry

#: Captions by file stem pattern (first match wins); {bench}/{learner} come from the groups.
CAPTIONS: list[tuple[str, str]] = [
    (r"^fig1_label_space_attack$", "Fig. 1: membership attack on the output label space, per label method"),
    (r"^fig2_label_drop_probability$", "Fig. 2: probability that k-TSGD label release drops a new label"),
    (r"^figA1_drop_lower_bound$", "Fig. A1: lower bound on dropping a label for any (ε, δ)-DP release"),
    (r"^privacy_audit$", "Empirical privacy audit of the mechanisms (lower bounds on ε)"),
    (
        r"^privacy_audit_claims$",
        "Privacy audit: claimed ε against the audited lower bound per mechanism and learner (log axes; a "
        "correct implementation stays on or below the diagonal, crosses mark refuted claims)",
    ),
    (r"^fig4$", "Fig. 4: comparison of label methods (final accuracy; median, 2nd/4th best seed)"),
    (r"^fig5$", "Fig. 5: Release Labels, accuracy and released labels vs the budget fraction f"),
    (r"^fig6$", "Fig. 6: Public Labels of every size beside the baselines"),
    (r"^fig7$", "Fig. 7 (left): final accuracy vs the i-Blurry blurry ratio M"),
    (
        r"^figA3$",
        "Fig. A3: impact of blurriness per label method (Table A7 methods; median, 2nd/4th best seed)",
    ),
    (r"^figA4$", "Fig. A4: final accuracy vs ε per learner, Base Dataset (median, min/max over seeds)"),
    (
        r"^p003_fig4_blurry$",
        "[Tobaben2024] Fig. 4: Not Blurry vs I-Blurry (N = 50, M = 10) vs Si-Blurry, training samples per task "
        "(left) and final accuracy, Base Dataset (right; median, min/max over seeds)",
    ),
    (
        r"_figA5_accuracy_per_task$",
        "Figs. A5/A7/A8: test accuracy per task per learner, Base Dataset (median, min/max)",
    ),
    (
        r"_figA6_forgetting_per_task$",
        "Figs. A6/A9: forgetting per task per learner, Base Dataset (median, min/max)",
    ),
    (
        r"_noncl_[a-z]+_avg_acc$",
        "Final accuracy per ε and label method of Non-CL (one model trained on all tasks at once: no "
        "curve over tasks; median over seeds, error bars 2nd worst to 2nd best)",
    ),
    (r"_avg_acc$", "Average accuracy AA_t after each task (median over seeds; band 2nd worst to 2nd best)"),
    (r"_figA2_aggregation$", "Fig. A2: aggregation rules of the PEFT Ensemble (ArgMax, Median, Entropy)"),
    (r"_fig3_desai$", "Fig. 3: comparison with DP-A-GEM (Desai et al.) in the Base Dataset setting"),
    (r"_blurry_samples$", "Fig. 7 (right): samples per blurry class per task, per blurry ratio M"),
]

_CSS = """
body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}
h1{border-bottom:2px solid #444}h2{border-bottom:1px solid #aaa;margin-top:2em}
.item{margin:1.5em 0}img{max-width:100%;border:1px solid #ddd}
.miniature{background:#fff3cd;border:1px solid #e0b000;padding:.6em 1em}
table{border-collapse:collapse;font-size:0.85em;margin:0.5em 0}
th,td{border:1px solid #ccc;padding:2px 6px;text-align:left}th{background:#f0f0f0}
pre{background:#f7f7f7;padding:0.6em;overflow-x:auto;font-size:0.85em}
.files{color:#666;font-size:0.8em}nav li{margin:0.1em 0}
"""

FIGURE_EXTS = (".png", ".pdf", ".svg")
TABLE_EXTS = (".md", ".csv", ".tex")


@dataclass
class Section:
    """A heading, the files shown under it and the config entries that produced them."""

    title: str
    files: list[Path]
    config: dict = field(default_factory=dict)


def caption(stem: str) -> str:
    """A human caption for a table/figure file stem (empty when none is known)."""
    for pattern, text in CAPTIONS:
        if re.search(pattern, stem):
            return text
    return ""


def _bench_caption(stem: str, bench: str) -> str:
    rest = stem[len(bench) :].lstrip("_")
    if not rest:
        return "Final accuracy of every learner (Table A3 layout: median, 2nd worst and 2nd best seed)"
    if rest in registry.names():
        return f"Final accuracy of the {registry.get(rest).display} per label method and ε (Table A3 layout)"
    return ""


def _natural(path: Path) -> list:
    """Sort key that puts table_A4 before table_A10."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(path))]


def group_files(files: list[str | Path], config: dict) -> list[Section]:
    """Sections per benchmark (files named ``<benchmark>`` or ``<benchmark>_…``), for the paper
    figures/tables (``…/paper/``), for the privacy figures and tables, and 'Other'."""
    benches = sorted(config.get("benchmarks", {}), key=len, reverse=True)  # longest name wins
    groups: dict[str, list[Path]] = {}
    for f in map(Path, files):
        stem = f.stem
        if f.parent.name == "paper":
            key = f"paper {f.parent.parent.name}"
        elif any(stem == b or stem.startswith(b + "_") for b in benches):
            key = "bench " + next(b for b in benches if stem == b or stem.startswith(b + "_"))
        elif re.match(r"^(fig1_|fig2_|figA1_|privacy_audit)", stem):
            key = "privacy"
        elif stem.startswith("active_"):
            key = "active"
        else:
            key = "other"
        groups.setdefault(key, []).append(f)
    from ..config import benchmark_datasets

    shared = {
        k: config[k]
        for k in (
            "seeds",
            "epsilons",
            "delta",
            "label_methods",
            "head_label_methods",
            "nonprivate_label_methods",
            "learners",
            "dpsgd",
            "tuning",
            "agem",
            "aggregation",
            "film",
        )
        if k in config
    }
    sections = []
    for name in config.get("benchmarks", {}):
        if f"bench {name}" in groups:
            b = config["benchmarks"][name]
            cfg = {
                "benchmarks": {name: b},
                **shared,
                "datasets": {d: config.get("datasets", {}).get(d) for d in benchmark_datasets(config, name)},
                "backbones": {b["backbone"]: config.get("backbones", {}).get(b["backbone"])},
            }
            sections.append(
                Section(f"Benchmark {name}", sorted(groups.pop(f"bench {name}"), key=_natural), cfg)
            )
    titles = {
        "paper figures": "Paper Figures 4-7, A3-A9 and [Tobaben2024] Fig. 4 (all benchmarks)",
        "paper tables": "Paper Tables A3-A10 and [Tobaben2024] Tables F.1, F.2 (all benchmarks)",
        "privacy": "Privacy: label-space attack, label release, audit (Figs. 1, 2, A1)",
        "other": "Other",
        "active": "DP active learning ([Schwethelm2025]): Tables I, II, V, Fig. 5, per-group privacy",
    }
    for key in ("paper figures", "paper tables", "privacy", "active"):
        if key in groups:
            cfg = {"benchmarks": config.get("benchmarks", {}), **shared} if key.startswith("paper") else {}
            if key == "privacy":
                cfg = {k: config[k] for k in ("privacy_figures", "audit", "attack", "delta") if k in config}
            if key == "active":
                cfg = {"active": config.get("active", {})}
            sections.append(Section(titles[key], sorted(groups.pop(key), key=_natural), cfg))
    rest = sorted((f for fs in groups.values() for f in fs), key=_natural)
    if rest:
        sections.append(Section("Other", rest))
    return sections


def _yaml(obj) -> str:
    """YAML of a config entry; values YAML cannot represent are written as their str()."""
    import json

    try:
        return yaml.safe_dump(obj, sort_keys=False, allow_unicode=True)
    except yaml.representer.RepresenterError:
        return yaml.safe_dump(json.loads(json.dumps(obj, default=str)), sort_keys=False, allow_unicode=True)


def _esc(text: str) -> str:
    return html.escape(str(text), quote=True)


def _table(rows: list[list[str]], header: bool = True) -> str:
    if not rows:
        return "<p><em>empty table</em></p>"
    out = ["<table>"]
    if header:
        out.append("<thead><tr>" + "".join(f"<th>{_esc(c)}</th>" for c in rows[0]) + "</tr></thead>")
        rows = rows[1:]
    out.append("<tbody>")
    out += ["<tr>" + "".join(f"<td>{_esc(c)}</td>" for c in r) + "</tr>" for r in rows]
    out.append("</tbody></table>")
    return "\n".join(out)


def markdown_to_html(text: str) -> str:
    """The subset of Markdown our tables use: headings, pipe tables and paragraphs (escaped)."""
    out: list[str] = []
    table: list[str] = []
    para: list[str] = []

    def flush():
        if table:
            rows = [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in table]
            rows = [r for r in rows if not all(re.fullmatch(r":?-{2,}:?|:?-+:?", c) for c in r)]
            out.append(_table(rows))
            table.clear()
        if para:
            out.append(f"<p>{_esc(' '.join(para))}</p>")
            para.clear()

    for line in text.splitlines():
        s = line.strip()
        if s.startswith("|"):
            if para:
                flush()
            table.append(s)
            continue
        if table:
            flush()
        m = re.match(r"^(#{1,6})\s+(.*)$", s)
        if m:
            flush()
            level = min(6, len(m.group(1)) + 2)  # page uses h1-h3 itself
            out.append(f"<h{level}>{_esc(m.group(2))}</h{level}>")
        elif not s:
            flush()
        else:
            para.append(s)
    flush()
    return "\n".join(out)


def csv_to_html(path: Path, max_rows: int = 500) -> str:
    """A CSV file as an HTML table (header row first), cut after ``max_rows`` rows with a note."""
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    note = ""
    if len(rows) > max_rows + 1:
        note = (
            f"<p><em>first {max_rows} of {len(rows) - 1} rows; the full table is {_esc(path.name)}</em></p>"
        )
        rows = rows[: max_rows + 1]
    return _table(rows) + note


def _render_item(stem: str, files: list[Path], cap: str) -> tuple[str, str]:
    """(html, kind) of the files sharing one stem: a figure (PNG embedded) or a table."""
    by_ext = {f.suffix.lower(): f for f in files}
    anchor = re.sub(r"[^A-Za-z0-9_-]", "-", stem)
    head = f'<div class="item" id="{_esc(anchor)}"><h3>{_esc(stem)}</h3>'
    if cap:
        head += f"<p>{_esc(cap)}</p>"
    listing = '<p class="files">files: ' + ", ".join(_esc(str(f)) for f in files) + "</p>"
    body = []
    if ".png" in by_ext:
        data = base64.b64encode(by_ext[".png"].read_bytes()).decode("ascii")
        body.append(f'<img alt="{_esc(cap or stem)}" src="data:image/png;base64,{data}">')
        kind = "figure"
    else:
        kind = "table"
    if ".md" in by_ext:
        body.append(markdown_to_html(by_ext[".md"].read_text()))
        if ".csv" in by_ext:
            body.append(
                f"<details><summary>all columns ({_esc(by_ext['.csv'].name)})</summary>"
                f"{csv_to_html(by_ext['.csv'])}</details>"
            )
    elif ".csv" in by_ext:
        body.append(csv_to_html(by_ext[".csv"]))
    if ".tex" in by_ext:
        body.append(
            f"<details><summary>LaTeX ({_esc(by_ext['.tex'].name)})</summary>"
            f"<pre>{_esc(by_ext['.tex'].read_text())}</pre></details>"
        )
    other = [f for f in files if f.suffix.lower() not in (*FIGURE_EXTS, *TABLE_EXTS)]
    for f in other:
        body.append(
            f"<details><summary>{_esc(f.name)}</summary><pre>{_esc(f.read_text(errors='replace'))}</pre>"
            "</details>"
        )
    if not body:
        body.append("<p><em>only a vector version (PDF/SVG) was produced: see the file listed</em></p>")
    return head + "\n".join(body) + listing + "</div>", kind


def build_html_report(
    sections: list[Section],
    config: dict,
    out: str | Path,
    title: str = "dpcl report",
    version: str | None = None,
    date: str | None = None,
) -> None:
    """Write one self-contained HTML page: a table of contents, a section per group of files
    (each with the config entries behind it) and the full validated config at the end."""
    from ..provenance import provenance

    prov = provenance()
    if version is None:
        version = prov["dpcl"] or "unknown"
    # no generation time (the same config gives the same bytes): the code and
    # package versions identify what produced the page
    made = (
        f"commit {prov['commit'] or 'unknown'}, library {prov['library_sha256']}, "
        + ", ".join(f"{k} {v}" for k, v in prov["packages"].items() if v)
        + (f"; {date}" if date else "")
    )
    missing = [str(f) for s in sections for f in s.files if not Path(f).is_file()]
    if missing:
        raise FileNotFoundError(f"report inputs missing: {missing[:5]}{' …' if len(missing) > 5 else ''}")
    parts = [
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{_esc(title)}</title>'
        f"<style>{_CSS}</style></head><body>",
        f"<h1>{_esc(title)}</h1><p>dpcl {_esc(version)} ({_esc(made)}). Every table and figure of "
        "this run; each section shows the config entries that produced it, the full config is at the end."
        "</p>",
    ]
    if config.get("miniature"):
        from .paper_tables import MINIATURE_NOTE

        parts.append(f'<p class="miniature"><strong>{_esc(MINIATURE_NOTE)}</strong></p>')
    toc = ["<nav><h2>Contents</h2><ul>"]
    body = []
    for i, sec in enumerate(sections):
        sid = f"sec{i}"
        toc.append(f'<li><a href="#{sid}">{_esc(sec.title)}</a></li>')
        body.append(f'<section id="{sid}"><h2>{_esc(sec.title)}</h2>')
        if sec.config:
            body.append(
                "<details><summary>config for this section</summary>"
                f"<pre>{_esc(_yaml(sec.config))}</pre></details>"
            )
        stems: dict[str, list[Path]] = {}
        for f in map(Path, sec.files):
            stems.setdefault(str(f.with_suffix("")), []).append(f)
        bench = sec.title.removeprefix("Benchmark ") if sec.title.startswith("Benchmark ") else None
        rendered = [
            _render_item(
                Path(s).name,
                fs,
                caption(Path(s).name) or (_bench_caption(Path(s).name, bench) if bench else ""),
            )
            for s, fs in stems.items()
        ]
        body += [h for h, kind in rendered if kind == "table"] + [
            h for h, kind in rendered if kind == "figure"
        ]
        body.append("</section>")
    toc.append('<li><a href="#config">Full configuration</a></li></ul></nav>')
    body.append(
        '<section id="config"><h2>Full configuration (validated, defaults filled)</h2>'
        f"<pre>{_esc(_yaml(config))}</pre></section>"
    )
    write_text(out, "\n".join(parts + toc + body) + "\n</body></html>\n")
