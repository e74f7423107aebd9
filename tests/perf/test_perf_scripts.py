"""The evaluation, loss and training-loop benchmarks run on tiny sizes and print parseable
ratios; the engine paths they exist to measure (two-stage retrieval, bounded k-means) give the
numbers of the plain computations. No test asserts a speed."""

from __future__ import annotations

import math
from pathlib import Path

import faiss
import numpy as np
import pytest
import torch

import dmlbench.metrics.clustering as clustering
import dmlbench.metrics.retrieval as engine
from dmlbench.perf import evaluate as perf_evaluate
from dmlbench.perf import losses as perf_losses
from dmlbench.perf import train as perf_train
from dmlbench.protocol import MetricsSpec
from tests.perf.tables import parse_table


def ratios(text: str) -> dict[str, float]:
    rows = parse_table(text)
    assert rows, "no figure | ours | peer | ratio table"
    return {row["figure"]: float(row["ratio"]) for row in rows if row["ratio"] != "—"}


def test_evaluate_script(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(clustering, "BOUNDED_KMEANS_MIN_WORK", 0)  # NMI: the bounded k-means
    out = tmp_path / "evaluate.md"
    args = ["--size", "tiny=500,16,40,0.8", "--repeats", "3", "--out", str(out), "--noisy"]
    assert perf_evaluate.main(args) == 0  # its own check: shared metrics equal to 1e-4
    printed = capsys.readouterr().out
    assert out.read_text(encoding="utf-8").strip() == printed.strip()
    assert "Equality check (|ours − peer| ≤ 1e-4 on every shared metric): PASS" in printed
    r = ratios(printed)
    for figure in ("full metric set", "retrieval metrics", "NMI", "floor", "ours recall@1 alone"):
        assert any(f"tiny: {figure}" in key and math.isfinite(v) and v > 0 for key, v in r.items())
    # The full set is exactly the protocol's list (cub200 unless the size names another).
    assert any("cub200's Recall@1/2/4/8/16/32, MAP@R, R-Precision, NMI" in key for key in r)
    rows = {row["figure"]: row for row in parse_table(printed)}
    peak = rows["tiny: peak RSS of a process running it, GB"]
    assert 0.01 < float(peak["ours"]) < 4.0
    for name in ("recall@1", "map@r", "r_precision", "nmi"):
        row = next(v for k, v in rows.items() if k.startswith(f"tiny: {name} (peer"))
        assert float(row["ours"]) == pytest.approx(float(row["peer"]), abs=1e-4)


def test_losses_script(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--config", "24x16", "--steps", "1", "--rounds", "3", "--num-classes", "20"]
    for name in ("angular", "log-ratio", "proxy-triplet", "triplet-dense", "npairs"):
        args += ["--method", name]
    assert perf_losses.main(args) == 0
    printed = capsys.readouterr().out
    r = ratios(printed)
    with_peer = {k.split(" ")[0] for k in r}
    assert with_peer == {"angular", "proxy-triplet", "triplet-dense"}  # npairs, log-ratio: none
    assert all(math.isfinite(v) and v > 0 for v in r.values())
    rows = {row["figure"]: row for row in parse_table(printed)}
    assert rows["log-ratio: vectorised (graph size independent of the batch)"]["ours"] == "yes"


def test_train_script(capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "--method",
        "contrastive",
        "--repeats",
        "3",
        "--max-images",
        "160",
        "--batch-size",
        "16",
    ]
    assert perf_train.main(args) == 0
    rows = {row["figure"]: row for row in parse_table(capsys.readouterr().out)}
    speed = rows["contrastive: images/s, median epoch (ratio: median over back-to-back pairs)"]
    assert float(speed["ours"]) > 0 and float(speed["peer"]) > 0 and float(speed["ratio"]) > 0
    loss = rows["contrastive: mean loss of the epoch (same steps: equal)"]
    assert float(loss["ours"]) == pytest.approx(float(loss["peer"]), rel=1e-6)  # same steps


def test_run_script(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dmlbench.perf import run as perf_run
    from tests.test_protocol import BASE

    proto = tmp_path / "p.yaml"
    proto.write_text(BASE)
    args = ["--protocol", str(proto), "--method", "contrastive", "--seeds", "0,1,2"]
    assert perf_run.main([*args, "--max-steps", "2"]) == 0
    rows = {row["figure"]: row for row in parse_table(capsys.readouterr().out)}
    whole = rows["contrastive: whole run, s per seed (peer: the target)"]
    assert float(whole["peer"]) == perf_run.TARGET_SECONDS
    assert 0 < float(whole["ours"]) <= float(whole["ours min – max"].split(" – ")[1])
    assert len(rows["Recall@1 per seed"]["ours"].split()) == 3
    with pytest.raises(SystemExit):  # two seeds give no median, min and max worth the name
        perf_run.main([*args[:4], "--seeds", "0,1"])


def single_search(x: np.ndarray, labels: np.ndarray, spec: MetricsSpec) -> dict[str, float]:
    """The metrics from one k-NN search with k = max(K, R), as the engine used to do."""
    x = engine.l2_normalize(x)
    counts = np.bincount(labels)[labels] - 1
    keep = counts > 0
    k = min(max([*spec.recall_at, int(counts.max())]), len(x) - 1)
    nn = engine.knn(x[keep], x, k, np.flatnonzero(keep))
    return engine.retrieval_metrics(labels[nn], labels[keep], counts[keep], spec.recall_at)


@pytest.mark.parametrize("seed", range(3))
def test_two_stage_retrieval_equals_one_search(seed: int) -> None:
    x, labels = perf_evaluate.make_embeddings(700, 8, 90, 1.2, seed)
    labels = labels.copy()
    labels[:5] = 1000 + np.arange(5)  # lone queries
    spec = MetricsSpec(recall_at=[1, 4, 16, 17, 100, 650], nmi=False)
    ours = engine.embedding_metrics(x, labels, spec)
    assert ours["lone_queries"] == 5
    reference = single_search(x, labels, spec)
    assert {k: ours[k] for k in reference} == pytest.approx(reference, abs=1e-12)


def faiss_assign(x: np.ndarray, k: int, seed: int) -> tuple[np.ndarray, int, int]:
    """faiss's k-means clusters, its number of iterations and of cluster splits."""
    km = faiss.Kmeans(
        x.shape[1], k, niter=50, seed=seed, min_points_per_centroid=1, max_points_per_centroid=10**6
    )
    km.train(x)
    stats = km.iteration_stats or []
    return km.index.search(x, 1)[1][:, 0], len(stats), sum(s["nsplit"] for s in stats)


@pytest.mark.parametrize("case", ["clustered", "blob", "wide"])
def test_bounded_kmeans_equals_faiss(case: str) -> None:
    rng = np.random.default_rng(7)
    if case == "clustered":  # converges early (faiss's stop rule)
        x, _ = perf_evaluate.make_embeddings(3000, 24, 400, 1.2)
        x = engine.l2_normalize(x).astype(np.float32)
        k = 400
    elif case == "blob":  # many centroids start in one tight blob: empty clusters are split
        rng = np.random.default_rng(3)
        x = np.concatenate([0.05 * rng.normal(size=(600, 4)), 3 * rng.normal(size=(100, 4))])
        x = x[rng.permutation(len(x))].astype(np.float32)
        k = 120
    else:  # unnormalised, large norms
        x = (20 * rng.normal(size=(1500, 32))).astype(np.float32)
        k = 120
    ours = clustering.bounded_kmeans_assign(x, k, seed=3, niter=50)
    theirs, iterations, splits = faiss_assign(x, k, seed=3)
    np.testing.assert_array_equal(ours, theirs)
    if case == "clustered":
        assert iterations < 50  # stopped on an unchanged objective
    if case == "blob":
        assert splits > 0


def test_a_report_is_noisy_when_others_used_the_cpu_not_when_we_did() -> None:
    """The benchmark's own threads never make its report noisy; other processes' CPU does."""
    from dmlbench.perf import _common as c

    start = c.CpuSnapshot(wall=0.0, machine=100.0, own=10.0)
    ours_only = c.CpuSnapshot(wall=10.0, machine=120.0, own=30.0)  # 20 s of CPU, all ours
    shared = c.CpuSnapshot(wall=10.0, machine=130.0, own=20.0)  # 20 s of others' CPU
    assert c.others_share(start, ours_only, 2) == 0.0
    assert c.others_share(start, shared, 2) == 1.0
    quiet = {c.LOAD_KEY: "0.20, 0.30, 0.40", c.OTHERS_KEY: "3%"}
    assert c.noisy_banner(quiet) == ""
    assert "other processes used 40%" in c.noisy_banner({**quiet, c.OTHERS_KEY: "40%"})
    assert "Noisy" in c.noisy_banner({**quiet, c.LOAD_KEY: "1.90, 1.00, 1.00"})
    now = c.CpuSnapshot.now()
    assert now.machine is None or now.machine > 0


@pytest.mark.heavy  # two child processes per branch, ~2 minutes; the mechanism: tests/test_simd.py
def test_simd_script_compares_the_two_mkl_branches(capsys: pytest.CaptureFixture[str]) -> None:
    from dmlbench.perf import simd as perf_simd

    assert perf_simd.main(["--rounds", "3", "--steps", "2"]) == 0
    rows = {row["figure"]: row for row in parse_table(capsys.readouterr().out)}
    branch = rows["MKL branch reported by MKL"]
    assert (branch["ours"], branch["peer"]) == ("COMPATIBLE,STRICT", "AUTO")
    step = rows["training step, ms (glyphs-mini batch, contrastive, one thread)"]
    assert float(step["ours"]) > 0 and float(step["peer"]) > 0 and float(step["ratio"]) > 0


@pytest.mark.heavy  # as above
def test_simd_script_compares_with_convolutions_outside_onednn(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from dmlbench.perf import simd as perf_simd

    assert perf_simd.main(["--rounds", "3", "--steps", "2", "--peer", "onednn-off"]) == 0
    rows = {row["figure"]: row for row in parse_table(capsys.readouterr().out)}
    convolutions = rows["convolutions in"]
    assert (convolutions["ours"], convolutions["peer"]) == ("oneDNN", "ATen")
    assert rows["MKL branch reported by MKL"]["peer"] == "COMPATIBLE,STRICT"


def test_gpu_script_runs_on_a_cpu_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    from dmlbench.perf import gpu as perf_gpu

    args = ["--device", "cpu", "--backbones", "small-cnn", "--batch", "10", "--image-size"]
    args += ["32", "--steps", "2", "--embedding", "16", "--eval-size", "600,16,50"]
    assert perf_gpu.main(args) == 0
    printed = capsys.readouterr().out
    assert "gpu: none (figures are the CPU's; they say nothing about GPU hours)" in printed
    assert "| small-cnn | fp32 | yes |" in printed and "bf16" not in printed  # no autocast
    rows = {row["figure"]: row for row in parse_table(printed)}
    assert float(rows["small-cnn: fp32 channels-last / fp32 images/s"]["ratio"]) > 0
    assert float(rows["evaluation 600×16: MAP@R, absolute difference ours − peer"]["ours"]) < 1e-6
    assert float(rows["evaluation 600×16: retrieval metrics, s"]["ratio"]) > 0
    # the GPU path against the old one (#49), here on the CPU, and said so
    assert "no CUDA device: measured on CPU, not the GPU figures" in printed
    assert rows["evaluation 600×16: every metric equal, torch k-NN vs faiss"]["ours"] == "yes"
    assert rows["training batch 10 × 3 × 32²: the same float images"]["ours"] == "yes"
    knn = "evaluation 600×16: retrieval metrics, torch k-NN on cpu (ours) vs faiss on the CPU"
    assert float(rows[f"{knn} (peer), s"]["ratio"]) > 0


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is here")
def test_gpu_script_without_cuda_measures_on_the_cpu_and_says_so_first(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from dmlbench.perf import gpu as perf_gpu

    args = ["--parts", "knn", "transfer", "--batch", "4", "--image-size", "8"]
    assert perf_gpu.main([*args, "--eval-size", "300,8,30"]) == 0
    printed = capsys.readouterr().out
    assert printed.splitlines()[0] == "no CUDA device: measured on CPU, not the GPU figures"
    assert "to cpu: uint8 pinned" in printed and "Training (" not in printed


def test_update_from_records_adds_up_the_committed_run_times(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--from-records`` sums each board's records' wall seconds over the jobs; the sum is
    recomputed here from the JSON files, and a board without records counts zero."""
    import json
    import shutil

    from dmlbench.leaderboard import boards
    from dmlbench.perf import update as perf_update

    committed = Path(__file__).parents[2] / "results" / "leaderboard"
    name = next(iter(boards.LEADERBOARD))
    sources = sorted((committed / name).rglob("*.json"))[:3]
    assert len(sources) == 3
    for src in sources:
        dest = tmp_path / src.relative_to(committed)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, dest)
    seconds = sum(json.loads(p.read_text())["timings"]["wall_seconds"] for p in sources)
    code = perf_update.main(["--from-records", "--leaderboard-dir", str(tmp_path), "--jobs", "2"])
    assert code == 0
    rows = {r["figure"]: r for r in parse_table(capsys.readouterr().out)}
    assert rows[f"{name}: records"]["ours"] == "3"
    assert float(rows[f"{name}: summed run time / 2 jobs, min"]["ours"]) == pytest.approx(
        seconds / 2 / 60, abs=1e-3
    )
    total = rows["every board: summed run time / 2 jobs, min (peer: the target)"]
    assert float(total["ours"]) == pytest.approx(seconds / 2 / 60, abs=1e-3)
    assert float(total["peer"]) == perf_update.TARGET_SECONDS / 60


def test_update_of_one_protocol_regenerates_its_boards_and_compares_bit_for_bit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--protocol`` hands only that protocol's boards to the update, whose target row then
    has no peer (the target is for every board); ``--compare-with`` counts the metrics equal to
    the committed records, pairing records by method, seed, stage and trial: one committed
    record copied, one with a metric moved by one ulp, one without a twin."""
    import json
    import shutil

    import numpy as np

    from dmlbench.leaderboard import boards
    from dmlbench.perf import update as perf_update

    committed = Path(__file__).parents[2] / "results" / "leaderboard"
    scratch = tmp_path / "lb"
    seen: list[list[str]] = []

    def fake_update(lb_dir: Path, reports: Path, work: Path, names: list[str], *a, **k) -> None:
        seen.append(names)
        same, moved, extra = sorted((committed / "icons-mini").rglob("*-seed0-final.json"))[:3]
        for src in (same, moved, extra):
            dest = lb_dir / src.relative_to(committed)
            dest.parent.mkdir(parents=True, exist_ok=True)
            data = json.loads(src.read_text())
            if src == moved:
                data["metrics"]["recall@1"] = float(np.nextafter(data["metrics"]["recall@1"], 2))
            if src == extra:  # a seed the committed board does not have
                data["seed"] = 99
                dest = dest.with_name(dest.name.replace("-seed0-", "-seed99-"))
            dest.write_text(json.dumps(data))
            (work / src.name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, work / src.name)

    monkeypatch.setattr("dmlbench.leaderboard.update.update_leaderboard", fake_update)
    argv = ["--work-dir", str(tmp_path / "w"), "--leaderboard-dir", str(scratch)]
    code = perf_update.main([*argv, "--protocol", "icons-mini", "--compare-with", str(committed)])
    assert code == 0
    assert seen == [[n for n, b in boards.LEADERBOARD.items() if b.base == "icons-mini"]]
    rows = {r["figure"]: r for r in parse_table(capsys.readouterr().out)}
    metrics = len(
        json.loads(next((committed / "icons-mini").rglob("*-seed0-final.json")).read_text())[
            "metrics"
        ]
    )
    equal = rows["metrics equal to --compare-with's to the last bit"]
    assert (int(equal["ours"]), int(equal["peer"])) == (2 * metrics - 1, 2 * metrics)
    assert rows["records --compare-with has no twin of"]["ours"] == "1"
    assert str(tmp_path) not in rows and str(committed) not in str(rows)  # no machine path
    wall = next(r for f, r in rows.items() if f.startswith("wall time, min"))
    assert wall["peer"] in ("", "—")


@pytest.mark.parametrize("everything", [False, True])
def test_check_script_passes_all_to_the_check(
    everything: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--all`` reaches the check as ``everything`` and drops the target (CI's plain check's)."""
    from dmlbench.perf import check as perf_check

    seen: list[bool] = []

    def fake_check(*args: object, everything: bool = False, **kwargs: object) -> list[object]:
        seen.append(everything)
        return []

    monkeypatch.setattr(perf_check, "run_check", fake_check)
    assert perf_check.main(["--all"] if everything else []) == 0
    out = capsys.readouterr().out
    assert seen == [everything]
    [wall] = [r for r in parse_table(out) if r["figure"].startswith("whole check: wall time")]
    assert (wall["peer"] == "—") == everything
    assert ("`dmlbench check --all`" in out) == everything


def test_update_of_the_sweeps_names_them_without_the_boards_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The sweeps are not boards: their wall time has no share of the boards' target."""
    from dmlbench.perf import update as perf_update

    seen: list[Path] = []
    monkeypatch.setattr(
        "dmlbench.leaderboard.sweeps.update_sweeps", lambda results, *a, **k: seen.append(results)
    )
    assert perf_update.main(["--what", "sweeps", "--work-dir", str(tmp_path / "w")]) == 0
    out = capsys.readouterr().out
    assert seen == [Path("results/sweeps")]
    assert "`dmlbench check --update-sweeps` into results/sweeps (no target" in out
    wall = next(r for r in parse_table(out) if r["figure"].startswith("wall time, min"))
    assert wall["peer"] in ("", "—") and "every board" not in out


def test_update_refuses_protocol_and_compare_with_for_the_sweeps(tmp_path: Path) -> None:
    from dmlbench.perf import update as perf_update

    argv = ["--what", "sweeps", "--work-dir", str(tmp_path), "--protocol", "icons-mini"]
    with pytest.raises(SystemExit) as stop:
        perf_update.main(argv)
    assert stop.value.code == 2
