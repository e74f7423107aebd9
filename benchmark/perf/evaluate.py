"""The metric engine at SOP and CUB scale against pytorch-metric-learning's AccuracyCalculator.

``python -m dmlbench.perf.evaluate`` builds clustered synthetic embeddings (class centres
drawn on the unit sphere, Gaussian noise around them, every class at least two items, the rest
spread at random over the classes) at four sizes by default:

- SOP: 60,502 × 128, 11,316 classes (Stanford Online Products' test split), sop.yaml's metrics;
- CUB: 5,924 × 512, 100 classes (CUB-200-2011's test split), cub200.yaml's metrics;
- VAL512 and VAL128: 1,500 × 512 with 25 classes and 2,000 × 128 with 50, the size of a search's
  validation fold (a quarter of CUB's or Cars' training classes), cub200.yaml's metrics;

and times, on the same embeddings in one process:

- ours: ``metrics.retrieval.embedding_metrics`` with exactly the metrics the size's protocol lists
  (sop: Recall@{1,10,100,1000}, MAP@R, R-Precision, NMI; cub200: Recall@{1,2,4,8,16,32}, MAP@R,
  R-Precision, NMI), and the selection metric alone (Recall@1, what a search's validation asks
  for: ``metrics.selection.validation_spec``);
- peer: ``AccuracyCalculator`` with the metrics it has (precision_at_1 = Recall@1,
  mean_average_precision_at_r, r_precision, NMI), ``k="max_bin_count"`` (the R its MAP@R
  needs), the L2-normalised embeddings as both query and reference (so each item's own match
  is excluded, as ours does), and the same faiss k-means for NMI (``FaissKMeans`` with
  niter=50, the same seed, min/max points per centroid 1/10⁶, i.e. ours' settings).

Each side is timed as two calls, retrieval metrics and NMI, and "full" is their sum. The
numbers must agree to 1e-4 (the script exits with status 1 otherwise). Also reported: the
floor, one exact faiss k-NN search (k = largest class size, the peer's search), and the ratio of
ours to it; our peak
memory (the peak resident set of a fresh process running our evaluation, ``VmHWM``;
``--peer-memory`` adds the peer's).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from dmlbench.metrics.catalogue import (
    FAMILIES,
    MAP_AT_R,
    NMI,
    R_PRECISION,
    RECALL,
    family,
    order_key,
)
from dmlbench.perf._common import (
    Row,
    Spread,
    add_common_options,
    emit,
    interleaved,
    load_now,
    machine_info,
    markdown_table,
    peak_rss,
    refuse_if_busy,
    rounds_option,
)

DEFAULT_SIZES = [
    "SOP=60502,128,11316,1.4,sop",
    "CUB=5924,512,100,3.4,cub200",
    "VAL512=1500,512,25,3.4,cub200",
    "VAL128=2000,128,50,1.4,cub200",
]
SELECTION = RECALL.at(1)  # the objective of every shipped class-label protocol
# Our record key → the peer's name of the same metric (AccuracyCalculator's vocabulary: its
# ``include`` names and result keys, not ours).
PAIRS = {
    RECALL.at(1): "precision_at_1",
    MAP_AT_R.name: "mean_average_precision_at_r",
    R_PRECISION.name: "r_precision",
    NMI.name: "NMI",
}
# The timed calls of each side: retrieval metrics, and the clustering metric apart (its own
# k-means, timed on its own).
CLUSTERING = "clustering"


def make_embeddings(
    n: int, dim: int, classes: int, noise: float, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Clustered embeddings (n, dim) float32 and labels (n,): ≥ 2 items per class."""
    if n < 2 * classes:
        raise ValueError(f"{n} items cannot give {classes} classes two items each")
    rng = np.random.default_rng(seed)
    sizes = 2 + rng.multinomial(n - 2 * classes, np.full(classes, 1.0 / classes))
    labels = np.repeat(np.arange(classes), sizes)
    centres = rng.normal(size=(classes, dim))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    x = centres[labels] + (noise / np.sqrt(dim)) * rng.normal(size=(n, dim))
    order = rng.permutation(n)
    return x[order].astype(np.float32), labels[order]


def protocol_spec(protocol: str, n: int) -> Any:
    """The protocol's ``metrics`` section, its Recall@K cut to the K a split of n items has."""
    from dmlbench.protocol import load_protocol

    spec = load_protocol(protocol).metrics
    return spec.model_copy(update={"recall_at": [k for k in spec.recall_at if k < n]})


def ours_calls(
    x: np.ndarray, labels: np.ndarray, seed: int, protocol: str = "cub200"
) -> dict[str, Callable[[], Any]]:
    """The protocol's retrieval metrics, its NMI, and the selection metric alone."""
    from dmlbench.metrics.retrieval import embedding_metrics, l2_normalize, nmi
    from dmlbench.metrics.selection import validation_spec

    spec = protocol_spec(protocol, len(x))
    retrieval = spec.model_copy(update={NMI.spec_field: False})
    selection = validation_spec(spec, SELECTION)
    calls: dict[str, Callable[[], Any]] = {
        "retrieval": lambda: embedding_metrics(x, labels, retrieval, seed=seed),
        "selection": lambda: embedding_metrics(x, labels, selection, seed=seed),
    }
    if spec.nmi:
        calls[CLUSTERING] = lambda: {NMI.name: nmi(l2_normalize(x), labels, seed=seed)}
    return calls


def peer_calls(
    x: np.ndarray, labels: np.ndarray, seed: int, device: torch.device | str = "cpu"
) -> dict[str, Callable[[], Any]]:
    from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator
    from pytorch_metric_learning.utils.inference import FaissKMeans

    kmeans = FaissKMeans(
        niter=50, seed=seed, min_points_per_centroid=1, max_points_per_centroid=1_000_000
    )
    calc = AccuracyCalculator(
        include=tuple(PAIRS.values()),
        k="max_bin_count",
        device=torch.device(device),
        kmeans_func=kmeans,
    )
    emb = torch.nn.functional.normalize(torch.from_numpy(x), dim=1)
    y = torch.from_numpy(labels)
    clustering = PAIRS[NMI.name]
    retrieval = tuple(v for v in PAIRS.values() if v != clustering)
    return {
        "retrieval": lambda: calc.get_accuracy(emb, y, include=retrieval),
        CLUSTERING: lambda: calc.get_accuracy(emb, y, include=(clustering,)),
    }


def faiss_floor(x: np.ndarray, labels: np.ndarray) -> tuple[Callable[[], Any], int]:
    """One exact faiss k-NN search with k = largest class (self included), as a call."""
    import faiss

    from dmlbench.metrics.retrieval import l2_normalize

    k = int(np.bincount(labels).max())
    xn = np.ascontiguousarray(l2_normalize(x), dtype=np.float32)
    index = faiss.IndexFlatL2(xn.shape[1])
    index.add(xn)

    def search() -> dict[str, float]:
        index.search(xn, k)
        return {}  # no metric

    return search, k


def _memory_target(
    n: int, dim: int, classes: int, noise: float, seed: int, side: str, protocol: str
) -> Any:
    x, labels = make_embeddings(n, dim, classes, noise, seed)
    if side == "ours":
        calls = ours_calls(x, labels, seed, protocol)
        calls.pop("selection")  # a subset of the retrieval call
    else:
        calls = peer_calls(x, labels, seed)
    return (x, labels), lambda: [call() for call in calls.values()]


def parse_size(text: str) -> tuple[str, int, int, int, float, str]:
    """``NAME=N,DIM,CLASSES,NOISE[,PROTOCOL]`` → (name, n, dim, classes, noise, protocol);
    the protocol (default cub200) says which metrics ours computes."""
    name, _, rest = text.partition("=")
    parts = rest.split(",")
    if len(parts) not in (4, 5) or not name:
        raise argparse.ArgumentTypeError(
            f"expected NAME=N,DIM,CLASSES,NOISE[,PROTOCOL], got {text!r}"
        )
    protocol = parts[4] if len(parts) == 5 else "cub200"
    return name, int(parts[0]), int(parts[1]), int(parts[2]), float(parts[3]), protocol


def describe(spec: Any) -> str:
    """``Recall@1/2/4, MAP@R, R-Precision, NMI``: the metrics a spec asks for, in the
    catalogue's order and labels."""
    names = []
    for f in FAMILIES:
        value = getattr(spec, f.spec_field)
        if f.per_k and value:
            names.append(f.label + "/".join(map(str, value)))
        elif not f.per_k and value:
            names.append(f.label)
    return ", ".join(names)


def timing_rows(
    name: str,
    times: dict[str, list[float]],
    classes: int,
    k: int,
    protocol: str,
    spec: Any,
) -> list[Row]:
    """Median seconds (min – max beside) of the full set, retrieval, NMI, the selection metric
    alone and the floor; the full set of a round is that round's retrieval + NMI."""
    t = {key: Spread.of(v) for key, v in times.items()}
    full = {}
    for side in ("ours", "peer"):
        retrieval = times[f"{side} retrieval"]
        clustering = times.get(f"{side} {CLUSTERING}", [0.0] * len(retrieval))
        full[side] = Spread.of([a + b for a, b in zip(retrieval, clustering, strict=True)])
    floor = t["floor"].median
    rows = [
        Row.timed(
            f"{name}: full metric set, s (ours: {protocol}'s {describe(spec)}; peer: its 4)",
            *full.values(),
        ),
        Row.timed(f"{name}: retrieval metrics, s", t["ours retrieval"], t["peer retrieval"]),
    ]
    if f"ours {CLUSTERING}" in t:
        rows.append(
            Row.timed(
                f"{name}: {NMI.label} (faiss k-means, {classes} clusters), s",
                t[f"ours {CLUSTERING}"],
                t[f"peer {CLUSTERING}"],
            )
        )
    rows += [
        Row.timed(
            f"{name}: floor, one faiss k-NN search (k={k}), s; ratio = ours retrieval / floor",
            t["floor"],
            None,
            t["ours retrieval"].median / floor,
        ),
        Row.timed(
            f"{name}: ours {SELECTION} alone (a search's validation), s; ratio = it / floor",
            t["ours selection"],
            None,
            t["ours selection"].median / floor,
        ),
    ]
    return rows


def run_size(
    name: str,
    n: int,
    dim: int,
    classes: int,
    noise: float,
    protocol: str,
    args: argparse.Namespace,
) -> tuple[list[Row], list[Row], float]:
    """The timing rows, the metric rows and the largest |ours − peer| for one size."""
    x, labels = make_embeddings(n, dim, classes, noise, args.seed)
    warm_x, warm_y = make_embeddings(400, dim, 40, noise, args.seed + 1)
    for calls in (ours_calls(warm_x, warm_y, 0, protocol), peer_calls(warm_x, warm_y, 0)):
        for call in calls.values():
            call()  # first-call costs (thread pools, lazy imports) are not timed
    spec = protocol_spec(protocol, n)
    ours, peer = ours_calls(x, labels, args.seed, protocol), peer_calls(x, labels, args.seed)
    floor_call, k = faiss_floor(x, labels)
    load_before = load_now()
    # Similar calls side by side, in an A B B A pattern, so a drifting load hits both sides.
    calls = {
        "floor": floor_call,
        "ours selection": ours["selection"],
        "ours retrieval": ours["retrieval"],
        "peer retrieval": peer["retrieval"],
        f"peer {CLUSTERING}": peer[CLUSTERING],
    }
    if CLUSTERING in ours:
        calls[f"ours {CLUSTERING}"] = ours[CLUSTERING]
    else:
        del calls[f"peer {CLUSTERING}"]
    times, results = interleaved(calls, repeats=args.repeats, warmup=0)
    values = {
        f"{call.split()[0]} {key}" + ("#alone" if call == "ours selection" else ""): float(v)
        for call, result in results.items()
        for key, v in result.items()
    }
    if values[f"ours {SELECTION}"] != values.pop(f"ours {SELECTION}#alone"):
        raise AssertionError(f"{name}: {SELECTION} alone differs from it in the full set")
    rows = timing_rows(name, times, classes, k, protocol, spec)
    if not args.no_memory:
        target = (n, dim, classes, noise, args.seed)
        before, after = peak_rss(_memory_target, *target, "ours", protocol)
        peer_mem: float | None = None
        if args.peer_memory:
            peer_mem = peak_rss(_memory_target, *target, "peer", protocol)[1] / 2**30
        rows.append(Row(f"{name}: peak RSS of a process running it, GB", after / 2**30, peer_mem))
        rows.append(
            Row(f"{name}: of which before the evaluation (data, imports), GB", before / 2**30)
        )
    metric_rows = []
    worst = 0.0
    for ours_key, peer_key in PAIRS.items():
        if f"ours {ours_key}" not in values:
            continue  # the protocol does not list it
        a, b = values[f"ours {ours_key}"], values[f"peer {peer_key}"]
        worst = max(worst, abs(a - b))
        metric_rows.append(Row(f"{name}: {ours_key} (peer {peer_key})", a, b, digits=6))
    ours_keys = [key.removeprefix("ours ") for key in values if key.startswith("ours ")]
    ours_only = [k for k in ours_keys if family(k) is not None and k not in PAIRS]  # no counts
    for key in sorted(ours_only, key=order_key):
        metric_rows.append(Row(f"{name}: {key} (peer has none)", values[f"ours {key}"], digits=6))
    rows.append(
        Row(f"{name}: largest abs. difference ours vs peer (shared metrics)", worst, digits=2)
    )
    rows.append(Row(f"{name}: load average before / after timing", f"{load_before} / {load_now()}"))
    return rows, metric_rows, worst


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m dmlbench.perf.evaluate",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--size",
        action="append",
        type=parse_size,
        help="NAME=N,DIM,CLASSES,NOISE[,PROTOCOL] (repeatable; PROTOCOL: whose metrics ours "
        "computes, default cub200); default: " + ", ".join(DEFAULT_SIZES),
    )
    parser.add_argument("--seed", type=int, default=0)
    rounds_option(
        parser, "--repeats", 3, "timed rounds, ≥ 3 (the median counts, min and max shown)"
    )
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory process")
    parser.add_argument("--peer-memory", action="store_true", help="also measure the peer's")
    add_common_options(parser)
    args = parser.parse_args(argv)
    refused = refuse_if_busy(args)
    if refused is not None:
        return refused
    sizes = args.size or [parse_size(s) for s in DEFAULT_SIZES]
    info = machine_info()
    rows: list[Row] = []
    metric_rows: list[Row] = []
    worst = 0.0
    for name, n, dim, classes, noise, protocol in sizes:
        r, m, w = run_size(name, n, dim, classes, noise, protocol, args)
        rows += r
        metric_rows += m
        worst = max(worst, w)
    verdict = "PASS" if worst <= 1e-4 else "FAIL"
    body = (
        f"Timing: median of {args.repeats} interleaved rounds, min and max beside (ratio = "
        "ours / peer of the medians unless the figure says otherwise). Targets: the full set "
        "≤ 0.5× the peer at SOP scale and ≤ 1.0× at CUB and validation scale; the retrieval "
        "metrics ≤ 1.2× the floor at SOP scale and ≤ 1.5× at the others:\n\n"
        + markdown_table(rows)
        + "\n\nMetric values:\n\n"
        + markdown_table(metric_rows)
        + f"\n\nEquality check (|ours − peer| ≤ 1e-4 on every shared metric): {verdict} "
        f"(max {worst:.2e})\n"
    )
    emit("dmlbench.perf.evaluate", info, body, args.out)
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    raise SystemExit(main())
