"""What is known of a data set beyond its loader: :class:`About`, and the :class:`Spec` of
what ``dmlbench data prepare`` fetches or explains.

Kept apart from :mod:`dmlbench.data.base` and :mod:`dmlbench.data.prepare` (which both use
them) so that neither imports the other, and so that they import nothing heavier than the
standard library.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Archive:
    """An official archive: downloaded, checked against its SHA-256 before anything is
    extracted (:func:`dmlbench.data.prepare.download`)."""

    url: str
    sha256: str
    strip: str = ""  # leading folder of the members, removed on extraction


@dataclass(frozen=True)
class Spec:
    """How a real data set gets into place: its archive where a public URL can be used, else
    the layout and where to get the files, which ``prepare`` prints."""

    archive: Archive | None
    layout: str  # what must exist under ROOT ({root} is substituted)
    where: str  # where to get the files by hand


@dataclass(frozen=True)
class About:
    """What is known of a data set beyond its loader, kept beside the loader.

    The command line (``dmlbench data prepare``/``figure``), the cross-data-set report and the
    published tables read these instead of lists of their own, so that adding a data set is
    its module, its protocol and the lock (docs/development.md "Add a data set").

    Attributes:
        source: where the images come from (a paper's release, installed packages, generated).
        licence: the images' licence, or where the prepared folder's record of it is; the
            per-image records stay with the code that writes them (:mod:`dmlbench.data.licences`,
            ``licences.yaml`` of the emoji and icons sets), and are not repeated here.
        citation: the paper to cite for the data, empty where there is none.
        splits: how train and test are drawn (the protocol's ``data.params`` may refine it).
        prepare: what ``dmlbench data prepare NAME`` does: a :class:`Spec`
            (download and verify an archive, or print where the files go), ``"render"`` (render
            from installed packages with the module's ``prepare``/``prepared_root``), or
            ``None`` (nothing to prepare: generated in memory, or the user's own folder).
        figure: ``dmlbench data figure NAME`` draws it (the module's ``FIGURE_CLASSES`` by its
            ``FIGURE_SOURCES``).
        paper_benchmark: one of the benchmarks papers report on; the cross-data-set report
            says when none of its boards is.
        published_protocols: the shipped protocols on this data set whose numbers pair with
            published ones (:mod:`dmlbench.report.published`).
    """

    source: str = ""
    licence: str = ""
    citation: str = ""
    splits: str = ""
    prepare: Spec | Literal["render"] | None = None
    figure: bool = False
    paper_benchmark: bool = False
    published_protocols: tuple[str, ...] = ()
