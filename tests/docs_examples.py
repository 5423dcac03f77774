"""The command examples of README.md and docs/**/*.md, as tests/test_docs_examples.py reads them: every
```bash (sh, shell, console) block and every untagged or text block with `$ ` lines (a transcript: its
commands and what each prints), fenced with backticks or tildes; the marker before it; the `labeler`
commands in it, parsed."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
RECIPES_PAGE = DOCS / "gpu-recipes.md"

# a fence: three or more backticks or tildes, a language, maybe more (```python title="x.py"); it closes at
# a line of the same character, at least as long, and nothing else
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)(?:\s+[^`]*)?$")
SHELL_LANGUAGES = {"bash", "sh", "shell", "console"}
PROMPT = "$ "  # a transcript's command line
MARKER = re.compile(r"^\s*<!--\s*(gpu-recipe|run-by)\s*:\s*(.+?)\s*-->\s*$")
SHELL_STOPS = {";", "&&", "||", "|", ">", ">>", "<", "2>", "&"}


@dataclass
class Block:
    path: Path  # the Markdown file
    line: int  # the fence's line, 1-based
    lines: list[str]  # the block's lines, its list indentation removed
    kind: str | None = None  # "gpu-recipe", "run-by", or None: run by tests/test_docs_examples.py
    value: str | None = None  # the recipe's NAME, or the run-by targets
    commands: list[str] = field(default_factory=list)  # shell lines, `\` continuations joined, comments kept
    ordinal: int = 0  # the N-th command block of its file, from 1
    # a transcript (`$ ` lines): what each command prints, the lines after it up to the next `$ `
    outputs: list[list[str]] | None = None

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def key(self) -> str:
        return f"{self.path.relative_to(ROOT)}#{self.ordinal}"

    @property
    def targets(self) -> list[str]:
        return [t.strip() for t in (self.value or "").split(",") if t.strip()]


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def blocks_of(path: Path) -> list[Block]:
    lines = path.read_text().splitlines()
    found, i = [], 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        indent, mark, language = fence.groups()
        j = i + 1
        while j < len(lines) and not (set(lines[j].strip()) == {mark[0]} and len(lines[j].strip()) >= len(mark)):
            j += 1
        body = [line[len(indent) :] if line.startswith(indent) else line.lstrip() for line in lines[i + 1 : j]]
        transcript = language in ("", "text", "console") and any(line.startswith(PROMPT) for line in body)
        if language in SHELL_LANGUAGES or transcript:
            block = Block(path, i + 1, body, ordinal=len(found) + 1)
            k = i - 1
            while k >= 0 and not lines[k].strip():
                k -= 1
            if k >= 0 and (marker := MARKER.match(lines[k])):
                block.kind, block.value = marker.group(1), marker.group(2)
            if transcript:
                block.commands, block.outputs = [], []
                for line in body:
                    if line.startswith(PROMPT):
                        block.commands.append(line[len(PROMPT) :])
                        block.outputs.append([])
                    elif block.outputs:
                        block.outputs[-1].append(line)
            else:  # a shell block: its lines, a `$ ` prompt left out
                joined = re.sub(r"\\\n\s*", " ", "\n".join(body))
                commands = [c.strip() for c in joined.splitlines() if c.strip() and not c.lstrip().startswith("#")]
                block.commands = [c[len(PROMPT) :] if c.startswith(PROMPT) else c for c in commands]
            found.append(block)
        i = j + 1
    return found


def all_blocks() -> list[Block]:
    return [block for path in doc_files() for block in blocks_of(path)]


STARTS = {"--", "do", "then", "(", "{"}  # after these a command starts (`ray job submit ... -- labeler label ...`)
# what may stand before `labeler`, with its own options: srun -N 2, time -p, timeout 60, uv run, env A=1
WRAPPERS = {"time", "exec", "nohup", "srun", "env", "sudo", "timeout", "xargs", "uv", "run", "torchrun"}
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def labeler_argvs(command: str) -> list[list[str]]:
    """The arguments of each `labeler` command (or `python -m labeler.cli`) in one shell line, each up to a
    shell operator or a comment. A command starts the line, or follows a shell operator or one of STARTS;
    before `labeler` it may have VAR=value assignments and wrappers (WRAPPERS) with their options."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|<>()")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        tokens = list(lexer)
    except ValueError:  # an unclosed quote: not ours to judge here
        return []
    found, k, at_start = [], 0, True
    while k < len(tokens):
        token = tokens[k]
        if token in SHELL_STOPS or token in STARTS or token == ")":
            at_start, k = True, k + 1
            continue
        if not at_start:
            k += 1
            continue
        if ASSIGNMENT.match(token):
            k += 1
            continue
        if token in WRAPPERS:  # the wrapper, its options and their values (srun -N 2, timeout 60)
            k += 1
            while k < len(tokens) and (tokens[k].startswith("-") or tokens[k][:1].isdigit()) and tokens[k] not in SHELL_STOPS:
                k += 1
            continue
        if token in ("python", "python3") or token.endswith("/python"):  # python -m labeler.cli
            if tokens[k + 1 : k + 3] == ["-m", "labeler.cli"]:
                k += 2
                token = "labeler"
        at_start = False
        if token in ("labeler", "labeler.cli"):
            argv, k = [], k + 1
            while k < len(tokens) and tokens[k] not in SHELL_STOPS and tokens[k] not in ("done", ")"):
                argv.append(tokens[k])
                k += 1
            found.append(argv)
            continue
        k += 1
    return found


def mentions_labeler(command: str) -> bool:
    """Whether a shell line names a labeler command (`labeler SUB`), whatever stands before it: a line that
    does, from which labeler_argvs reads none, is one it does not understand."""
    return re.search(r"(^|[\s;&|(])(labeler|labeler\.cli) +[a-z]", command.split("#", 1)[0]) is not None


def labeler_argv(command: str) -> list[str] | None:
    """The arguments of the first `labeler` command in one shell line; None when it runs none."""
    found = labeler_argvs(command)
    return found[0] if found else None


def parse_error(argv: list[str]) -> str | None:
    """What the real parser says of ARGV (its one error line), or None when it parses. `...` stands for
    more flags: dropped, or kept as the value of the flag before it; then only a missing required flag
    is forgiven."""
    from labeler.cli import build_parser

    elided = "..." in argv
    args = [a for k, a in enumerate(argv) if a != "..." or (k > 0 and argv[k - 1].startswith("--") and "=" not in argv[k - 1])]
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            build_parser().parse_args(args)
    except SystemExit as stop:
        if stop.code == 0:
            return None
        message = [line for line in err.getvalue().splitlines() if line.strip()][-1]
        if elided and "the following arguments are required" in message:
            return None
        return message
    return None


def recipe_sections() -> dict[str, str]:
    """docs/gpu-recipes.md's `## NAME` sections: {NAME: its text}."""
    text = RECIPES_PAGE.read_text() if RECIPES_PAGE.exists() else ""
    parts = re.split(r"^## +`?([\w.-]+)`?\s*$", text, flags=re.M)
    return {parts[k]: parts[k + 1] for k in range(1, len(parts), 2)}


def run_by_target_exists(target: str) -> str | None:
    """None when TARGET names something that runs: tests/test_x.py::test_name (the test is defined there),
    Makefile::TARGET (a make target), or a file (.ci/run); else why not."""
    path, _, name = target.partition("::")
    file = ROOT / path
    if not file.is_file():
        return f"{path} does not exist"
    if not name:
        return None
    text = file.read_text()
    if path.endswith(".py"):
        return None if re.search(rf"^def {re.escape(name)}\(", text, re.M) else f"{path} defines no {name}"
    if Path(path).name == "Makefile":
        return None if re.search(rf"^{re.escape(name)}:", text, re.M) else f"{path} has no target {name}"
    return None if name in text else f"{path} does not mention {name}"
