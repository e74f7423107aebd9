"""Sweep plot data (pure, tested on numbers) and its thin renderer."""

from __future__ import annotations

import pytest

from dmlbench.records import ProtocolRef, Record, Timings
from dmlbench.report.plots import draw_sweep, parse_sweep_name, sweep_points, write_sweep_plots
from dmlbench.report.tables import MixedProtocolsError


def record(
    name: str,
    method: str,
    seed: int,
    metrics: dict[str, float],
    h: str | None = None,
    stage: str = "final",
) -> Record:
    return Record(
        protocol=ProtocolRef(name=name, version=1, hash=h or f"hash-{name}"),
        data_fingerprint="fp",
        method=method,
        seed=seed,
        stage=stage,
        metrics=metrics,
        timings=Timings(wall_seconds=1.0),
    )


def sweep_records() -> list[Record]:
    out = []
    for dim, base in ((16, 0.70), (32, 0.75), (128, 0.80)):
        name = f"poses@model.embedding_size={dim}"
        for seed, jitter in ((0, -0.01), (1, 0.01)):
            out.append(
                record(
                    name,
                    "log-ratio",
                    seed,
                    {"ndcg@10": base + jitter, "mld@1": 1 - base, "queries": 100.0},
                )
            )
            out.append(record(name, "triplet-dense", seed, {"ndcg@10": base - 0.1, "mld@1": 0.5}))
    out.append(record("poses", "log-ratio", 0, {"ndcg@10": 0.9}))  # not a sweep: ignored
    out.append(
        record(
            "poses@model.embedding_size=16", "log-ratio", 5, {"ndcg@10": 0.0}, stage="search-trial"
        )
    )  # not final: ignored
    return out


def test_parse_sweep_name() -> None:
    assert parse_sweep_name("poses@model.embedding_size=16") == (
        "poses",
        "model.embedding_size",
        16,
    )
    assert parse_sweep_name("a@b@optim.lr=1e-3") == ("a@b", "optim.lr", 1e-3)
    assert parse_sweep_name("poses") is None and parse_sweep_name("poses@key") is None
    assert parse_sweep_name("poses@trials=4") is None  # --trials 4: another budget, not a sweep
    # --backbone-override / --pretrained smoke runs: protocols of their own, not sweep points
    assert parse_sweep_name("cub200@defaults@backbone=small-cnn@pretrained=none") is None
    assert parse_sweep_name("cub200@backbone=timm:resnet18") is None


def test_sweep_points_mean_std_per_value_and_method() -> None:
    df = sweep_points(sweep_records())
    assert list(df.columns) == [
        "protocol",
        "key",
        "value",
        "method",
        "metric",
        "mean",
        "std",
        "seeds",
        "overridden",
    ]
    assert set(df["metric"]) == {"ndcg@10", "mld@1"}  # the query count is not a metric
    lr = df[(df["method"] == "log-ratio") & (df["metric"] == "ndcg@10")]
    assert lr["value"].tolist() == [16, 32, 128]  # numeric order
    assert lr["mean"].tolist() == pytest.approx([0.70, 0.75, 0.80])
    assert lr["std"].tolist() == pytest.approx([0.01414214] * 3, rel=1e-5)
    assert lr["seeds"].tolist() == [2, 2, 2]
    td = df[(df["method"] == "triplet-dense") & (df["metric"] == "mld@1")]
    assert td["mean"].tolist() == pytest.approx([0.5] * 3) and td["std"].tolist() == [0.0] * 3
    assert set(df["protocol"]) == {"poses"} and set(df["key"]) == {"model.embedding_size"}


def test_two_hashes_under_one_name_are_refused() -> None:
    other = record("poses@model.embedding_size=16", "log-ratio", 9, {"ndcg@10": 0.1}, h="other")
    recs = [*sweep_records(), other]
    with pytest.raises(MixedProtocolsError):
        sweep_points(recs)


def test_no_sweep_records_gives_an_empty_frame() -> None:
    df = sweep_points([record("poses", "log-ratio", 0, {"ndcg@10": 0.9})])
    assert df.empty and "mean" in df.columns


def test_draw_and_write(tmp_path) -> None:
    df = sweep_points(sweep_records())
    fig = draw_sweep(df, "poses", "model.embedding_size")
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert len(axes) == 2
    ax = axes[0]
    assert ax.get_xlabel() == "model.embedding_size"
    assert ax.get_ylabel().startswith("ndcg@10") and "higher" in ax.get_ylabel()
    assert "lower" in axes[1].get_ylabel()
    assert len(ax.get_lines()) >= 2 and ax.get_xscale() == "log"
    markers = {
        line.get_marker() for line in ax.get_lines() if line.get_marker() not in ("", "None")
    }
    assert len(markers) >= 2  # methods differ by marker, not only by colour
    assert "overrides" not in fig._suptitle.get_text()
    flagged = df.assign(overridden=True)
    title = draw_sweep(flagged, "poses", "model.embedding_size")._suptitle.get_text()
    assert "overrides" in title
    paths = write_sweep_plots(df, tmp_path)
    assert [p.name for p in paths] == ["sweep-poses-model.embedding_size.png"]
    assert paths[0].stat().st_size > 1000
    assert (tmp_path / "sweep-poses-model.embedding_size.svg").read_text().startswith("<?xml")


def test_sweep_plot_in_percent_with_distinct_colours_and_an_outside_legend() -> None:
    """Values in % as in the tables (label distances as they are); one colour per method,
    the untrained row dashed black; the legend outside the panels, covering no line; the
    budget in the title."""
    untrained = [
        record(f"poses@model.embedding_size={dim}", "untrained", 0, {"ndcg@10": 0.5, "mld@1": 2.0})
        for dim in (16, 32, 128)
    ]
    df = sweep_points([*sweep_records(), *untrained])
    fig = draw_sweep(df, "poses", "model.embedding_size", budget="paper defaults, no search")
    ndcg, mld = (ax for ax in fig.axes if ax.get_visible())
    lines = {c.get_label(): c.lines[0] for c in ndcg.containers}  # one per method
    assert list(lines["log-ratio"].get_ydata()) == pytest.approx([70.0, 75.0, 80.0])
    assert "%" in ndcg.get_ylabel() and "%" not in mld.get_ylabel()
    [floor] = [c.lines[0] for c in mld.containers if c.get_label() == "untrained"]
    assert list(floor.get_ydata()) == pytest.approx([2.0, 2.0, 2.0])
    assert lines["untrained"].get_linestyle() == "--" and lines["untrained"].get_color() == "black"
    colours = {str(line.get_color()) for line in lines.values()}
    assert len(colours) == len(lines) == 3
    assert ndcg.get_legend() is None and len(fig.legends) == 1
    assert "paper defaults, no search" in fig._suptitle.get_text()


def test_a_rerender_rewrites_the_same_bytes(tmp_path) -> None:
    """Sweep figures carry no date, software version or random SVG ids: rendering the same
    records twice writes identical files, so a re-render changes no committed figure."""
    df = sweep_points(sweep_records())
    first, second = tmp_path / "a", tmp_path / "b"
    write_sweep_plots(df, first)
    write_sweep_plots(df, second)
    names = sorted(p.name for p in first.iterdir())
    assert names == sorted(p.name for p in second.iterdir()) and len(names) == 2
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    svg = (first / "sweep-poses-model.embedding_size.svg").read_text()
    assert "<dc:date>" not in svg and "Matplotlib v" not in svg
