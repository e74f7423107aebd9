"""The "add your own method" example of docs/development.md runs as written, through --plugin."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

DEVELOPMENT_DOC = Path(__file__).parents[2] / "docs" / "development.md"


def readme_example() -> tuple[str, list[str]]:
    text = DEVELOPMENT_DOC.read_text(encoding="utf-8")
    section = text[text.index("## Add your own method") :]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]
    commands = re.search(r"```bash\n(.*?)```", section, re.S).group(1).strip().splitlines()  # type: ignore[union-attr]
    return code, commands


def test_readme_plugin_example_runs(tmp_path: Path) -> None:
    code, commands = readme_example()
    (tmp_path / "my_methods.py").write_text(code, encoding="utf-8")
    listing, run = commands
    out = subprocess.run(
        [sys.executable, "-m", "dmlbench", *listing.split()[1:]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "my-cosine-contrastive" in out and "my own idea" in out
    # The page's run command, shortened to a smoke test of the same code path.
    argv = [*run.split()[1:], "--max-steps", "3", "--trials", "1", "--no-progress"]
    proc = subprocess.run(
        [sys.executable, "-m", "dmlbench", *argv], cwd=tmp_path, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert "| my-cosine-contrastive" in proc.stdout and "| untrained" in proc.stdout
    assert list((tmp_path / "results").rglob("my-cosine-contrastive-seed0-final*.json"))
