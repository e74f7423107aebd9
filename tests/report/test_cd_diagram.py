"""Critical-difference diagram: the bars (pure, on numbers) and the written files."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from dmlbench.report.cd_diagram import cd_data, cd_groups, write_cd_diagram
from dmlbench.report.significance import TEST_COLUMNS


def pair_table(significant: set[tuple[str, str]], order: str = "abcd") -> pd.DataFrame:
    """A paired-test table where exactly the ``significant`` pairs have p_holm = 0.001."""
    rows = []
    for i, a in enumerate(order):
        for b in order[i + 1 :]:
            p = 0.001 if (a, b) in significant else 0.5
            rows.append({"a": a, "b": b, "n_seeds": 5, "mean_diff": 0.0, "p": p, "p_holm": p,
                         "note": ""})  # fmt: skip
    return pd.DataFrame(rows, columns=TEST_COLUMNS)


def board(means: dict[str, float], seeds: int, sd: float = 0.005, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        [
            {"method": m, "seed": s, "recall@1": mu + rng.normal(0, sd)}
            for m, mu in means.items()
            for s in range(seeds)
        ]
    )


def test_groups_are_maximal_cliques_of_consecutive_methods() -> None:
    order = list("abcd")
    assert cd_groups(order, pair_table(set())) == [("a", "b", "c", "d")]
    chain = {("a", "c"), ("a", "d"), ("b", "d")}
    assert cd_groups(order, pair_table(chain)) == [("a", "b"), ("b", "c"), ("c", "d")]
    # a–d is not significant, but a–c is: a bar from a to d would hide that, so no such bar
    assert cd_groups(order, pair_table({("a", "c")})) == [("a", "b"), ("b", "c", "d")]
    everything = {(x, y) for i, x in enumerate(order) for y in order[i + 1 :]}
    assert cd_groups(order, pair_table(everything)) == []


def test_untestable_pairs_are_joined() -> None:
    t = pair_table(set(), "ab").assign(p=math.nan, p_holm=math.nan)
    assert cd_groups(["a", "b"], t) == [("a", "b")]


def test_cd_data_ranks_seeds_as_blocks() -> None:
    scores = board({"a": 0.80, "b": 0.601, "c": 0.600, "d": 0.40}, seeds=5, sd=0.01)
    data = cd_data(scores, "recall@1")
    assert data.n_seeds == 5 and data.claimable
    assert data.ranks["a"] == 1.0 and data.ranks["d"] == 4.0
    assert list(data.ranks.index)[:1] == ["a"] and set(data.ranks.index[1:3]) == {"b", "c"}
    assert [set(g) for g in data.groups] == [{"b", "c"}]
    lower = cd_data(scores.assign(**{"recall@1": -scores["recall@1"]}), "recall@1", False)
    assert lower.ranks.to_dict() == data.ranks.to_dict()


def test_incomplete_seeds_are_left_out_and_one_seed_draws_no_bar() -> None:
    scores = board({"a": 0.8, "b": 0.7}, seeds=3)
    scores = scores[~((scores["method"] == "b") & (scores["seed"] == 2))]
    assert cd_data(scores, "recall@1").n_seeds == 2
    one = cd_data(board({"a": 0.8, "b": 0.8, "c": 0.1}, seeds=1), "recall@1")
    assert one.groups == [] and not one.claimable and one.n_seeds == 1


def test_write_cd_diagram(tmp_path: Path) -> None:
    scores = board({"arcface": 0.70, "proxy-anchor": 0.699, "triplet": 0.60}, seeds=5)
    paths = write_cd_diagram(scores, "recall@1", tmp_path / "cd-cub200.v1", "cub200: Recall@1")
    assert [p.name for p in paths] == ["cd-cub200.v1.png", "cd-cub200.v1.svg"]
    assert all(p.stat().st_size > 0 for p in paths)
    assert paths[0].read_bytes().startswith(b"\x89PNG")
    svg = paths[1].read_text(encoding="utf-8")
    assert all(name in svg for name in ("arcface", "proxy-anchor", "triplet", "5 seeds"))


def test_write_cd_diagram_with_one_seed_says_so(tmp_path: Path) -> None:
    scores = board({"a": 0.7, "b": 0.6}, seeds=1)
    paths = write_cd_diagram(scores, "recall@1", tmp_path / "cd", "board")
    svg = paths[1].read_text(encoding="utf-8")
    assert "1 seed: no significance can be claimed" in svg
    empty = pd.DataFrame(columns=["method", "seed", "recall@1"])
    assert write_cd_diagram(empty, "recall@1", tmp_path / "none", "board") == []


def test_rank_labels_of_twenty_methods_do_not_run_together() -> None:
    """Every rank labelled up to 12 methods; beyond, every 2nd (1, 2, 4, …, 20)."""
    from dmlbench.report.cd_diagram import draw_cd_diagram

    def rank_labels(k: int) -> list[str]:
        means = {f"m{i:02d}": 0.9 - 0.01 * i for i in range(k)}
        [ax] = draw_cd_diagram(cd_data(board(means, seeds=1), "recall@1"), "t").axes
        return [t.get_text() for t in ax.texts if t.get_text().isdigit()]

    assert rank_labels(5) == ["1", "2", "3", "4", "5"]
    assert rank_labels(20) == ["1", *(str(t) for t in range(2, 21, 2))]
