"""The documentation a user is pointed to ships with the repository: every `docs/...` path cited anywhere in
the repository exists, every relative link in the Markdown files resolves, and nothing cites the design notes
that are not part of it (issue 20, item 8)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TEXT = (".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".sh", ".cfg")
DOC_PATH = re.compile(r"\bdocs/[\w./-]+\.md")
MD_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
NOT_SHIPPED = re.compile(r"\b(DESIGN|NOTES)\.md\b")


def _tracked_text_files() -> list[Path]:
    names = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout.split()
    return [REPO / n for n in names
            if (n.endswith(TEXT) or Path(n).name == "Makefile") and (REPO / n).is_file()]


def test_every_cited_doc_exists_and_no_unshipped_notes_are_cited():
    missing, unshipped = [], []
    for path in _tracked_text_files():
        text = path.read_text(errors="replace")
        rel = path.relative_to(REPO)
        missing += [f"{rel}: {m}" for m in DOC_PATH.findall(text) if not (REPO / m).is_file()]
        if path.name != "test_docs.py":
            unshipped += [f"{rel}:{text[:m.start()].count(chr(10)) + 1}" for m in NOT_SHIPPED.finditer(text)]
    assert not missing, missing
    assert not unshipped, unshipped


def test_relative_links_in_the_markdown_resolve():
    broken = []
    for path in _tracked_text_files():
        if path.suffix != ".md":
            continue
        for target in MD_LINK.findall(path.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (path.parent / target).exists():
                broken.append(f"{path.relative_to(REPO)} -> {target}")
    assert not broken, broken


def test_the_docs_cover_what_a_user_is_pointed_to():
    for name in ("architecture", "agents", "game-contract", "rewards", "run-folder", "platform"):
        assert (REPO / "docs" / f"{name}.md").is_file(), name


def test_the_readme_lists_every_game_key_and_policy():
    from coplay.config import GAME_KEYS

    line = next(ln for ln in (REPO / "README.md").read_text().splitlines() if ln.startswith("Game keys"))
    assert [k for k in GAME_KEYS if f"`{k}`" not in line] == []
    readme = (REPO / "README.md").read_text()
    assert "--policy model" not in readme and "run:RUN_DIR[@STEP]" in readme
