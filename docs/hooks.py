"""MkDocs hook: the pages that are generated, never written by hand.

- docs/reference/cli.md: every subcommand of the real parser (`labeler.cli.build_parser`), each flag with
  its default and help as `labeler SUB --help` shows them. The flags are made from the settings
  dataclasses (labeler/cli/flags.py), so the parser is their one source.
- docs/reference/schemas.md: the Arrow schemas of schemas/ (field names, types, nullability, the schema's
  metadata) with the comments written beside them in the source, read with `ast` and `tokenize`.

A page asks for its generated part with a marker line, `<!-- generated: cli -->` or
`<!-- generated: schemas -->`; the hook replaces the marker when the site is built.
"""

from __future__ import annotations

import argparse
import ast
import html
import importlib
import io
import re
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"^<!-- generated: (\w+) -->$", re.M)
DEFAULT = re.compile(r"\s*\(default: (.*)\)$", re.S)

# The modules of schemas/ whose contracts the schemas page shows, in its order.
SCHEMA_MODULES = ("schemas.tables", "schemas.judgments", "schemas.corrections", "schemas.manifest")


def on_page_markdown(markdown: str, page, config, files) -> str:
    def generated(match: re.Match) -> str:
        kind = match.group(1)
        if kind == "cli":
            return cli_reference()
        if kind == "schemas":
            return schemas_reference()
        raise ValueError(f"{page.file.src_path}: unknown generated part {kind!r}")

    return MARKER.sub(generated, markdown)


# ---------------------------------------------------------------- the CLI reference


def _on_path() -> None:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))


def subcommands() -> tuple[dict[str, argparse.ArgumentParser], dict[str, str]]:
    """{name: parser} of every `labeler` subcommand, in the order `labeler --help` lists them, and
    {name: its one-line help}."""
    _on_path()
    from labeler.cli import build_parser

    (action,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices), {choice.dest: choice.help or "" for choice in action._choices_actions}


def flag_rows(parser: argparse.ArgumentParser) -> list[tuple[str, list[tuple[str, str, str]]]]:
    """[(group title, [(invocation, default, help)])] as argparse prints them in --help."""
    formatter = parser._get_formatter()
    groups = []
    for group in parser._action_groups:
        rows = []
        for action in group._group_actions:
            if action.help is argparse.SUPPRESS:
                continue
            invocation = formatter._format_action_invocation(action)
            text = formatter._expand_help(action) if action.help else ""
            found = DEFAULT.search(text)
            if found:
                default, text = found.group(1), text[: found.start()]
            elif action.required:
                default = "required"
            elif action.nargs == 0:  # a switch: given or not
                default = "switch"
            else:
                default = ""
            rows.append((invocation, default, text))
        if rows:
            groups.append((group.title, rows))
    return groups


def _cell(text: str) -> str:
    text = html.escape(" ".join(text.split()), quote=False)
    return re.sub(r"([\\`*_\[\]|])", r"\\\1", text)


def _prose(text: str) -> str:
    """A source comment as Markdown: its `code` kept, the rest literal."""
    text = html.escape(" ".join(text.split()), quote=False)
    return re.sub(r"([\\*\[\]|])", r"\\\1", text)


def _type(kind) -> str:
    import pyarrow as pa

    return f"list<{_type(kind.value_type)}>" if pa.types.is_list(kind) else str(kind)


def _code_cell(text: str) -> str:
    return "<code>" + html.escape(text, quote=False).replace("|", "&#124;") + "</code>"


def cli_reference() -> str:
    out = []
    parsers, helps = subcommands()
    for name, parser in parsers.items():
        out += [f"## labeler {name}", "", _cell(helps.get(name, "")), "", "```text", parser.format_usage().strip(), "```", ""]
        if parser.description:
            out += [_cell(parser.description), ""]
        for title, rows in flag_rows(parser):
            out += [f"**{_cell(title)}**", "", "| flag | default | meaning |", "|---|---|---|"]
            out += [f"| {_code_cell(flag)} | {_cell(default)} | {_cell(text)} |" for flag, default, text in rows]
            out.append("")
        if parser.epilog:
            out += ["```text", parser.epilog.strip(), "```", ""]
    return "\n".join(out)


# ---------------------------------------------------------------- the output schemas


def _comments(source: str) -> dict[int, tuple[str, bool]]:
    """{line: (comment text, whether the line holds nothing else)}."""
    found = {}
    lines = source.splitlines()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            row, col = token.start
            alone = not lines[row - 1][:col].strip()
            found[row] = (token.string.lstrip("#").strip(), alone)
    return found


class _Notes:
    """The comments of one source file, attached to the statements and fields they describe: a block of
    comment lines describes what follows it, unless a blank line parts it from what follows and nothing
    parts it from what precedes (then it goes on describing that); a comment at a line's end describes
    what is on that line."""

    def __init__(self, source: str):
        self.lines = source.splitlines()
        self.comments = _comments(source)

    def before(self, line: int) -> str:
        rows = []
        row = line - 1
        while row >= 1 and self.comments.get(row, ("", False))[1]:
            rows.insert(0, self.comments[row][0])
            row -= 1
        return " ".join(rows)

    def after(self, end: int) -> str:
        rows = []
        row = end + 1
        while self.comments.get(row, ("", False))[1]:
            rows.append(self.comments[row][0])
            row += 1
        if rows and row <= len(self.lines) and not self.lines[row - 1].strip():
            return " ".join(rows)
        return ""

    def trailing(self, first: int, last: int) -> str:
        return " ".join(self.comments[row][0] for row in range(first, last + 1) if row in self.comments and not self.comments[row][1])


def _versions(notes: _Notes, node: ast.stmt) -> list[str]:
    """A version history kept as a comment block of `N.N: ...` entries above the version constant."""
    rows, row = [], node.lineno - 1
    while row >= 1 and notes.comments.get(row, ("", False))[1]:
        rows.insert(0, notes.comments[row][0])
        row -= 1
    entries: list[str] = []
    for text in rows:
        if re.match(r"^\d+\.\d+:", text):
            entries.append(text)
        elif entries:
            entries[-1] += " " + text
    return entries


def _fields(node: ast.AST) -> list[ast.Call]:
    calls = [n for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "field"]
    return sorted(calls, key=lambda call: (call.lineno, call.col_offset))


def _schema_section(name: str, schema, node: ast.Assign, notes: _Notes) -> list[str]:
    import pyarrow as pa

    assert isinstance(schema, pa.Schema)
    meta = {key.decode(): value.decode() for key, value in (schema.metadata or {}).items()}
    title = meta.get("prm_labeler.table", name)
    out = [f"### {title}", ""]
    facts = [f"`{name}`"]
    facts += [f"{key.split('.', 1)[-1].replace('_', ' ')} `{value}`" for key, value in meta.items() if key != "prm_labeler.table"]
    out += [", ".join(facts) + f"; {len(schema)} columns.", ""]
    described = notes.before(node.lineno)
    if described:
        out += [_prose(described), ""]
    calls = _fields(node.value)
    by_name = {call.args[0].value: call for call in calls}
    if [f.name for f in schema] != list(by_name):
        raise ValueError(f"{name}: the fields in the source are not the schema's")
    out += ["| column | type | nullable | note |", "|---|---|---|---|"]
    for field in schema:
        call = by_name[field.name]
        # A comment block above a field describes it and the fields after it, up to the next block.
        note = " ".join(filter(None, [notes.before(call.lineno), notes.trailing(call.lineno, call.end_lineno)]))
        out.append(f"| `{field.name}` | `{_type(field.type)}` | {'yes' if field.nullable else 'no'} | {_prose(note)} |")
    out.append("")
    return out


def _module_section(module_name: str) -> list[str]:
    import pyarrow as pa

    _on_path()
    module = importlib.import_module(module_name)
    path = ROOT / (module_name.replace(".", "/") + ".py")
    source = path.read_text()
    notes = _Notes(source)
    tree = ast.parse(source)
    out = [f"## `{path.relative_to(ROOT)}`", ""]
    doc = ast.get_docstring(tree)
    if doc:
        out += ["```text", doc, "```", ""] if re.search(r"^  ", doc, re.M) else [" ".join(doc.split()), ""]
    constants: list[str] = []
    for node in tree.body:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
            continue
        name = node.targets[0].id
        value = getattr(module, name, None)
        if isinstance(value, pa.Schema):
            out += _schema_section(name, value, node, notes)
        elif name.endswith("VERSION") and isinstance(value, (str, int)):
            entries = _versions(notes, node)
            constants.append(f"- `{name}` = `{value!r}`")
            if entries:
                out += [f"Versions of `{name}`:", ""] + [f"- {_prose(entry)}" for entry in entries] + [""]
        elif name.isupper() and isinstance(value, tuple) and value and all(isinstance(item, str) for item in value):
            note = " ".join(filter(None, [notes.trailing(node.lineno, node.end_lineno), notes.after(node.end_lineno)]))
            shown = ", ".join(f"`{item}`" for item in value)
            constants.append(f"- `{name}`: {shown}" + (f". {_prose(note)}" if note else ""))
    if constants:
        out += ["Constants:", ""] + constants + [""]
    return out


def schemas_reference() -> str:
    out: list[str] = []
    for module_name in SCHEMA_MODULES:
        out += _module_section(module_name)
    return "\n".join(out)
