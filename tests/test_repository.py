"""The repository stands on its own: no citation of a document it does not hold, no path of a
particular machine, no private shorthand for the papers.

A reader of a module, a protocol or a published-numbers file must find every cited document
in the repository (or cited by author and venue), and a committed file must not name a folder
that exists only on the machine where it was written.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Every tracked file is scanned (sources, protocols, docs, generated records and reports: .json,
# .csv, .html, .svg, .tex...), except binary ones: a NUL byte in the first block, as git decides,
# or bytes that are not UTF-8 (PNG plots). Generated records carry the command line that made
# them and are committed, so they are checked too.
BINARY_PROBE = 8192
# An absolute path under a folder that exists only on some machine: a mount or data folder
# (/mnt/, /scratch/, /data/...), a home folder (/home/<user>/, /Users/<user>/, /root/) or a
# temporary folder (/tmp/<name>/). Not flagged: relative paths (tests/data/, ../data/), URLs
# (https://data.example.org/, file:///data), paths under a variable (${DATA}/data/x), and the
# deliberately bogus one-level examples of refused input (/home/x.jpg, /tmp/x, "/data").
MACHINE_PATH = re.compile(
    r"(?<![\w.:/~$})\-])/(?:"
    r"(?:work|farm|mnt|scratch|opt|data|srv|nfs|media|root)/(?=[\w.$~-])"
    r"|(?:home|Users)/[\w.-]+/"
    r"|tmp/[\w.-]+/"
    r")"
)
CITED_DOC = re.compile(r"\b([A-Z][A-Z_]+\.md)\b")
# The project's private names for the papers it started from ("the seed papers", "seed 002")
# mean nothing to a reader and, in a benchmark about random seeds, read as random seeds.
SHORTHAND = re.compile(r"\bseed[ -]?(?:papers?|00\d)\b", re.IGNORECASE)


def tracked_files(root: Path = ROOT) -> list[Path]:
    """The files git tracks under ``root``: what a clone holds, not what lies on this disk."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z"], cwd=root, capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [root / name for name in out.split("\0") if name]


def _text(path: Path) -> str | None:
    """The file's text, or None for a binary (or unreadable) file."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if b"\0" in data[:BINARY_PROBE]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _scanned(files: list[Path]) -> list[tuple[Path, str]]:
    """(path, text) of every text file but this one, which plants the violations it tests."""
    out = []
    for path in files:
        text = None if path == Path(__file__) else _text(path)
        if text is not None:
            out.append((path, text))
    return out


def missing_citations(root: Path = ROOT) -> list[str]:
    """``<file> cites <DOC>.md`` for each cited document git does not track under ``root``."""
    files = tracked_files(root)
    held = {p.name for p in files if p.suffix == ".md"}
    return [
        f"{path.relative_to(root)} cites {doc}"
        for path, text in _scanned(files)
        for doc in sorted(set(CITED_DOC.findall(text)) - held)
    ]


def lines_matching(pattern: re.Pattern[str], root: Path = ROOT) -> list[str]:
    """``<file>:<line>: <text>`` for each line of a tracked text file that ``pattern`` finds."""
    return [
        f"{path.relative_to(root)}:{line_no}: {line.strip()[:80]}"
        for path, text in _scanned(tracked_files(root))
        for line_no, line in enumerate(text.splitlines(), 1)
        if pattern.search(line)
    ]


def test_no_file_cites_a_document_the_repository_does_not_hold() -> None:
    problems = missing_citations()
    assert not problems, "\n".join(problems)


def test_no_file_names_a_folder_of_a_particular_machine() -> None:
    problems = lines_matching(MACHINE_PATH)
    assert not problems, "\n".join(problems[:20])


def test_papers_are_cited_by_author_not_by_a_private_name() -> None:
    """'seed 002' or 'the seed papers' mean nothing outside this project; cite Fehervari et al.
    2019 and section. CHANGELOG.md too: it is read by users."""
    problems = lines_matching(SHORTHAND)
    assert not problems, "\n".join(problems[:20])


def test_the_path_pattern_flags_machine_folders_only() -> None:
    flagged = [
        "see /work/shared/seeds/002.txt",
        "root: /home/alice/data",
        "root: /home/jean-luc.picard/CUB_200_2011",
        "data.root: /mnt/nas/CUB_200_2011",
        "--data-root /scratch/u123/sop",
        '"/data/cub200/images"',
        "/opt/conda/lib/python3.11",
        "cache in /root/.cache/dmlbench",
        "/Users/bob/Downloads/x",
        "written to /tmp/pytest-of-ci/pytest-3/",
        "`/srv/datasets/inshop`",
    ]
    for line in flagged:
        assert MACHINE_PATH.search(line), line
    legitimate = [
        "root: ${DMLBENCH_DATA}/CUB_200_2011",
        "tests/data/fixtures.py and benchmark/data/files.py",
        "../data/cub",
        "~/data/cub (your own folder)",
        "https://data.caltech.edu/records/65de6-vp158",
        "http://example.org/data/x.tgz and file:///data/x",
        "``../../etc/passwd``, ``/home/x.jpg``",  # benchmark/data/files.py: refused input
        "(`../../elsewhere`, `/tmp/x`, spaces)",  # docs/failures.md: refused input
        'update={"root": "/data"}',  # tests/test_protocol.py
        "${ROOT}/data/cub and $(pwd)/data/cub",
    ]
    for line in legitimate:
        assert not MACHINE_PATH.search(line), line


def test_the_shorthand_pattern_flags_every_spelling() -> None:
    for line in ("as seed 002 eq. 3 writes", "Seed 001 §4", "the seed papers", "a seed paper",
                 "seed-003's code"):  # fmt: skip
        assert SHORTHAND.search(line), line
    for line in ("--seed 0", "seeds 0, 1, 2", "seed 10", "seed 0020", "seeded paper order"):
        assert not SHORTHAND.search(line), line
    assert CITED_DOC.findall("(DESIGN.md §9)") == ["DESIGN.md"]


def _git_repo(root: Path, files: Mapping[str, str | bytes], track: list[str]) -> Path:
    """A git repository at ``root`` holding ``files`` on disk, ``track`` of them in the index."""
    root.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    subprocess.run(["git", "add", "--", *track], cwd=root, check=True)
    return root


def test_an_untracked_document_does_not_make_a_citation_pass(tmp_path: Path) -> None:
    """A DESIGN.md left on the maintainer's disk is not in a clone: citing it is an error."""
    files = {"a.py": "# the layout is in DESIGN.md §2\n", "DESIGN.md": "# Design\n"}
    root = _git_repo(tmp_path / "repo", files, track=["a.py"])
    assert (root / "DESIGN.md").is_file()
    assert missing_citations(root) == ["a.py cites DESIGN.md"]
    subprocess.run(["git", "add", "DESIGN.md"], cwd=root, check=True)
    assert missing_citations(root) == []


def test_every_tracked_text_file_is_scanned_and_binary_ones_are_not(tmp_path: Path) -> None:
    names = ["page.html", "plot.svg", "table.csv", "paper.tex", "setup.cfg", "pyproject.toml",
             "notes.txt", "record.json", "protocol.yaml", "run.sh", "docs/README"]  # fmt: skip
    planted = "data root /mnt/disk2/CUB_200_2011, after seed 002\n"
    files: dict[str, str | bytes] = {name: planted for name in names}
    files["plot.png"] = b"\x89PNG\r\n\x1a\n\0\0" + planted.encode()
    files["latin1.txt"] = b"\xe9t\xe9 " + planted.encode()  # not UTF-8: treated as binary
    root = _git_repo(tmp_path / "repo", files, track=list(files))
    for pattern in (MACHINE_PATH, SHORTHAND):
        found = {line.split(":")[0] for line in lines_matching(pattern, root)}
        assert found == set(names), pattern.pattern
    files = {"untracked.md": planted, "tracked.md": "clean\n"}
    root = _git_repo(tmp_path / "other", files, track=["tracked.md"])
    assert lines_matching(MACHINE_PATH, root) == []  # what is not tracked is not in a clone


DOCS = sorted((ROOT / "docs").glob("*.md"))


def test_the_readme_is_short() -> None:
    """Reference material lives in docs/; the README says what dmlbench is, how to run it, the
    result and the tour."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) < 250, f"README.md has {len(lines)} lines: move reference material to docs/"


def test_every_docs_page_is_linked_from_the_readme() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert DOCS, "docs/ holds no page"
    unlinked = [p.name for p in DOCS if f"](docs/{p.name})" not in readme]
    assert not unlinked, f"README.md does not link: {', '.join(unlinked)}"


def test_every_docs_page_links_back_to_the_readme() -> None:
    no_title = [p.name for p in DOCS if not p.read_text(encoding="utf-8").startswith("# ")]
    no_link = [p.name for p in DOCS if "](../README.md)" not in p.read_text(encoding="utf-8")]
    assert not no_title and not no_link, f"no title: {no_title}; no link back: {no_link}"


def test_no_documentation_holds_a_placeholder() -> None:
    """`TODO(timing)` and its kind mark a figure still to be measured: none may be committed."""
    problems = []
    for path in [ROOT / "README.md", *DOCS]:
        for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if "TODO(" in line:
                problems.append(f"{path.relative_to(ROOT)}:{line_no}: {line.strip()[:80]}")
    assert not problems, "\n".join(problems)
