"""Every command example in the docs runs, or says where it is run.

The convention (also at the top of docs/gpu-recipes.md): every ```bash (sh, shell, console) block of
README.md and docs/**/*.md, and every transcript (an untagged block of `$ ` lines, whose output the test
compares with what the command prints), is one of

(a) unmarked: run by this file's slow test on the tiny model (the README's tour on a scripted one:
    SCRIPTED_GROUPS), in order, in one temporary folder, with the substitutions docs/gpu-recipes.md
    tabulates (the model, small copies of the inputs, small sizes; `labeler view`/`serve` started and
    stopped); a command of a block listed in KNOWN_GAPS, by name, with why, that
    fails turns the test into an expected failure naming it, never a pass (any other command must run);
(b) preceded by `<!-- gpu-recipe: NAME -->`: listed on docs/gpu-recipes.md under `## NAME` with what it
    needs and what it prints;
(c) preceded by `<!-- run-by: TARGET, ... -->`: each TARGET (tests/test_x.py::test_name, Makefile::TARGET,
    or a file such as .ci/run) exists and runs that same command.

Whatever its kind, every `labeler ...` line is parsed with the real parser: an unknown flag, a bad
choice or a missing value fails here (fast; part of `make test`).
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs_examples import ROOT, all_blocks, blocks_of, labeler_argv, labeler_argvs, mentions_labeler, parse_error, recipe_sections, run_by_target_exists

BLOCKS = all_blocks()


def test_the_docs_have_command_examples():
    assert len(BLOCKS) >= 30 and sum(len(b.commands) for b in BLOCKS) >= 100


def test_every_block_is_run_or_a_listed_recipe_or_run_elsewhere():
    recipes = recipe_sections()
    wrong = []
    for block in BLOCKS:
        if block.kind == "gpu-recipe":
            section = recipes.get(block.value)
            if section is None:
                wrong.append(f"{block.where}: gpu-recipe {block.value!r} is not a section of docs/gpu-recipes.md")
            elif "Needs:" not in section or "Prints:" not in section:
                wrong.append(f"{block.where}: docs/gpu-recipes.md#{block.value} does not say what it needs and prints")
        elif block.kind == "run-by":
            if not block.targets:
                wrong.append(f"{block.where}: run-by names nothing")
            wrong += [f"{block.where}: run-by {t}: {why}" for t in block.targets if (why := run_by_target_exists(t))]
        elif block.key not in RUN_KEYS:
            wrong.append(f"{block.where}: neither run by tests/test_docs_examples.py nor marked gpu-recipe or run-by")
    assert wrong == []


def test_every_recipe_on_the_page_is_used():
    used = {b.value for b in BLOCKS if b.kind == "gpu-recipe"}
    assert sorted(set(recipe_sections()) - used) == []


def test_every_labeler_line_parses():
    bad, seen = [], 0
    for block in BLOCKS:
        for command in block.commands:
            argvs = labeler_argvs(command)
            if not argvs and mentions_labeler(command):  # never a command left unparsed unnoticed
                bad.append(f"{block.where}: {command.strip()}\n    names a labeler command that tests/docs_examples.py cannot read")
            for argv in argvs:
                seen += 1
                if error := parse_error(argv):
                    bad.append(f"{block.where}: {command.strip()}\n    {error}")
    assert seen >= 75  # a floor: the pages hold about 80 labeler lines (79 on 2026-12-06), so the parser finds them
    assert bad == [], "\n".join(bad)


@pytest.mark.parametrize(
    "line, commands",
    [
        ("labeler label --input a && labeler status runs/a", [["label", "--input", "a"], ["status", "runs/a"]]),
        ("CUDA_VISIBLE_DEVICES=0,1 HF_HOME=/h labeler view a", [["view", "a"]]),
        ("srun -N 2 --ntasks=1 labeler label --input a", [["label", "--input", "a"]]),
        ("time -p labeler status x", [["status", "x"]]),
        ("timeout 60 labeler status x", [["status", "x"]]),
        ("python -m labeler.cli status d  # a comment", [["status", "d"]]),
        ("ray job submit --address http://HEAD:8265 -- labeler label --model m", [["label", "--model", "m"]]),
        ("for f in a b; do labeler status $f; done", [["status", "$f"]]),
        ("cat x | labeler score --prm p > out.jsonl", [["score", "--prm", "p"]]),
        ("pip install labeler", []),
        ("echo labeler", []),
    ],
)
def test_every_labeler_command_of_a_line_is_read(line, commands):
    assert labeler_argvs(line) == commands
    assert mentions_labeler(line) == bool(commands)


def test_blocks_are_read_whatever_their_fence(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "```python title=\"x.py\"\nprint(1)\n```\n\n"  # a titled fence: its closing line opens no block
        "<!-- gpu-recipe: a -->\n```bash\nlabeler label --bogus\n```\n\n"
        "````bash\n$ labeler status d\n```\n````\n\n"  # a longer fence holds a shorter one; a prompt is left out
        "~~~\n$ labeler check --gold 1 --pred 1\ncorrect\n~~~\n\n"
        "```\nplain text\n```\n"
    )
    blocks = blocks_of(page)
    assert [(b.line, b.kind, b.commands) for b in blocks] == [
        (6, "gpu-recipe", ["labeler label --bogus"]),
        (10, None, ["labeler status d", "```"]),
        (15, None, ["labeler check --gold 1 --pred 1"]),
    ]
    assert blocks[2].outputs == [["correct"]] and [b.ordinal for b in blocks] == [1, 2, 3]


def test_every_labeler_command_in_the_prose_parses():
    """`labeler SUB --flag ...` in inline code, outside the blocks: fragments, so only an unknown flag or a
    bad choice fails (a fragment may leave out required flags, or write a value as a placeholder)."""
    from tests.docs_examples import doc_files

    bad = []
    for path in doc_files():
        for span in re.findall(r"`(labeler [a-z]+ [^`]*--[^`]*)`", path.read_text()):
            argv = labeler_argv(span.replace("\n", " "))
            error = parse_error(argv) if argv else None
            if error and ("unrecognized arguments" in error or "invalid choice" in error):
                bad.append(f"{path.relative_to(ROOT)}: `{span}`\n    {error}")
    assert bad == [], "\n".join(bad)


# --- (a): the unmarked blocks, run on the tiny model --------------------------------------------

# The unmarked blocks, in the order they run (a block reads what those before it wrote): FILE#N is the
# N-th block of FILE. Each group runs in a folder of its own (the README's tour and the guides reuse names).
RUNS = [
    ["README.md#4"],
    [
        "docs/concepts/checker.md#1",
        "docs/guides/label-on-a-cluster.md#1",
        "docs/guides/inputs.md#1",
        "docs/guides/resume.md#1",
        "docs/guides/import-labels.md#1",
        "docs/guides/judge-consensus.md#2",
        "docs/guides/judge-consensus.md#1",
        "docs/guides/train.md#1",
        "docs/guides/evaluate.md#1",
        "docs/guides/review.md#2",
        "docs/guides/review.md#1",
        "docs/guides/best-of-n.md#1",
        "docs/guides/rl-rewards.md#3",
    ],
]
RUN_KEYS = {key for group in RUNS for key in group}
# The groups whose commands sample from a scripted model (tests/fakes.py) instead of the tiny random one: the
# README's tour judges, takes the consensus of the judge and Monte-Carlo, then trains, evaluates, picks the best
# of N and serves on it; the tiny model's rollouts all run out of tokens (no Monte-Carlo first step is labelled),
# so its consensus would keep no solution and the rest would have nothing to read. Every other group, and every
# command of the library's own tests of the generator path, runs the real engine.
SCRIPTED_GROUPS = {0}
# Blocks that do not yet run to their end, and why: the test reports them (xfail, listed by `pytest -ra`)
# instead of passing; any other failure fails it.
KNOWN_GAPS: dict[str, tuple[set[str], str]] = {}  # block -> (the commands of it that may fail, why)
# Outputs that recipes make, which the guides' examples read: made from what an earlier block wrote.
ALIASES = {
    "runs/train-mc": "runs/gsm8k-qwen",
    "runs/judge": "runs/gsm8k-judge",
    "runs/judged": "runs/gsm8k-judge",
    "runs/pb-gsm8k-judge": "runs/pb-judge",
}

SAMPLES = ROOT / "labeler" / "data" / "sample_problems.jsonl"
TEST_DATA = ROOT / "tests" / "data"
CAPS = {"--rollouts": 2, "--votes": 2, "--candidates": 4, "--max-new-tokens": 16, "--solution-max-new-tokens": 16, "--step-max-new-tokens": 16}
DROPPED = {"--tensor-parallel-size", "--workers", "--gpus-per-worker", "--gpu-memory-utilization", "--prm-gpu-memory-utilization"}
ENGINE_COMMANDS = {"label", "judge", "bon", "search"}
SERVERS = {"view", "serve"}


def head(source: Path, target: Path, rows: int) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(source.read_text().splitlines(keepends=True)[:rows]))


class Sandbox:
    """The temporary folder the examples run in: the inputs they name, staged small; the tiny models."""

    def __init__(self, root: Path, tiny_model: Path, tiny_qwen_prm: Path, shared_processbench: Path, shared_gsm8k: Path):
        self.work = root / "work"
        self.work.mkdir(parents=True)
        self.tiny_model, self.tiny_qwen_prm = tiny_model, tiny_qwen_prm
        for name in ("problems.jsonl", "traces.jsonl"):
            head(SAMPLES, self.work / name, 4)
        head(shared_processbench / "gsm8k.jsonl", self.work / "solutions.jsonl", 6)
        head(shared_gsm8k, self.work / "gsm8k-problems.jsonl", 4)
        for name in ("gsm8k.jsonl", "math.jsonl"):
            # the docs' ../shared/data paths, copies of a few rows in the sandbox (the data itself comes through shared_data)
            for target in (root.joinpath("shared", "data", "processbench", name), self.work / "processbench" / name):
                head(shared_processbench / name, target, 6)
        head(shared_processbench / "gsm8k.jsonl", self.work / "gsm8k.jsonl", 6)
        head(TEST_DATA / "prm800k_sample.jsonl", self.work / "prm800k" / "phase2_train.jsonl", 1000)
        shutil.copy(TEST_DATA / "math_shepherd_sample.jsonl", self.work / "math-shepherd.jsonl")
        shutil.copy(TEST_DATA / "math_shepherd_answers.jsonl", self.work / "gsm8k-math-answers.jsonl")

    def reference_answers(self) -> dict[str, str]:
        """Problem -> reference answer, of every input staged here that has one: what a scripted model answers."""
        answers = {}
        for path in self.work.rglob("*.jsonl"):
            for line in path.read_text().splitlines():
                row = json.loads(line)
                problem = row.get("problem") or row.get("question")
                answer = row.get("answer")
                if isinstance(problem, str) and isinstance(answer, str):
                    answers[problem] = answer.rpartition("####")[2].strip().replace(",", "") if "####" in answer else answer
        return answers

    def prepare(self, key: str) -> None:
        """The outputs of recipes the guides read (ALIASES), and the TRL file, once what they come from exists;
        evaluate.md's Monte-Carlo labels of ProcessBench-GSM8K, made before its block."""
        from labeler.cli import main

        mc = self.work / "runs" / "pb-gsm8k-mc"
        if key == "docs/guides/evaluate.md#1" and not mc.exists():
            pb = "../shared/data/processbench/gsm8k.jsonl"
            assert main(["label", "--input", pb, "--preset", "processbench", "--output", str(mc), "--model", str(self.tiny_model),
                         "--rollouts", "2", "--max-new-tokens", "16", "--max-model-len", "1024", "--quiet"]) == 0  # fmt: skip
        for alias, source in ALIASES.items():
            if (self.work / source / "manifest.json").exists() and not (self.work / alias).exists():
                (self.work / alias).symlink_to(self.work / source, target_is_directory=True)
        trl, labels = self.work / "trl-math-shepherd.jsonl", self.work / "runs" / "math-shepherd"
        if (labels / "manifest.json").exists() and not trl.exists():
            assert main(["export", str(labels), "--format", "trl", "--output", str(trl)]) == 0

    def substitute(self, argv: list[str]) -> list[str]:
        sub, out, k = argv[0], [argv[0]], 1
        while k < len(argv):
            arg = argv[k]
            value = argv[k + 1] if k + 1 < len(argv) else None
            if arg in DROPPED:
                k += 2
                continue
            if arg == "--model":
                out += [arg, str(self.tiny_model)]
            elif arg in CAPS:
                out += [arg, str(min(int(value), CAPS[arg]))]
            elif arg == "--device":
                out += [arg, "cpu"]
            elif arg == "--precision":
                out += [arg, "fp32"]
            elif arg == "--input" and value.startswith("hf:openai/gsm8k:main@"):
                out += [arg, "gsm8k-problems.jsonl"]
            elif arg == "--input" and value == "hf:peiyi9979/Math-Shepherd":
                out += [arg, "math-shepherd.jsonl"]
            elif arg == "--labels" and value.startswith("hf:trl-lib/math_shepherd@train"):
                out += [arg, "trl-math-shepherd.jsonl"]
            elif arg == "--prm" and value.split("=")[-1] in ("qwen-prm:Qwen/Qwen2.5-Math-PRM-7B", "OTHER_PRM"):
                name = value.split("=")[0] + "=" if "=" in value else ""
                out += [arg, f"{name}qwen-prm:{self.tiny_qwen_prm}"]
            elif arg == "...":
                k += 1
                continue
            else:
                out.append(arg)
                k += 1
                continue
            k += 2
        if sub in ENGINE_COMMANDS and "--model" not in out:
            out += ["--model", str(self.tiny_model)]
        if sub in ENGINE_COMMANDS:
            out += ["--max-model-len", "1024", "--quiet"]
        if sub == "label":
            out += ["--max-new-tokens", "16", "--rollouts", "2"] if "--max-new-tokens" not in out else []
        if sub == "train":
            out += ["--epochs", "1", "--min-steps", "0", "--device", "cpu", "--batch-size", "4"]
            if "--model" not in out:
                out += ["--model", str(self.tiny_model)]
        if sub in SERVERS:
            if "--port" in out:
                del out[out.index("--port") : out.index("--port") + 2]
            out += ["--port", "0"]
        if "--prm-backend" in _flags_of(sub) and "--prm" in out:
            out += ["--prm-backend", "torch"]
        return out


def _flags_of(sub: str) -> set[str]:
    from tests.test_docs import subcommands

    return {option for action in subcommands()[sub]._actions for option in action.option_strings}


def run_server(argv: list[str], cwd: Path) -> tuple[int, str]:
    """`labeler view|serve ... --port 0`: its first stdout line is its address; one GET; stopped. (0, "")
    when it answered, else its exit code and stderr."""
    import httpx

    proc = subprocess.Popen([sys.executable, "-m", "labeler.cli", *argv], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        if not url.startswith("http://"):
            proc.wait(timeout=60)
            return proc.returncode or 1, proc.stderr.read()
        answer = httpx.get(url.replace("0.0.0.0", "127.0.0.1") + ("/" if argv[0] == "view" else "/health"), timeout=120)
        return (0, "") if answer.status_code < 500 else (1, answer.text)
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=60)


@pytest.fixture(scope="module")
def tiny_qwen_prm(tmp_path_factory) -> Path:
    from tests.public_prms import build_qwen_prm

    built = build_qwen_prm(tmp_path_factory.mktemp("tiny-qwen-prm"))
    return Path(built[0] if isinstance(built, tuple) else built)


@pytest.mark.slow
@pytest.mark.engine
def test_the_unmarked_examples_run_on_the_tiny_model(tiny_model_dir, tiny_engine, tiny_qwen_prm, tmp_path, monkeypatch, capsys):
    import workers.vllm_generator
    from labeler.judging.config import JudgeConfig
    from tests.conftest import KeptOpen, shared_data
    from tests.fakes import ScriptedGenerator, ScriptedJudge

    scripted = {}  # the scripted model of the group that runs now, if any

    def start_engine(model, config):
        if isinstance(config, JudgeConfig):  # the tiny random model writes no verdict a critique reader reads
            if scripted:  # the scripted model's solutions are right: so says the judge (consensus keeps them)
                return ScriptedJudge(lambda problem, seed: "Every paragraph checks out.\n\n\\boxed{-1}")
            return ScriptedJudge(lambda problem, seed: "The first paragraph is wrong.\n\n\\boxed{0}")
        if scripted:
            return ScriptedGenerator(scripted, sampled_solution="Work it out.\n\nThe answer is: {answer}")
        return KeptOpen(tiny_engine)

    monkeypatch.setattr(workers.vllm_generator, "start_engine", start_engine)
    by_key = {block.key: block for block in BLOCKS}
    assert [key for key in RUN_KEYS if key not in by_key or by_key[key].kind] == []
    ran, failed, gaps = [], [], []
    for number, group in enumerate(RUNS):
        box = Sandbox(tmp_path / f"group-{number}", tiny_model_dir, tiny_qwen_prm, shared_data("processbench"), shared_data("gsm8k/test.jsonl"))
        scripted.clear()
        if number in SCRIPTED_GROUPS:
            scripted.update(box.reference_answers())
        monkeypatch.chdir(box.work)
        try:
            for key in group:
                run_block(by_key[key], box, ran, gaps, capsys)
        except AssertionError as error:  # the rest of this group reads what it would have written: the next group
            key = next((k for k in group if str(error).startswith(by_key[k].where + ":")), None)
            failed.append(f"{key}:\n{str(error)[:2500]}")
    with capsys.disabled():
        print("\n" + "\n".join(line.splitlines()[0] for line in ran))
    assert failed == [], "\n\n".join(failed)
    if gaps:
        reasons = "; ".join(f"{key}: {why}" for key, (_, why) in KNOWN_GAPS.items())
        pytest.xfail(f"{len(gaps)} commands do not run on the tiny model ({reasons}): " + " | ".join(gaps))


def run_block(block, box: Sandbox, ran: list[str], gaps: list[str], capsys) -> None:
    """Each command of BLOCK, in order; in a block of KNOWN_GAPS a failing command is noted in GAPS and the
    next one runs."""
    from labeler.cli import main

    for number, command in enumerate(block.commands):
        argvs = labeler_argvs(command)
        assert argvs, f"{block.where}: {command!r} runs no labeler command"
        for argv in argvs:
            box.prepare(block.key)
            argv = box.substitute(argv)
            server_err = ""
            if argv[0] in SERVERS:
                code, server_err = run_server(argv, box.work)
            else:
                code = main(argv)
            captured = capsys.readouterr()
            captured = type(captured)(captured.out, captured.err + server_err)
            before = "\n".join(ran[-2:])
            if code != 0 and argv[0] in KNOWN_GAPS.get(block.key, (set(), ""))[0]:
                gaps.append(f"{block.where}: labeler {argv[0]} exited {code}: {captured.err.strip()[-300:]}")
                continue
            assert code == 0, f"{block.where}: labeler {shlex.join(argv)}\n{captured.err[-3000:]}\nbefore it:\n{before}"
            if block.outputs is not None:  # a transcript: the docs show what the command prints
                shown = "\n".join(block.outputs[number]).rstrip()
                assert captured.out.rstrip() == shown, f"{block.where}: labeler {shlex.join(argv)} prints\n{captured.out}\nnot what the docs show:\n{shown}"
            ran.append(f"{block.where}: labeler {shlex.join(argv)}\n{captured.out[-1500:]}")
