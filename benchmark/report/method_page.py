"""A page per method of a board (``<board stem>/<method>.html``), linked from the board's tables.

A board row is one line of means; a reader choosing a method wants what is behind it: the
verdict row itself, the hyper-parameters the search chose (and how: trial, validation score,
epochs), the numbers of every seed, the training and validation curves and the search's
history (:mod:`dmlbench.report.curves`), and every trial with its hyper-parameters. Plain
static HTML with the board page's style sheet and script (sortable tables), nothing loaded
from the network.
"""

from __future__ import annotations

import json
from html import escape

import pandas as pd

from dmlbench.metrics import catalogue
from dmlbench.records import Record, is_baseline
from dmlbench.report.html import document, html_table, paragraph, section
from dmlbench.report.tables import HIDDEN, Shown


def seed_table(finals: list[Record]) -> pd.DataFrame:
    """One row per seed: every shown metric (in %, label distances as they are)."""
    rows = {}
    for r in sorted(finals, key=lambda r: r.seed):
        cells: dict[str, object] = {}
        for k, v in r.metrics.items():
            if k in HIDDEN or k.startswith("ci_"):
                continue
            cells[k] = Shown(f"{v * catalogue.scale(k):.{catalogue.digits(k)}f}", v)
        cells["epochs"] = Shown(str(len(r.curve)), len(r.curve))
        cells["train time"] = Shown(f"{r.timings.train_seconds:.1f} s", r.timings.train_seconds)
        rows[r.seed] = cells
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.name = "seed"
    return out


def _value(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return json.dumps(v) if isinstance(v, list | dict) else str(v)


def chosen_table(finals: list[Record]) -> pd.DataFrame:
    """The hyper-parameters the final runs used, and where they came from."""
    if not finals:
        return pd.DataFrame()
    r = finals[0]
    rows = {k: {"value": _value(v)} for k, v in sorted(r.hparams.items())}
    s = r.search
    if s:
        rows["selected by"] = {
            "value": f"search trial {s['trial']} of {s['trials']}: validation {s['metric']} "
            f"{100 * s['value']:.1f}%, {s['epochs']} epochs"
        }
    elif not is_baseline(r.method):
        over = r.overrides.get("hparams")
        how = "overridden" if over else "the paper's defaults (no search)"
        rows["selected by"] = {"value": how}
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.name = "hyper-parameter"
    return out


def trials_table(trials: list[Record]) -> pd.DataFrame:
    """One row per search trial: its state, its validation value and hyper-parameters."""
    rows = {}
    for r in sorted(trials, key=lambda r: r.trial or 0):
        key = next((k for k in r.metrics if k.startswith("val_")), None)
        value = r.metrics.get(key, float("nan")) if key else float("nan")
        rows[r.trial] = {
            "state": r.search.get("state", ""),
            f"{key or 'validation'} (%)": Shown(f"{100 * value:.1f}", value),
            "epochs": Shown(str(len({p.get("epoch") for p in r.curve})), len(r.curve)),
            "hyper-parameters": ", ".join(f"{k}={_value(v)}" for k, v in sorted(r.hparams.items())),
        }
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.name = "trial"
    return out


def render_method_page(
    method: str,
    board_title: str,
    board_href: str,
    verdict_row: pd.DataFrame,
    finals: list[Record],
    trials: list[Record],
    curves: str | None,
    pictures: list[tuple[str, str]],
) -> str:
    """The page; hrefs are relative to it (it lives in the board's folder)."""
    parts = [
        f"<h1>{escape(method)}</h1>",
        f'<p>On the board <a href="{escape(board_href)}">{escape(board_title)}</a> '
        '(<a href="../index.html">all boards</a>).</p>',
        section(
            "Verdict",
            paragraph(
                "The method's row of the board: test metrics in %, "
                "mean ± std over seeds, its verdict against the best of "
                "the other methods."
            ),
            html_table(verdict_row),
        ),
    ]
    if curves:
        parts.append(
            section(
                "Curves",
                f'<figure><a href="{escape(curves)}"><img src="{escape(curves)}" '
                f'alt="training and validation curves and search history of {escape(method)}">'
                "</a><figcaption>Training loss per epoch (final runs, every seed); validation "
                "score per epoch of each search trial (selected trial bold, pruned dotted); "
                "each trial's value and the best so far.</figcaption></figure>",
            )
        )
    chosen = chosen_table(finals)
    if len(chosen):
        parts.append(section("Hyper-parameters", html_table(chosen, "hyper-parameter", False)))
    if finals:
        parts.append(
            section(
                "Every seed",
                paragraph("Test metrics of each seed's final run, in % (mld@K in label units)."),
                html_table(seed_table(finals), "seed", False),
            )
        )
    if trials:
        parts.append(
            section(
                "Search trials",
                paragraph(
                    "Every trial of the method's search: the validation score the study "
                    "was told (pruned: at the epoch it was stopped)."
                ),
                html_table(trials_table(trials), "trial", False),
            )
        )
    for src, caption in pictures:
        parts.append(
            f'<figure><a href="{escape(src)}"><img src="{escape(src)}" alt="{escape(caption)}">'
            f"</a><figcaption>{escape(caption)}</figcaption></figure>"
        )
    return document(f"{method} — {board_title}", "\n".join(parts), "method")
