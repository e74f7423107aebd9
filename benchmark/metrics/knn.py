"""The exact k-NN search behind every retrieval metric: faiss, or torch on the run's GPU.

:func:`knn` asks a flat (exact, squared L2) search for candidates and makes their order exact
where float32 rounding could have set it (near-ties re-ranked by float64 distance, then gallery
index). The search is faiss's ``IndexFlatL2`` on the CPU, or on the run's GPU when faiss has GPU
support. When the run is on a GPU and faiss has none (faiss-cpu, the default dependency: the
H200 measurement in reports/perf/gpu.md found SOP-scale evaluation 116 times slower on the CPU
than a k-NN in torch on the card), :class:`TorchFlatL2` searches on the run's device instead,
blocked over queries to fit its memory.

Both searches give :func:`knn` the same result: the candidates of each are ordered by their
float32 distance, ties by gallery index (faiss's heap breaks exact ties by the lower id; torch's
``topk`` does not, so :class:`TorchFlatL2` sorts its candidates by distance, then index; copies
of one vector are at bit-identical distances in both), the two float32 distances differ by
rounding only, and every pair within rounding of each other is
re-ranked by the same float64 distance. So without ``labels`` the neighbour lists are equal,
index for index, exact ties and duplicate vectors included; with ``labels`` the same-class
pattern of every list, hence every metric, is equal (the order among candidates of one kind,
which no metric reads, is each search's own). ``tests/metrics/test_torch_knn.py`` checks both
on the CPU, with the torch search forced (:func:`torch_search`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)


class FlatSearch(Protocol):
    """What :func:`knn` needs of a search: faiss's ``search`` signature."""

    def search(self, x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]: ...


def knn(
    queries: np.ndarray,
    gallery: np.ndarray,
    k: int,
    self_index: np.ndarray | None = None,
    labels: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """Indices (Q, k) of the exact k nearest gallery items (squared L2), nearest first.

    Ties are broken by gallery index, deterministically: faiss ranks by float32 distances, in
    which two items at exactly the same distance land in an order set by rounding (on
    quantised embeddings Recall@1 then moves by points between runs of the same numbers). So
    the candidates are re-ranked by their float64 distance, then by index, and faiss is asked
    for more candidates until no row's k-th distance ties (within float32 rounding) with a
    candidate it did not return. ``self_index`` gives each query's own position in the gallery
    (queries drawn from the gallery); that item is removed from the result.

    ``labels`` (query labels, gallery labels), for metrics of class labels, which read only
    whether each neighbour is of the query's class: then only the order between candidates of
    the query's class and the others is made exact, and candidates of the same kind may keep
    faiss's order among themselves (the same-class pattern of every list is the one without
    ``labels``; a quarter of the float64 work at CUB scale).
    """
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    gallery = np.ascontiguousarray(gallery, dtype=np.float32)
    index = flat_l2_search(gallery)  # faiss; torch on the run's GPU when faiss has no GPU
    extra = 0 if self_index is None else 1
    want = min(k + extra, gallery.shape[0])
    g_scale = (gallery**2).sum(axis=1).max()
    q_scale = g_scale if queries is gallery else (queries**2).sum(axis=1).max(initial=0.0)
    scale = float(q_scale + g_scale)
    take = min(want + TIE_CANDIDATES, gallery.shape[0])
    while True:
        dist, idx = index.search(queries, take)
        boundary = dist[:, want - 1] + TIE_RTOL * max(scale, 1e-12)
        if take == gallery.shape[0] or bool((dist[:, -1] > boundary).all()):
            break
        take = min(2 * take, gallery.shape[0])
    kind = None
    if labels is not None:  # 1: of the query's class, 0: another, 2: the query itself
        kind = (labels[1][idx] == np.asarray(labels[0])[:, None]).view(np.int8)
        if self_index is not None:
            kind = np.where(idx == np.asarray(self_index)[:, None], np.int8(2), kind)
    idx = _rerank_near_ties(queries, gallery, dist, idx, TIE_RTOL * max(scale, 1e-12), want, kind)
    if self_index is None:
        return idx[:, :want]
    # The query's own item leaves its list, the others keep their order (no sort: one gather).
    is_self = idx == np.asarray(self_index)[:, None]
    at = np.where(is_self.any(axis=1), is_self.argmax(axis=1), idx.shape[1])
    cols = np.arange(want - 1)[None, :]
    return np.take_along_axis(idx, cols + (cols >= at[:, None]), axis=1)


TIE_CANDIDATES = 8  # extra candidates fetched so ties at the k-th place can be resolved
TIE_RTOL = 1e-5  # float32 rounding of squared distances, relative to their largest scale


def _rerank_near_ties(
    queries: np.ndarray,
    gallery: np.ndarray,
    dist: np.ndarray,
    idx: np.ndarray,
    tol: float,
    keep: int | None = None,
    kind: np.ndarray | None = None,
) -> np.ndarray:
    """Candidates ordered by float64 distance, then gallery index, where faiss's float32 order
    may be wrong: inside each run of candidates whose consecutive float32 distances lie within
    ``tol`` (float32 rounding) of each other.

    Two candidates further apart than the rounding are already in their exact order (faiss's
    float32 distance is within ``tol / 2`` of the exact one: the engine has always relied on it
    for the rows without a run, which it never re-ranked), so only the members of a run need
    their float64 distance, and only their order within the run can change. Until 2026-11 every
    candidate of a row with a run was recomputed in float64 and the whole row sorted: the same
    order (``tests/metrics/test_fast_evaluation.py`` checks it against that engine, bit for bit)
    at 20 times the work, since at CUB scale 87% of rows hold a run somewhere among their 89
    candidates while only 5% of the candidates are in one; that sort was 75% of the
    evaluation (docs/performance.md, "Where evaluation time goes").

    Only the first ``keep`` candidates are returned in that order (the rest are cut off by the
    caller): a run that starts after them is left as faiss ranked it. With ``kind`` (a small
    integer per candidate), only runs holding two kinds are ordered: the sequence of kinds along
    each row is then the exact one, the order among candidates of one kind is faiss's.
    """
    near = np.diff(dist, axis=1) <= tol  # near[:, j]: candidates j and j + 1 may swap
    if keep is not None and keep < near.shape[1]:  # links beyond: only the run across the cut
        near[:, keep:] = np.logical_and.accumulate(near[:, keep - 1 :], axis=1)[:, 1:]
    rows = np.flatnonzero(near.any(axis=1))
    if not len(rows):
        return idx
    near = near[rows]
    sub = idx[rows]
    run = np.zeros(sub.shape, dtype=np.int64)  # run number of each candidate along its row
    np.cumsum(~near, axis=1, out=run[:, 1:])
    member = np.zeros(sub.shape, dtype=bool)
    member[:, 1:] = near
    member[:, :-1] |= near
    if kind is not None:  # a run of one kind: its order among itself changes no kind's place
        k = kind[rows]
        change = near & (k[:, 1:] != k[:, :-1])  # a link inside a run between two kinds
        flat = run + (run[:, -1:] + 1).cumsum()[:, None] - (run[:, -1:] + 1)  # runs numbered
        mixed = np.bincount(flat[:, 1:].ravel(), change.ravel(), int(flat[-1, -1]) + 1) > 0
        member &= mixed[flat]
        keep_rows = member.any(axis=1)
        rows, sub, run, member = rows[keep_rows], sub[keep_rows], run[keep_rows], member[keep_rows]
        if not len(rows):
            return idx
    r, c = np.nonzero(member)
    exact = np.zeros(sub.shape, dtype=np.float64)  # 0 outside runs: a run of one keeps its place
    exact[r, c] = _pair_distances(queries, gallery, rows[r], sub[r, c])
    idx = idx.copy()
    idx[rows] = np.take_along_axis(sub, np.lexsort((sub, exact, run)), axis=1)
    return idx


def _pair_distances(
    queries: np.ndarray, gallery: np.ndarray, q: np.ndarray, g: np.ndarray
) -> np.ndarray:
    """Float64 squared distances of the pairs (queries[q[i]], gallery[g[i]]), in blocks.

    Each is the sum of the squared float64 differences over the d coordinates, as one
    contiguous NumPy reduction: the same float64 value, bit for bit, as before 2026-11 (when
    a block of queries times all its candidates was reduced along its last axis), so exact ties
    keep falling to the lower index."""
    out = np.empty(len(q), dtype=np.float64)
    block = max(1, 2**18 // max(1, gallery.shape[1]))  # 2 MB of float64: in cache
    for s in range(0, len(q), block):
        diff = queries[q[s : s + block]].astype(np.float64)
        diff -= gallery[g[s : s + block]]
        diff *= diff
        out[s : s + block] = diff.sum(axis=1)
    return out


def faiss_flat_l2(dim: int, device: torch.device | str | None = None) -> Any:
    """An exact L2 index on the run's GPU when faiss has GPU support, else on the CPU.

    Args:
        dim: the width of the vectors.
        device: the run's device; ``None``: torch's current CUDA device when this process has
            initialised CUDA (a run on a GPU has), else the CPU.
    """
    import faiss

    index = faiss.IndexFlatL2(dim)
    gpu = faiss_gpu(device)
    if gpu is None:
        return index
    if gpu not in _GPU_RESOURCES:
        _GPU_RESOURCES[gpu] = faiss.StandardGpuResources()  # must outlive the index
    return faiss.index_cpu_to_gpu(_GPU_RESOURCES[gpu], gpu, index)


def faiss_gpu(device: torch.device | str | None = None) -> int | None:
    """The GPU a faiss index goes on (the run's CUDA device), or ``None`` for the CPU.

    faiss-cpu, the default dependency, has no GPU support, and a faiss with it would otherwise
    put every index on GPU 0, also under a run or search worker on another GPU, or beside a run
    on the CPU. So a GPU is used only when the run's device is CUDA and faiss can, on that
    device; the choice is logged once per process and device, a CUDA run whose search stays on
    the CPU as a warning saying how to install faiss with GPU support.
    """
    import faiss
    import torch

    if device is None:
        device = "cuda" if torch.cuda.is_initialized() else "cpu"
    device = torch.device(device)
    gpu = None
    if device.type == "cuda":
        gpu = torch.cuda.current_device() if device.index is None else device.index
    if gpu is not None and not (hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus()):
        if ("cpu-only", gpu) not in _LOGGED:
            _LOGGED.add(("cpu-only", gpu))
            log.warning(
                "k-NN search on the CPU although the run is on cuda:%d: this faiss has no GPU "
                "support (pip uninstall faiss-cpu && pip install faiss-gpu-cu12)",
                gpu,
            )
        return None
    if ("index", gpu) not in _LOGGED:
        _LOGGED.add(("index", gpu))
        log.info("k-NN search: faiss index on %s", "the CPU" if gpu is None else f"GPU {gpu}")
    return gpu


_GPU_RESOURCES: dict[int, Any] = {}  # one faiss.StandardGpuResources per GPU
_LOGGED: set[tuple[str, int | None]] = set()  # each choice is logged once per process


class TorchFlatL2:
    """An exact squared-L2 k-NN search in torch on ``device``, ordered as faiss orders it.

    The candidates are the k smallest of ``|q|^2 + |g|^2 - 2 q.g`` (faiss's formula for a batch
    of queries, one matrix product) in float32 with TF32 off (its 10-bit mantissa would put
    distances far outside the rounding :func:`knn` allows for). Their distances are then
    recomputed pair by pair as the sum of squared differences, so that copies of one vector
    are at bit-identical distances wherever they sit in the gallery (a matrix product's tiles
    round columns differently), and each row comes out by that distance, then gallery index,
    as faiss's heap orders ties. The work is done ``block_rows`` queries at a time: by default
    as many as fit in a quarter of the device's free memory (64 MB on the CPU).
    """

    def __init__(
        self, gallery: np.ndarray, device: torch.device | str, block_rows: int | None = None
    ) -> None:
        import torch

        self.device = torch.device(device)
        self.gallery = torch.from_numpy(np.ascontiguousarray(gallery, dtype=np.float32)).to(
            self.device
        )
        self.g_sq = (self.gallery * self.gallery).sum(dim=1)
        self.block_rows = block_rows

    def _rows(self, k: int) -> int:
        import torch

        if self.block_rows is not None:
            return max(1, self.block_rows)
        budget = 2**26
        if self.device.type == "cuda":
            budget = torch.cuda.mem_get_info(self.device)[0] // 4
        n, d = self.gallery.shape
        per_row = 4 * (3 * n + 2 * k * d)  # distances, top-k, the candidates' differences
        return max(1, budget // max(1, per_row))

    def search(self, x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """``(distances, indices)``, each (Q, k), nearest first, as ``IndexFlatL2.search``."""
        import torch

        q_all = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
        dist = np.empty((len(x), k), dtype=np.float32)
        idx = np.empty((len(x), k), dtype=np.int64)
        rows = self._rows(k)
        with _full_float32(), torch.no_grad():
            for s in range(0, len(x), rows):
                q = q_all[s : s + rows].to(self.device)
                d = (q * q).sum(dim=1)[:, None] + self.g_sq[None, :]
                d = d.addmm_(q, self.gallery.t(), alpha=-2.0)
                ix = torch.topk(d, k, dim=1, largest=False, sorted=False).indices
                del d
                ix = ix.sort(dim=1).values  # by index; then a stable sort by distance
                diff = q[:, None, :] - self.gallery[ix]
                val, by_dist = (diff * diff).sum(dim=2).sort(dim=1, stable=True)
                del diff
                dist[s : s + rows] = val.cpu().numpy()
                idx[s : s + rows] = ix.gather(1, by_dist).cpu().numpy()
        return dist, idx


@contextlib.contextmanager
def _full_float32() -> Iterator[None]:
    """float32 matrix products in full float32 (no TF32) inside, restored after."""
    import torch

    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


_TORCH_SEARCH: ContextVar[tuple[str, int | None] | None] = ContextVar(
    "dmlbench_torch_search", default=None
)


@contextlib.contextmanager
def torch_search(
    device: torch.device | str = "cpu", block_rows: int | None = None
) -> Iterator[None]:
    """Every :func:`knn` inside searches with :class:`TorchFlatL2` on ``device`` (tests and
    ``python -m dmlbench.perf.gpu`` force it on the CPU to compare it with faiss)."""
    token = _TORCH_SEARCH.set((str(device), block_rows))
    try:
        yield
    finally:
        _TORCH_SEARCH.reset(token)


def flat_l2_search(gallery: np.ndarray) -> FlatSearch:
    """The exact search over ``gallery`` for this process's run.

    faiss on the CPU, or on the run's GPU when faiss has GPU support; torch on the run's GPU
    when the run is on one (torch has initialised CUDA) and faiss has no GPU support; torch on
    the device :func:`torch_search` names inside it.
    """
    import torch

    forced = _TORCH_SEARCH.get()
    if forced is not None:
        return TorchFlatL2(gallery, forced[0], forced[1])
    if torch.cuda.is_initialized() and not _faiss_has_gpu():
        gpu = torch.cuda.current_device()
        if ("torch", gpu) not in _LOGGED:
            _LOGGED.add(("torch", gpu))
            log.info(
                "k-NN search: torch on cuda:%d (this faiss has no GPU support; faiss-gpu-cu12 "
                "would search there too)",
                gpu,
            )
        return TorchFlatL2(gallery, torch.device("cuda", gpu))
    index = faiss_flat_l2(gallery.shape[1])
    index.add(gallery)
    return index


def _faiss_has_gpu() -> bool:
    import faiss

    return hasattr(faiss, "StandardGpuResources") and bool(faiss.get_num_gpus())
