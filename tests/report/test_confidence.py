"""The confidence-and-selection table of one protocol hash."""

from __future__ import annotations

import numpy as np
import pytest

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


def test_several_studies_show_their_count_and_the_between_study_sd() -> None:
    """6 seeds in 3 studies (round robin), study means 0.60, 0.70, 0.50 and a within-study
    spread of ±0.01: the count, the one-way moment estimate of the between-study sd (the
    study means' sd less the within part) beside the seed sd within studies, each study's
    selection. A board of one study keeps its columns."""
    from dmlbench.report.confidence import COLUMNS, study_sds

    values = {0: 0.59, 1: 0.69, 2: 0.49, 3: 0.61, 4: 0.71, 5: 0.51}
    records = []
    for seed, v in values.items():
        study = seed % 3
        search = {"trial": study, "trials": 8, "metric": "recall@1", "value": 0.8,
                  "epochs": 4, "hparams": {}, "study": f"s{study}", "study_index": study,
                  "studies": 3}  # fmt: skip
        records.append(rec("a", seed, m={"recall@1": v}).model_copy(update={"search": search}))
    t = confidence_table(records)
    assert t.loc["a", "studies"] == "3"
    between, within = study_sds(np.array(list(values.values())), [s % 3 for s in values])
    assert within == pytest.approx(np.sqrt(0.0002))  # (0.01² · 2 per study · 3) / 3 df
    assert between == pytest.approx(np.sqrt(0.01 - 0.0002 / 2))  # var of means − within / n
    assert t.loc["a", "sd between studies / seeds"] == f"{100 * between:.1f} / {100 * within:.1f}"
    assert t.loc["a", "selected"].startswith("3 studies of 8 trials")
    one = confidence_table([r for r in records if r.seed in (0, 3)])
    assert list(one.columns) == COLUMNS
