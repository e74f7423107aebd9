"""LaTeX tables: booktabs structure, escaping, bold best, ± as math."""

from __future__ import annotations

from dmlbench.report import records_frame, summary_table
from dmlbench.report.latex import escape, latex_cell, latex_table, pretty_metric
from tests.report.test_build import rec


def test_escape_every_special_character() -> None:
    assert escape("a_b&c%d$e#f{g}h~i^j\\k") == (
        r"a\_b\&c\%d\$e\#f\{g\}h\textasciitilde{}i\textasciicircum{}j\textbackslash{}k"
    )
    assert escape("1.0 ± 0.2") == r"1.0 $\pm$ 0.2"


def test_cells_and_metric_names() -> None:
    assert latex_cell("**56.0 ± 1.0**") == r"\textbf{56.0 $\pm$ 1.0}"
    assert latex_cell("3") == "3"
    assert [pretty_metric(m) for m in ("recall@4", "nmi", "map@r", "ndcg@10", "mld@1")] == [
        "R@4",
        "NMI",
        "MAP@R",
        "nDCG@10",
        "MLD@1",
    ]


def test_booktabs_table_from_summary() -> None:
    records = [
        rec("my_method", 0, m={"recall@1": 0.6, "nmi": 0.5}),
        rec("my_method", 1, m={"recall@1": 0.7, "nmi": 0.5}),
        rec("b&c", 0, m={"recall@1": 0.4, "nmi": 0.55}),
        rec("untrained", 0, m={"recall@1": 0.2, "nmi": 0.3}),
    ]
    tex = latex_table(summary_table(records_frame(records)), "p_1: 50% ± x", "tab:p-1")
    lines = tex.splitlines()
    assert lines[0] == r"\begin{table}[t]" and lines[-1] == r"\end{table}"
    order = [lines.index(x) for x in (r"\toprule", r"\midrule", r"\bottomrule")]
    assert order == sorted(order)
    assert r"\caption{p\_1: 50\% $\pm$ x}" in lines and r"\label{tab:p-1}" in lines
    assert r"\begin{tabular}{lrrr}" in lines
    header, *body = lines[lines.index(r"\toprule") + 1 : lines.index(r"\bottomrule")]
    body = [b for b in body if b != r"\midrule"]
    assert header == r"Method & R@1 & NMI & seeds \\"
    assert all(row.count("&") - row.count(r"\&") == 3 for row in body)
    assert body[0] == r"my\_method & 65.0 $\pm$ 7.1 & 50.0 $\pm$ 0.0 & 2 \\"  # no bold asked
    assert body[1] == r"b\&c & 40.0 & 55.0 & 1 \\"  # one seed: no spread shown
    assert body[2].startswith("untrained & 20.0")
    assert "**" not in tex and "±" not in tex
    bold = latex_table(summary_table(records_frame(records)), "c", "l", bold={
        "recall@1": ["my_method", "untrained"], "nmi": ["b&c"]})  # fmt: skip
    rows = bold.splitlines()
    assert r"my\_method & \textbf{65.0 $\pm$ 7.1} & 50.0 $\pm$ 0.0 & 2 \\" in rows
    assert r"b\&c & 40.0 & \textbf{55.0} & 1 \\" in rows
    assert r"untrained & 20.0 & 30.0 & 1 \\" in rows  # the baseline is never bold
    assert escape("α = 0.05; a > b") == r"$\alpha$ = 0.05; a $>$ b"
