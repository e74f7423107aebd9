"""The confidence-and-selection table of one protocol hash."""

from __future__ import annotations

from dmlbench.report.confidence import confidence_table
from tests.report.test_build import rec


def test_rows_show_seed_interval_bootstrap_and_selection() -> None:
    search = {"trial": 3, "trials": 8, "metric": "recall@1", "value": 0.81, "epochs": 6,
              "hparams": {"margin": 0.2}, "study": "s"}  # fmt: skip
    records = []
    for seed, v in enumerate([0.60, 0.64, 0.62]):
        r = rec(
            "a", seed, m={"recall@1": v, "ci_recall@1_lo": v - 0.02, "ci_recall@1_hi": v + 0.02}
        )
        records.append(r.model_copy(update={"search": search, "hparams": {"margin": 0.2}}))
    records.append(rec("untrained", 0, m={"recall@1": 0.1}))
    records.append(rec("a", 0, stage="search-trial", m={"val_recall@1": 0.81}))
    t = confidence_table(records)
    assert list(t.index) == ["a", "untrained"]
    row = t.loc["a"]
    assert row["seeds"] == "3" and row["mean ± std"] == "62.0 ± 2.0"
    assert row["95% CI (seeds)"] == "[57.0, 67.0]"  # 62 ± 4.303 · 2 / √3
    assert row["95% CI (queries)"] == "[60.0, 64.0]"
    assert row["selected"] == "trial 3 of 8 (val recall@1 81.0, 6 epochs)"
    assert row["hyper-parameters"] == "margin=0.2"
    assert t.loc["untrained", "95% CI (seeds)"] == "n/a"  # one seed: no interval


def test_defaults_and_hand_set_values_are_named() -> None:
    plain = rec("b", 0)
    hand = rec("c", 0, overrides={"hparams": {"margin": 0.1}})
    t = confidence_table([plain, hand])
    assert t.loc["b", "selected"] == "defaults"
    assert t.loc["c", "selected"] == "overridden hyper-parameters"
