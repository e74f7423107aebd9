"""Your own data with a query/gallery split: an index in Open Metric Learning's CSV format.

An index file of the ``images`` source whose header names ``is_query`` or ``is_gallery`` is
read as OML's format: columns ``label``, ``path``, ``split`` (``train``, or ``validation`` /
``test`` for the evaluated images), ``is_query``, ``is_gallery`` (``True``/``False``, ``1``/``0``;
empty on training rows) and optionally ``category`` (kept as the class's group). Training rows
train; evaluated rows are scored as OML scores them, and as In-shop is:

- every evaluated image both query and gallery (OML's CUB, Cars and SOP files): each image
  queries all the others (dmlbench's usual test split, role ``test``);
- each evaluated image query or gallery, not both (OML's In-shop file): queries search the
  gallery only (roles ``query`` / ``gallery``, In-shop's), and every query needs a gallery image
  of its class.

A file mixing the two (some images both, some one) is refused: dmlbench scores either every
test image against the others or disjoint queries against a gallery. The split is the file's:
the protocol says ``split: {column: true}``. Every problem is one line naming the file and the
line (or the column).
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from pathlib import Path

from dmlbench.errors import DataError, did_you_mean

REQUIRED = ("label", "path", "split", "is_query", "is_gallery")
COLUMNS = (*REQUIRED, "category")
TRAIN, EVALUATED = ("train",), ("validation", "test")
TRUE, FALSE = {"true", "1", "1.0", "yes"}, {"false", "0", "0.0", "no"}


def is_query_gallery_index(header: list[str]) -> bool:
    """An index header in OML's format (it names ``is_query`` or ``is_gallery``)."""
    return bool({"is_query", "is_gallery"} & {h.strip() for h in header})


def query_gallery_rows(
    path: Path, lines: list[tuple[int, list[str]]], check: Callable[[str, str], None]
) -> list[tuple[str, str, str, str, str]]:
    """``(path, label, role, category, where)`` per image of an OML index.

    Args:
        path: the index file (for messages).
        lines: its ``(line number, cells)``, the header first.
        check: ``check(rel_path, where)``, raising for a path outside the root or no file.

    Raises:
        DataError: a missing or unknown column, an empty or bad value, a path listed twice,
            a class both trained on and evaluated, no query, a query class without a gallery
            image, a file mixing both-roles and one-role images.
    """
    at, header = lines[0]
    header = [h.strip() for h in header]
    for name in REQUIRED:
        if name not in header:
            raise DataError(
                f"{path}:{at}: no column {name!r}; Open Metric Learning's format has the "
                f"columns {', '.join(REQUIRED)} (and optionally category)"
            )
    for name in header:
        if name not in COLUMNS or header.count(name) > 1:
            problem = "repeated" if name in COLUMNS else f"unknown{did_you_mean(name, [*COLUMNS])}"
            raise DataError(f"{path}:{at}: column {name!r} is {problem}; columns: {COLUMNS}")
    out: list[tuple[str, str, str, str, str]] = []
    seen: dict[str, int] = {}
    side_of: dict[str, tuple[str, str]] = {}
    for at, cells in lines[1:]:
        where = f"{path}:{at}"
        if len(cells) != len(header):
            raise DataError(f"{where}: expected {len(header)} fields, got {len(cells)}")
        row = dict(zip(header, (c.strip() for c in cells), strict=True))
        for key in ("path", "label", "split"):
            if not row[key]:
                raise DataError(f"{where}: empty {key}")
        split = row["split"].lower()
        if split not in (*TRAIN, *EVALUATED):
            raise DataError(f"{where}: split {row['split']!r} is not train, validation or test")
        evaluated = split in EVALUATED
        q = flag(row["is_query"], "is_query", where, evaluated)
        g = flag(row["is_gallery"], "is_gallery", where, evaluated)
        if evaluated and not (q or g):
            raise DataError(f"{where}: a {split} image with is_query and is_gallery both false")
        check(row["path"], where)
        key = posixpath.normpath(row["path"].replace("\\", "/"))
        if key in seen:
            raise DataError(f"{where}: {row['path']} is listed twice (line {seen[key]})")
        seen[key] = at
        side = "test" if evaluated else "train"
        first = side_of.setdefault(row["label"], (side, where))
        if first[0] != side:
            raise DataError(
                f"{where}: class {row['label']!r} is in {side} here and in {first[0]} at "
                f"{first[1]}; the split is by class"
            )
        role = "train" if not evaluated else "test" if q and g else "query" if q else "gallery"
        out.append((row["path"], row["label"], role, row.get("category", ""), where))
    check_roles(path, out)
    return out


def flag(value: str, column: str, where: str, evaluated: bool) -> bool:
    """A boolean cell: required on evaluated rows, empty or false on training rows."""
    low = value.lower()
    if low in TRUE or low in FALSE:
        result = low in TRUE
    elif not low and not evaluated:
        result = False
    else:
        need = "True or False" + ("" if evaluated else " (or empty on a train row)")
        raise DataError(f"{where}: column {column}: {value!r} is not {need}")
    if result and not evaluated:
        raise DataError(f"{where}: column {column}: a train image is never a query or gallery")
    return result


def check_roles(path: Path, rows: list[tuple[str, str, str, str, str]]) -> None:
    """The evaluated rows are all both-roles or all one-role, with a query, and every query
    class has a gallery image (one-role) or a second image (both-roles)."""
    evaluated = [r for r in rows if r[2] != "train"]
    if not evaluated:
        raise DataError(f"{path}: no validation or test image (split column), so no query")
    both = [r for r in evaluated if r[2] == "test"]
    if both and len(both) != len(evaluated):
        one = next(r for r in evaluated if r[2] != "test")
        raise DataError(
            f"{one[4]}: {one[2]} only, but {both[0][4]} is both query and gallery; dmlbench "
            "scores every evaluated image against the others (all both) or queries against a "
            "gallery (each one of the two)"
        )
    if both:
        count: dict[str, int] = {}
        for r in both:
            count[r[1]] = count.get(r[1], 0) + 1
        lone = next((r for r in both if count[r[1]] < 2), None)
        if lone is not None:
            raise DataError(
                f"{lone[4]}: class {lone[1]!r} has 1 evaluated image, so it cannot be a query "
                "with a positive; add images or keep the class in train"
            )
        return
    queries = [r for r in evaluated if r[2] == "query"]
    if not queries:
        raise DataError(f"{path}: no row has is_query true, so nothing is evaluated")
    in_gallery = {r[1] for r in evaluated if r[2] == "gallery"}
    orphan = next((r for r in queries if r[1] not in in_gallery), None)
    if orphan is not None:
        raise DataError(
            f"{orphan[4]}: query of class {orphan[1]!r}, which has no gallery image "
            "(is_gallery true): it could never be retrieved"
        )
