"""LaTeX (booktabs) tables for papers, from the same summary tables as the Markdown.

The cells are :func:`dmlbench.report.tables.format_table`'s strings (mean ± std in %, the value
alone for one seed, bold where a method is not significantly worse than the best), turned into
LaTeX: ``±`` becomes ``$\\pm$``, ``**x**`` becomes ``\\textbf{x}`` and every
character LaTeX treats specially (``_ & % $ # { } ~ ^ \\``) is escaped, so method names
such as ``triplet_semihard`` or a plug-in's ``a&b`` compile. The output needs
``\\usepackage{booktabs}``.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping

import pandas as pd

from dmlbench.metrics import catalogue
from dmlbench.report.tables import format_table

_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "±": r"$\pm$",
    "α": r"$\alpha$",
    "τ": r"$\tau$",
    ">": r"$>$",
    "<": r"$<$",
}
_BOLD = re.compile(r"^\*\*(.*)\*\*$")


def escape(text: str) -> str:
    """Escape LaTeX's special characters in plain text."""
    return "".join(_SPECIAL.get(ch, ch) for ch in text)


def pretty_metric(name: str) -> str:
    """``recall@4`` -> ``R@4``, ``ndcg@10`` -> ``nDCG@10``, ``mld@1`` -> ``MLD@1``."""
    return catalogue.short_label(name)


def latex_cell(text: str) -> str:
    """One formatted cell: escaped, ``±`` as math, Markdown bold as ``\\textbf``."""
    m = _BOLD.match(text)
    inner = m.group(1) if m else text
    body = escape(inner)
    return rf"\textbf{{{body}}}" if m else body


def render_latex(formatted: pd.DataFrame, caption: str, label: str) -> str:
    """A ``table`` environment with a booktabs ``tabular`` of ``formatted`` (strings)."""
    headers = ["Method", *(pretty_metric(str(c)) for c in formatted.columns)]
    spec = "l" + "r" * len(formatted.columns)
    lines = [
        r"\begin{table}[t]",
        r"\centering",
        rf"\caption{{{escape(caption)}}}",
        rf"\label{{{label}}}",
        rf"\begin{{tabular}}{{{spec}}}",
        r"\toprule",
        " & ".join(escape(h) for h in headers) + r" \\",
        r"\midrule",
    ]
    for method, row in zip(formatted.index, formatted.values, strict=True):
        cells = [escape(str(method)), *(latex_cell(str(v)) for v in row)]
        lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def latex_table(
    table: pd.DataFrame,
    caption: str,
    label: str,
    bold: Mapping[str, Collection[str]] | None = None,
) -> str:
    """LaTeX of a :func:`dmlbench.report.tables.summary_table` (one protocol hash); ``bold``
    as in :func:`~dmlbench.report.tables.format_table`."""
    return render_latex(format_table(table, bold=bold), caption, label)
