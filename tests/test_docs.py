"""The documentation site (mkdocs.yml, docs/): it builds with no warning (broken links and anchors, pages
left out of the nav), its generated CLI reference says what `labeler SUB --help` says, its generated
schemas page holds every column, and the README's links into it resolve. One build, shared."""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from labeler.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's banner about its successor: not a warning of ours
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    log = done.stdout + done.stderr
    assert done.returncode == 0, log
    assert "WARNING" not in log, log
    return out


def page_html(site: Path, source: str) -> str:
    """The built page of docs/SOURCE (directory URLs: a/b.md is a/b/index.html)."""
    path = Path(source).with_suffix("")
    built = site / path.parent / "index.html" if path.name == "index" else site / path / "index.html"
    return built.read_text()


class _Sections(HTMLParser):
    """{h2 id: [table rows as lists of cell texts]} of a page."""

    def __init__(self):
        super().__init__()
        self.sections: dict[str, list[list[str]]] = {}
        self.current = None
        self.row: list[str] | None = None
        self.cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "h2":
            self.current = dict(attrs).get("id")
            self.sections[self.current] = []
        elif tag == "tr" and self.current:
            self.row = []
        elif tag == "td" and self.row is not None:
            self.cell = []

    def handle_endtag(self, tag):
        if tag == "td" and self.cell is not None:
            self.row.append("".join(self.cell))
            self.cell = None
        elif tag == "tr" and self.row is not None:
            if self.row:
                self.sections[self.current].append(self.row)
            self.row = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def squash(text: str) -> str:
    """Without whitespace: --help wraps its lines (at hyphens too), a table cell does not."""
    return re.sub(r"\s+", "", text)


def help_of(command: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as stop:
        main([command, "--help"])
    assert stop.value.code == 0
    return out.getvalue()


def help_entries(help_text: str, titles: set[str]) -> dict[str, str]:
    """The arguments --help lists under its sections (titles: its argument groups), as it writes them
    ("--input INPUT", "-h, --help", "DIR"), each with the help text written beside or under it."""
    found, inside, current = {}, False, None
    for line in help_text.splitlines():
        if line.endswith(":") and line[:-1] in titles:
            inside, current = True, None
        elif line and not line.startswith(" "):
            inside, current = False, None
        elif inside and (m := re.match(r"^  (\S.*?)(?:  +(.*)|$)", line)):
            current = m.group(1)
            found[current] = m.group(2) or ""
        elif inside and current is not None and line.startswith("   "):
            found[current] += " " + line.strip()
    return found


def subcommands() -> dict:
    (action,) = [a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction"]
    return dict(action.choices)


def test_the_site_builds_with_no_warning(site):
    assert (site / "index.html").exists() and (site / "reference" / "cli" / "index.html").exists()


def test_the_cli_reference_says_what_help_says(site):
    parsed = _Sections()
    parsed.feed(page_html(site, "reference/cli.md"))
    parsers = subcommands()
    assert sorted(parsed.sections) == sorted(f"labeler-{name}" for name in parsers)
    for name, parser in parsers.items():
        shown = help_of(name)
        rows = parsed.sections[f"labeler-{name}"]
        titles = {group.title for group in parser._action_groups}
        entries = help_entries(shown, titles)
        assert {flag for flag, _, _ in rows} == set(entries), name
        for flag, default, meaning in rows:  # each row against its own flag's entry: swapped texts do not pass
            expected = meaning if default in ("", "required", "switch") else f"{meaning} (default: {default})"
            assert squash(expected) == squash(entries[flag]), f"labeler {name} {flag}: {expected!r} is not what --help says: {entries[flag]!r}"


def test_the_schemas_page_holds_every_column(site):
    from schemas.corrections import CORRECTIONS_SCHEMA
    from schemas.judgments import JUDGMENTS_SCHEMA
    from schemas.tables import LABELS_SCHEMA, REJECTED_SCHEMA, ROLLOUTS_SCHEMA

    text = page_html(site, "reference/schemas.md")
    for schema in (LABELS_SCHEMA, ROLLOUTS_SCHEMA, REJECTED_SCHEMA, JUDGMENTS_SCHEMA, CORRECTIONS_SCHEMA):
        assert isinstance(schema, pa.Schema)
        for field in schema:
            assert f"<code>{field.name}</code>" in text, field.name


def nav_pages(node) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [page for value in node.values() for page in nav_pages(value)]
    return [page for item in node for page in nav_pages(item)]


def test_every_nav_page_exists_and_every_page_is_in_the_nav():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    pages = nav_pages(config["nav"])
    assert [page for page in pages if not (DOCS / page).is_file()] == []
    on_disk = sorted(str(path.relative_to(DOCS)) for path in DOCS.rglob("*.md"))
    assert sorted(pages) == on_disk


def test_the_readme_links_into_the_site_resolve(site):
    text = README.read_text()
    links = re.findall(r"\]\((docs/[^)#\s]*)(#[^)\s]+)?\)", text)
    assert len(links) >= 10
    for path, anchor in links:
        assert (ROOT / path).is_file(), path
        if anchor:
            assert f'id="{anchor[1:]}"' in page_html(site, path.removeprefix("docs/")), f"{path}{anchor}"


def test_the_readme_is_short_and_keeps_the_two_commands_and_the_demo_page_its_temperature():
    text = README.read_text()
    assert len(text.splitlines()) < 200
    assert "make demo   #" in text and "make test   #" in text and "make docs" in text
    demo = re.search(r"^demo:.*\n\t(.*)$", (ROOT / "Makefile").read_text(), re.M).group(1)
    temperature = re.search(r"--temperature (\S+)", demo).group(1)
    page = (DOCS / "getting-started.md").read_text()
    assert f"--temperature {temperature}" in page and f"temperature {temperature}" in text


def test_the_output_page_keeps_its_reading_example_under_the_output_folder_heading():
    """A section added to docs/reference/output.md goes after the example that reads the labels, not above it."""
    text = (DOCS / "reference" / "output.md").read_text()
    before_example = text[: text.index("datasets.load_dataset")]
    assert re.findall(r"^## .*", before_example, flags=re.M) == []
