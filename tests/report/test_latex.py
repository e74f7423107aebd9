"""The paper table: pandas' Styler, booktabs, escaped, the columns a paper shows, and every
committed board's ``.tex`` compiled by pdflatex inside a minimal document."""

from __future__ import annotations

import math
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from scipy import stats

from dmlbench.report import records_frame, summary_table
from dmlbench.report.board import analyse_board
from dmlbench.report.latex import escape, latex_table, paper_caption, pretty_metric
from tests.report.test_board import TIE, board
from tests.report.test_build import rec

ROOT = Path(__file__).resolve().parents[2]
BOARDS = sorted((ROOT / "reports" / "leaderboard").glob("*.tex"))
# Overfull boxes tolerated per compiled document, and the widest one (pt): none, as printed.
MAX_OVERFULL, MAX_OVERFULL_PT = 0, 0.0


def test_escape_every_special_character() -> None:
    assert escape("a_b&c%d$e#f{g}h~i^j\\k") == (
        r"a\_b\&c\%d\$e\#f\{g\}h\textasciitilde{}i\textasciicircum{}j\textbackslash{}k"
    )
    assert escape("1.0 ± 0.2") == r"1.0 $\pm$ 0.2"
    assert escape("α = 0.05; a > b; δ, Δ") == r"$\alpha$ = 0.05; a $>$ b; $\delta$, $\Delta$"


def test_metric_names() -> None:
    assert [pretty_metric(m) for m in ("recall@4", "nmi", "map@r", "ndcg@10", "mld@1")] == [
        "R@4",
        "NMI",
        "MAP@R",
        "nDCG@10",
        "MLD@1",
    ]


def _body(tex: str) -> tuple[str, list[str]]:
    lines = tex.splitlines()
    order = [lines.index(x) for x in (r"\toprule", r"\midrule", r"\bottomrule")]
    assert order == sorted(order)
    return lines[order[0] + 1], lines[order[1] + 1 : order[2]]


def test_a_judged_board_shows_the_paper_columns() -> None:
    records = board({**TIE, "my_loss": [0.60, 0.61, 0.59, 0.60, 0.62]})
    df = records_frame(records)
    table, analysis = summary_table(df), analyse_board(df)
    caption = paper_caption("p_1 v1", table, analysis, "p.csv")
    tex = latex_table(table, analysis, caption, "tab:p-1")
    lines = tex.splitlines()
    assert lines[:2] == [r"\begin{table}[t]", r"\centering"] and lines[-1] == r"\end{table}"
    assert r"\label{tab:p-1}" in lines and r"\begin{tabular}{lrrr}" in lines
    assert r"\small" in lines and r"\setlength{\tabcolsep}{3pt}" in lines
    header, rows = _body(tex)
    # NMI is no paper column (MAP@R would be: the next test); it stays in the CSV
    assert header == r"Method & R@1 (\%) & $\Delta$ R@1 (95\% CI) & Verdict \\"
    by_method = {row.split(" & ")[0]: row for row in rows}
    assert list(by_method) == ["a", "b", r"my\_loss", "c", "untrained"]  # escaped by Styler
    a = TIE["a"]
    half = 100 * stats.t.ppf(0.975, 4) * stats.tstd(a) / math.sqrt(5)
    assert by_method["a"].startswith(rf"a & \bfseries {100 * sum(a) / 5:.1f} $\pm$ {half:.1f} & ")
    assert by_method["b"].startswith(r"b & \bfseries ")  # not worse than the best: bold
    assert r"\bfseries" not in by_method["c"] and by_method["c"].endswith("& worse \\\\")
    assert by_method["untrained"].endswith(r"& — & — \\")  # never a candidate
    verdicts = analysis.verdicts
    assert verdicts is not None
    lo = 100 * verdicts.loc["c", "lower"]
    assert f"$[{lo:+.1f}, " in by_method["c"]
    assert "P(rank 1)" not in header and "p.csv" in caption  # the rest is in the CSV
    assert "±" not in tex and "δ" not in tex and "**" not in tex


def test_a_board_with_one_seed_claims_no_interval_and_no_verdict() -> None:
    records = [
        rec("a&b", 0, m={"recall@1": 0.6, "map@r": 0.3}),
        rec("untrained", 0, m={"recall@1": 0.2, "map@r": 0.1}),
    ]
    df = records_frame(records)
    table, analysis = summary_table(df), analyse_board(df)
    caption = paper_caption("p", table, analysis, "p.csv")
    tex = latex_table(table, analysis, caption, "tab:p")
    header, rows = _body(tex)
    assert header == r"Method & R@1 (\%) & MAP@R (\%) \\"
    assert rows == [r"a\&b & 60.0 & 30.0 \\", r"untrained & 20.0 & 10.0 \\"]
    assert "one seed each, so no interval" in caption and r"\bfseries" not in tex


def _pdflatex(document: str, folder: Path) -> str:
    """pdflatex on ``document`` in ``folder``; its log (an error fails, naming its lines)."""
    (folder / "paper.tex").write_text(document, encoding="utf-8")
    done = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "paper.tex"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
    )
    log = (folder / "paper.log").read_text(encoding="utf-8", errors="replace")
    assert done.returncode == 0, "\n".join(line for line in log.splitlines() if line[:1] == "!")
    return log


def _compile(body: str, folder: Path, options: str = "") -> str:
    """pdflatex on a minimal document around ``body``; its log."""
    return _pdflatex(
        rf"\documentclass[{options}]{{article}}" "\n"
        r"\usepackage{booktabs}" "\n"
        r"\begin{document}" "\n" + body + "\n" r"\end{document}" "\n",
        folder,
    )  # fmt: skip


def _overfull(log: str) -> list[float]:
    return [float(pt) for pt in re.findall(r"Overfull \\hbox \(([\d.]+)pt too wide\)", log)]


pdflatex = pytest.mark.skipif(
    shutil.which("pdflatex") is None,
    reason="pdflatex is not installed (Debian: texlive-latex-base texlive-latex-recommended; "
    ".ci/run installs them)",
)


@pdflatex
@pytest.mark.parametrize("layout", ["page", "two columns, table*"])
def test_every_committed_board_compiles_and_fits(tmp_path: Path, layout: str) -> None:
    """Each committed board's .tex ``\\input`` as a paper would: no error, no overfull box
    (a table wider than the text), on an article's page and, as ``table*``, across a
    two-column paper's page."""
    assert len(BOARDS) >= 4
    body = []
    for i, tex in enumerate(BOARDS):
        text = tex.read_text(encoding="utf-8")
        if layout != "page":
            text = text.replace(r"\begin{table}", r"\begin{table*}").replace(
                r"\end{table}", r"\end{table*}"
            )
        (tmp_path / f"board{i}.tex").write_text(text, encoding="utf-8")
        body.append(rf"\input{{board{i}.tex}}" "\n" r"\clearpage")  # fmt: skip
    log = _compile("\n".join(body), tmp_path, "" if layout == "page" else "twocolumn")
    overfull = _overfull(log)
    assert len(overfull) <= MAX_OVERFULL and max(overfull, default=0.0) <= MAX_OVERFULL_PT, overfull
    pages = re.search(r"Output written on paper\.pdf \((\d+) pages?", log)
    assert pages is not None and int(pages.group(1)) >= len(BOARDS)


@pdflatex
def test_the_check_would_see_a_table_too_wide_and_a_raw_delta(tmp_path: Path) -> None:
    """The compile check can fail: the old 13-column table overflows, and a raw δ stops
    pdflatex."""
    wide = r"\begin{tabular}{" + "r" * 13 + "}\n" + " & ".join(["88.8 $\\pm$ 8.8"] * 13)
    log = _compile(wide + "\n\\end{tabular}", tmp_path)
    assert _overfull(log) and max(_overfull(log)) > 100
    with pytest.raises(AssertionError):
        _compile("margin δ", tmp_path)


@pdflatex
def test_the_documented_paper_compiles_as_written(tmp_path: Path) -> None:
    """docs/reports.md's LaTeX document, as printed, from a copy of the repository's reports."""
    text = (ROOT / "docs" / "reports.md").read_text(encoding="utf-8")
    start = text.index("## A table a paper can include")
    section = text[start : text.index("\n## ", start + 1)]
    [document] = re.findall(r"```latex\n(.*?)```", section, re.S)
    [board_tex] = re.findall(r"\\input\{([^}]+)\}", document)
    assert (ROOT / board_tex).is_file(), board_tex
    (tmp_path / board_tex).parent.mkdir(parents=True)
    shutil.copy(ROOT / board_tex, tmp_path / board_tex)
    log = _pdflatex(document, tmp_path)
    label = re.search(r"\\ref\{([^}]+)\}", document)
    assert label is not None and rf"\label{{{label.group(1)}}}" in (ROOT / board_tex).read_text()
    assert not _overfull(log)
