"""The docs stay true to the tree: generated pages are current, the README stays short, and
every file path and module the README and docs/ name exists."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_results_page_is_rendered_from_results() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "render_results.py"), "--check"],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr


def test_readme_is_short_and_links_exist() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 120
    for link in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
        if not link.startswith("http"):
            assert (ROOT / link).exists(), f"README links to a missing file: {link}"


def test_named_package_paths_exist() -> None:
    missing = set()
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        if doc.name == "history.md":  # the lab notebook names what existed then
            continue
        for path in re.findall(r"python/ansor/[\w/]+\.py", doc.read_text()):
            if not (ROOT / path).exists():
                missing.add(f"{doc.name}: {path}")
    assert not missing, "docs name files that do not exist:\n" + "\n".join(sorted(missing))
