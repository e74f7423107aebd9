"""Per method of a board: its training curves and its search's history, from the records.

Every final record keeps its training loss per epoch (``curve``: ``{"epoch", "loss"}``) and
every search-trial record its validation score per epoch (``{"fold", "epoch",
"val_<metric>"}``) and its final value (``metrics["val_<metric>"]``, what the Optuna study was
told; the study's own database is not committed, the trial records are its history). Drawn
per method, one PNG (``<method>-curves.png``) with up to three panels:

- **training loss** per epoch: the mean over seeds and the band of ± one std (one line alone
  for one seed);
- **validation score** per epoch of every search trial (averaged over folds), the selected
  trial (the final record's ``search.trial``) drawn bold, pruned trials dotted;
- **search history**: each trial's value against its trial number (pruned trials as crosses)
  and the best so far as a step line.

A board without a search (the defaults boards) has the first panel only. With several search
studies per method (``search.studies``) the two search panels show study 0's trials (each
study has its own trial numbers); every study's history is in the board's budget curves
(:mod:`dmlbench.report.budget_curves`). The data steps are pure functions (tested); the
drawing only draws.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from dmlbench.records import Record
from dmlbench.report.figures import save_small_png

LOSS = "loss"
VAL = "val_"


def loss_curves(finals: Iterable[Record]) -> pd.DataFrame:
    """Per epoch of one method's final runs: ``mean``, ``std`` (NaN for one seed) and ``n``
    of the training loss over seeds."""
    rows = [
        {"seed": r.seed, "epoch": int(p["epoch"]), "loss": p[LOSS]}
        for r in finals
        for p in r.curve
        if LOSS in p and "epoch" in p
    ]
    if not rows:
        return pd.DataFrame(columns=["mean", "std", "n"]).rename_axis("epoch")
    g = pd.DataFrame(rows).groupby("epoch")["loss"]
    return pd.DataFrame({"mean": g.mean(), "std": g.std(), "n": g.count()})


def _val_key(r: Record) -> str | None:
    return next((k for k in r.metrics if k.startswith(VAL)), None)


def search_history(trials: Iterable[Record]) -> pd.DataFrame:
    """Per trial number (sorted): ``value`` (what the study was told), ``state`` and
    ``best`` (the best value so far among completed trials; NaN before the first)."""
    rows = []
    for r in trials:
        key = _val_key(r)
        if r.trial is None or key is None:
            continue
        rows.append({"trial": r.trial, "value": r.metrics[key], "state": r.search.get("state", "")})
    if not rows:
        return pd.DataFrame(columns=["value", "state", "best"]).rename_axis("trial")
    out = pd.DataFrame(rows).set_index("trial").sort_index()
    done = out["value"].where(out["state"] == "complete")
    out["best"] = done.cummax().ffill()
    return out


def validation_curves(trials: Iterable[Record]) -> dict[int, pd.Series]:
    """Per trial number: its validation score per epoch, averaged over folds."""
    out = {}
    for r in trials:
        key = _val_key(r)
        points = [(int(p["epoch"]), p[key]) for p in r.curve if key and key in p and "epoch" in p]
        if r.trial is not None and points:
            s = pd.DataFrame(points, columns=["epoch", "value"]).groupby("epoch")["value"].mean()
            out[r.trial] = s
    return dict(sorted(out.items()))


def selected_trial(finals: Iterable[Record]) -> int | None:
    """The trial study 0 selected (the finals' ``search.trial``)."""
    return next(
        (int(r.search["trial"]) for r in finals if "trial" in r.search and r.study_index == 0),
        None,
    )


def draw_curves(
    method: str, finals: list[Record], trials: list[Record], title: str
) -> Figure | None:
    """The method's panels (module docstring), or None when its records hold no curve."""
    loss = loss_curves(finals)
    history = search_history(trials)
    vals = validation_curves(trials)
    sizes = (("loss", len(loss)), ("val", len(vals)), ("history", len(history)))
    panels = [p for p, n in sizes if n]
    if not panels:
        return None
    fig = Figure(figsize=(3.6 * len(panels), 2.9), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    metric = next((_val_key(r) for r in trials if _val_key(r)), "") or ""
    name = metric.removeprefix(VAL)
    for ax, panel in zip(axes, panels, strict=True):
        if panel == "loss":
            x = loss.index.to_numpy()
            ax.plot(x, loss["mean"], color="black", marker="o", markersize=3)
            band = loss["std"].fillna(0.0)
            ax.fill_between(x, loss["mean"] - band, loss["mean"] + band, color="0.8", linewidth=0)
            n = int(loss["n"].max())
            spread = f"mean ± std over {n} seeds" if n > 1 else "one seed"
            ax.set_title(f"training loss ({spread})", fontsize=9)
            ax.set_xlabel("epoch")
        elif panel == "val":
            chosen = selected_trial(finals)
            states = {r.trial: r.search.get("state", "") for r in trials}
            for t, s in vals.items():
                bold = t == chosen
                ax.plot(s.index, 100 * s.to_numpy(), color="C3" if bold else "0.55",
                        linewidth=2.0 if bold else 0.8, zorder=3 if bold else 2,
                        linestyle=":" if states.get(t) == "pruned" else "-",
                        label=f"selected (trial {t})" if bold else None)  # fmt: skip
            ax.set_title(f"validation {name} (%) per trial", fontsize=9)
            ax.set_xlabel("epoch")
            if chosen in vals:
                ax.legend(fontsize=7, loc="lower right")
        else:
            done = history["state"] == "complete"
            ax.plot(history.index[done], 100 * history["value"][done], "o", color="black",
                    markersize=4, label="complete")  # fmt: skip
            if (~done).any():
                ax.plot(history.index[~done], 100 * history["value"][~done], "x", color="0.4",
                        markersize=5, label="pruned")  # fmt: skip
            ax.step(history.index, 100 * history["best"], where="post", color="C3",
                    label="best so far")  # fmt: skip
            ax.set_title(f"search: validation {name} (%) per trial", fontsize=9)
            ax.set_xlabel("trial number")
            ax.legend(fontsize=7, loc="lower right")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(True, color="0.88", linewidth=0.6)
        ax.tick_params(labelsize=8)
    fig.suptitle(f"{method}: {title}", fontsize=9)
    return fig


def write_curves(records: list[Record], folder: Path, title: str) -> dict[str, Path]:
    """``<folder>/<method>-curves.png`` per method with a curve; the paths by method."""
    methods = sorted({r.method for r in records})
    out = {}
    for m in methods:
        finals = [r for r in records if r.method == m and r.stage == "final"]
        trials = [r for r in records if r.method == m and r.stage == "search-trial"]
        fig = draw_curves(m, finals, [r for r in trials if r.study_index == 0], title)
        if fig is not None:
            path = folder / f"{m}-curves.png"
            save_small_png(fig, path, dpi=80, colours=32)
            out[m] = path
    return out
