"""The "Kept models and embeddings" example of docs/records.md runs as written (the run shortened to a
smoke test of the same code path, as tests/methods/test_plugin.py does). The commands run in
this process, with their globs expanded as a shell would, to spare four interpreter starts."""

from __future__ import annotations

import glob
import re
import shlex
from pathlib import Path

import numpy as np
import pytest

from dmlbench.cli.main import main

RECORDS_DOC = Path(__file__).parents[2] / "docs" / "records.md"
SMOKE = ["--max-steps", "3", "--no-progress"]


def readme_example() -> tuple[list[str], str]:
    text = RECORDS_DOC.read_text(encoding="utf-8")
    section = text[text.index("## Kept models and embeddings") :]
    commands = re.search(r"```bash\n(.*?)```", section, re.S).group(1).strip().splitlines()  # type: ignore[union-attr]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]
    return commands, code


def smoke(text: str) -> str:
    """A --max-steps run writes its record under its own name (``-override-<digest>``)."""
    return text.replace("-final.json", "-final-override-*.json")


def argv(command: str) -> list[str]:
    """``dmlbench`` arguments of ``command``, each glob expanded to its one match."""
    words = shlex.split(command)
    assert words[0] == "dmlbench", command
    out = []
    for word in words[1:]:
        if "*" in word:
            (word,) = glob.glob(word)
        out.append(word)
    return out


def test_readme_embed_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from PIL import Image

    commands, code = readme_example()
    run, *embeds = commands
    assert run.startswith("dmlbench run") and all(c.startswith("dmlbench embed") for c in embeds)
    monkeypatch.chdir(tmp_path)
    Path("my_letters").mkdir()
    for name, colour in (("a.png", 0), ("b.jpg", 200)):
        Image.new("RGB", (40, 30), (colour, colour, 255 - colour)).save(Path("my_letters", name))
    assert main([*argv(run), *SMOKE]) == 0
    for command in embeds:
        assert main(argv(smoke(command))) == 0, command
    (weights,) = glob.glob("results/glyphs-mini@defaults/*/artifacts/contrastive-*.pt")
    assert Path(weights).stat().st_size < 1.1e6  # the disk table of docs/records.md: 1.0 MB
    capsys.readouterr()
    exec(compile(smoke(code), "docs/records.md", "exec"), {})
    assert capsys.readouterr().out.splitlines() == ["torch.Size([2, 64])", "2 (2, 64)"]
    with np.load("mine.npz") as npz:
        assert list(npz["files"]) == ["a.png", "b.jpg"] and npz["embeddings"].shape == (2, 64)
