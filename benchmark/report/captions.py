"""Captions in words for the report's plots, read from the names the report gives them.

A caption that repeats the file path (``../sweeps/sweep-glyphs-mini@defaults@batch.
samples_per_class=4-batch.size.png``) tells a reader nothing the picture's title does not;
these say what is plotted against what.
"""

from __future__ import annotations

from pathlib import PurePosixPath

KEYS = {  # a protocol key -> what it is, in words
    "model.embedding_size": "the embedding size",
    "batch.size": "the batch size",
    "batch.samples_per_class": "the samples per class in a batch",
    "optimizer.lr": "the learning rate",
    "train.epochs": "the number of epochs",
}


def key_words(key: str) -> str:
    return KEYS.get(key, key)


def sweep_caption(name: str) -> str:
    """``sweep-<protocol>[@K=V…]-<key>.png``: what is swept, on which protocol, with what
    held fixed."""
    stem = name.removeprefix("sweep-").removesuffix(".png")
    protocol, _, key = stem.rpartition("-")
    base, *fixed = protocol.split("@")
    held = [f for f in fixed if "=" in f]
    budget = [f for f in fixed if "=" not in f]
    where = base + (f" ({', '.join(budget)})" if budget else "")
    also = ""
    if held:
        parts = [f"{key_words(k)} {v}" for k, _, v in (h.partition("=") for h in held)]
        also = f", with {' and '.join(parts)}"
    return (
        f"{where}: every metric against {key_words(key)}{also}; mean ± std over seeds, one line "
        "per method, the untrained network dashed."
    )


def caption(src: str) -> str:
    """The caption of the plot at ``src`` (a path relative to the page)."""
    name = PurePosixPath(src).name
    if name.startswith("sweep-"):
        return sweep_caption(name)
    if name.endswith("-bars.png"):
        return "The headline metric per method: mean over seeds, ± one std as error bars."
    if name.endswith("-forest.png"):
        return (
            "Each method's difference to the best of the other methods, with its 95% "
            "simultaneous interval and the ± δ equivalence band."
        )
    return name
