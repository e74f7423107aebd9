"""Per-file licences from Debian's machine-readable copyright files (DEP-5).

A Debian package's ``/usr/share/doc/<package>/copyright`` gives its licences in ``Files:``
stanzas. ``Files: *`` is the package's default, and later stanzas name the files under
another licence: elementary-xfce's ``emblem-readonly`` and ``emblem-unreadable`` are
CC-BY-SA-2.0 in a GPL-2+ theme, and Adwaita's ``accessories-dictionary`` is not under the
theme's CC-BY-SA-3.0/LGPL-3. Reading only ``Files: *`` labelled those images wrongly, so every
image derived from a package's file gets the licence of the stanza that matches that file.

Matching follows the copyright-format 1.0 specification
(https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/): a pattern is a path
relative to the source tree in which ``*`` matches any run of characters, ``/`` included,
``?`` one character, and ``\\*``, ``\\?``, ``\\\\`` the characters themselves; of the stanzas
that match a file, the last one in the file wins.

The patterns name *source* files, while a package installs built ones (elementary-xfce
installs ``emblems/48/emblem-readonly.png`` rendered from the ``.svg`` its stanza names), so a
caller passes every source path an installed file may come from (:func:`file_stanza`).

The installed version of a package (:func:`package_version`, dpkg's answer) belongs to the
same facts: the data sets drawn from a package key their caches by it, so an upgrade of the
package's art rebuilds them.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path

DOC_DIR = Path("/usr/share/doc")
FIELD = re.compile(r"([A-Za-z][A-Za-z0-9-]*):(.*)")


@dataclass(frozen=True)
class Stanza:
    """One ``Files:`` paragraph: its glob patterns, licence (short name) and copyright."""

    patterns: tuple[str, ...]
    licence: str
    copyright: str

    def matches(self, path: str) -> bool:
        """Whether one of the patterns matches ``path`` (relative to the source tree)."""
        return any(pattern_regex(p).fullmatch(path) for p in self.patterns)


@cache
def package_version(package: str) -> str:
    """The installed version of a Debian package (``unknown`` without dpkg or the package):
    part of the cache keys of data drawn from packages, so that an upgraded font or theme is
    drawn again. Cached: a data set asks for it on every load."""
    try:
        out = subprocess.run(
            ["dpkg-query", "-W", "-f=${Version}", package],
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


@lru_cache(maxsize=1024)
def pattern_regex(pattern: str) -> re.Pattern[str]:
    """The regular expression of one DEP-5 ``Files`` pattern (see the module docstring)."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern) and pattern[i + 1] in "*?\\":
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if c == "*" else "." if c == "?" else re.escape(c))
        i += 1
    return re.compile("".join(out), re.DOTALL)


def paragraphs(text: str) -> list[dict[str, str]]:
    """The fields of each paragraph (separated by blank lines); continuation lines (starting
    with a space or tab) are joined to their field with newlines. Lines that are neither a
    field nor a continuation (free text before the first stanza) are skipped."""
    out: list[dict[str, str]] = []
    fields: dict[str, str] = {}
    last: str | None = None
    for line in [*text.splitlines(), ""]:
        if not line.strip():
            if fields:
                out.append(fields)
            fields, last = {}, None
        elif line[0] in " \t":
            if last is not None and line.strip() != ".":  # " ." is an empty line
                fields[last] += "\n" + line.strip()
        elif m := FIELD.match(line):
            last = m.group(1).lower()
            fields[last] = m.group(2).strip()
        else:
            last = None
    return out


def parse_copyright(text: str) -> list[Stanza]:
    """The ``Files:`` stanzas of a copyright file, in file order.

    The licence is the first line of the ``License`` field (its short name, e.g.
    ``CC-BY-SA-3.0 or LGPL-3``); the copyright is the ``Copyright`` field's lines, joined by
    ``; ``. Stanzas without a ``License`` field are skipped (the format requires one).
    """
    stanzas = []
    for fields in paragraphs(text):
        if "files" not in fields or not fields.get("license", "").strip():
            continue
        patterns = tuple(fields["files"].split())
        licence = fields["license"].strip().splitlines()[0].strip()
        holders = [ln.strip() for ln in fields.get("copyright", "").splitlines() if ln.strip()]
        stanzas.append(Stanza(patterns, licence, "; ".join(holders)))
    return stanzas


@lru_cache(maxsize=32)
def package_stanzas(package: str) -> tuple[Stanza, ...]:
    """The stanzas of ``/usr/share/doc/<package>/copyright``; none when it cannot be read."""
    try:
        text = (DOC_DIR / package / "copyright").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ()
    return tuple(parse_copyright(text))


def file_stanza(stanzas: Sequence[Stanza], sources: Iterable[str]) -> Stanza | None:
    """The stanza that licenses a file: the last one matching any of its ``sources`` (the
    paths, relative to the source tree, that the installed file may have been built from)."""
    paths = list(sources)
    for stanza in reversed(stanzas):
        if any(stanza.matches(p) for p in paths):
            return stanza
    return None


def default_licence(stanzas: Sequence[Stanza]) -> str:
    """The licence of the package's ``Files: *`` stanza (its default), or ``unknown``."""
    everything = [s for s in stanzas if "*" in s.patterns]
    return everything[-1].licence if everything else "unknown"
