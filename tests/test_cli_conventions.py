"""The CLI a new user meets is the same across subcommands: --help with a description and the real
default of every flag and the exit codes; `--output` everywhere; one-line errors
`labeler COMMAND: error: ...`; Ctrl-C ends with one line and 130; a closed pipe ends quietly; the
libraries stay quiet unless --verbose."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys

import pytest

import labeler.cli
from labeler.cli import build_parser, main
from tests.conftest import write_jsonl

SWITCHES = (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse._HelpAction, argparse._VersionAction)


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


COMMANDS = sorted(subcommands())


def cli(*args: str, env: dict | None = None, code: str | None = None) -> subprocess.CompletedProcess:
    command = [sys.executable, "-c", code, *args] if code else [sys.executable, "-m", "labeler.cli", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)


def test_every_subcommand_is_tested_here():
    assert COMMANDS == sorted(["label", "import", "judge", "consensus", "status", "check", "train", "score", "select", "eval", "bon", "search", "export", "report", "serve", "view"])


@pytest.mark.parametrize("command", COMMANDS)
def test_help_shows_the_exit_codes(command):
    text = subcommands()[command].format_help()
    assert "exit codes:" in text
    codes = text.split("exit codes:")[1]
    for code in ("0", "1", "2", "130"):
        assert re.search(rf"^\s+{code}\s+\S", codes, re.M), f"{command}: no exit code {code}"


def test_help_runs_as_a_command():
    for args in (["--help"], ["label", "--help"], ["report", "--help"]):
        result = cli(*args)
        assert result.returncode == 0 and result.stdout.startswith("usage: labeler") and result.stderr == ""


@pytest.mark.parametrize("command", COMMANDS)
def test_every_flag_has_a_description_and_shows_its_real_default(command):
    parser = subcommands()[command]
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            continue
        name = "/".join(action.option_strings) or action.dest
        assert action.help and action.help != argparse.SUPPRESS, f"{command} {name}: no description"
        if action.required or isinstance(action, SWITCHES) or not action.option_strings:
            assert "default:" not in action.help, f"{command} {name}: a required flag or a switch has no default to show"
        elif action.default is not None:
            assert f"(default: {action.default}" in action.help.replace("%%", "%"), f"{command} {name}: its default is not shown"
        # a flag whose default is None (not given) may say what that means, as "(default: the preset's column)"
    text = parser.format_help()
    assert "(default: None)" not in text and "(default: [])" not in text and "(default: ())" not in text


def test_label_help_shows_the_engine_and_sampling_defaults():
    text = " ".join(subcommands()["label"].format_help().split())
    for flag, default in [
        ("--temperature TEMPERATURE", "0.7"),
        ("--top-p TOP_P", "1.0"),
        ("--dtype DTYPE", "auto"),
        ("--max-model-len MAX_MODEL_LEN", "the model's own"),
        ("--gpu-memory-utilization GPU_MEMORY_UTILIZATION", "0.9"),
    ]:
        assert re.search(re.escape(flag) + r" [^-]*\(default: " + re.escape(default) + r"\)", text), flag


def test_the_output_flag_is_called_output_everywhere():
    for command, parser in subcommands().items():
        options = {option for action in parser._actions for option in action.option_strings}
        assert "--out" not in options, command
        assert "--output" in options or command in ("status", "check", "eval", "serve", "view"), command


@pytest.mark.parametrize("spelling", [["--out", "x.jsonl"], ["--out=x.jsonl"]])
def test_out_still_works_for_export_and_report_with_a_warning(spelling, capsys):
    args = build_parser().parse_args(["export", "DIR", "--format", "trl", *spelling])
    assert args.output == "x.jsonl"
    assert build_parser().parse_args(["report", "DIR", *spelling]).output == "x.jsonl"
    assert "labeler export: warning: --out is deprecated; use --output" in capsys.readouterr().err


def test_our_errors_share_one_prefix(tmp_path, capsys):
    assert main(["check", "--gold", "1"]) == 2
    assert capsys.readouterr().err.startswith("labeler check: error: ")
    assert main(["status", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("labeler status: error: ")
    assert main(["report", str(tmp_path / "none")]) == 2
    assert capsys.readouterr().err.startswith("labeler report: error: ")


@pytest.mark.parametrize("command,argv", [("status", ["status", "DIR"]), ("train", ["train", "--labels", "L", "--output", "O"])])
def test_ctrl_c_is_one_line_and_exit_130(command, argv, monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt

    module = getattr(labeler.cli, command)
    monkeypatch.setattr(module, "run" if command == "status" else "run_train", interrupted)
    assert main(argv) == 130
    captured = capsys.readouterr()
    # status keeps no progress: it says what a rerun does (tests/test_interrupt_notes.py), train resumes
    note = "status only reads the output: rerun it to read it again" if command == "status" else "rerun the same command to resume"
    assert captured.err == f"labeler {command}: interrupted; {note}\n"
    assert captured.out == ""


def test_ctrl_c_of_a_real_process_is_one_line_and_130(tmp_path):
    code = (
        "import sys, labeler.cli.status as s\n"
        "def run(args): raise KeyboardInterrupt\n"
        "s.run = run\n"
        "from labeler.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    result = cli("status", str(tmp_path), code=code)
    assert (result.returncode, result.stderr) == (130, "labeler status: interrupted; status only reads the output: rerun it to read it again\n")


@pytest.fixture(scope="module")
def finished_job(tmp_path_factory):
    from labeler.checking.checker import AnswerChecker
    from labeler.labeling.config import LabelConfig
    from labeler.labeling.job import run_job
    from tests.fakes import ScriptedGenerator
    from workers.local_executor import LocalExecutor

    tmp = tmp_path_factory.mktemp("job")
    rows = [{"id": f"r{i}", "problem": f"What is {i}+{i}?", "answer": str(2 * i), "steps": ["a.", "b."]} for i in range(3)]
    data = write_jsonl(tmp / "in.jsonl", rows)
    config = LabelConfig(input=str(data), output=str(tmp / "out"), model="scripted", rollouts=2, shard_size=2)
    answers = {row["problem"]: row["answer"] for row in rows}
    with AnswerChecker() as checker:
        executor = LocalExecutor(lambda: ScriptedGenerator(answers), checker)
        run_job(config, executor=executor, model_info={"name": "scripted"}, progress_enabled=False)
    return tmp / "out"


@pytest.mark.parametrize("args", [["status", "JOB"], ["status", "JOB", "--json"], ["status", "--help"]])
def test_a_reader_that_goes_away_ends_it_quietly(args, finished_job):
    """`labeler status DIR | head -1`: the pipe is closed before the command writes to it."""
    argv = [str(finished_job) if arg == "JOB" else arg for arg in args]
    process = subprocess.Popen([sys.executable, "-m", "labeler.cli", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    process.stdout.close()
    error = process.stderr.read()
    assert process.wait(timeout=120) == 0
    assert error == ""


def test_status_writes_the_job_when_the_reader_stays(finished_job, capsys):
    assert main(["status", str(finished_job), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["state"] == "finished"


def offline_env() -> dict:
    """No network, and none needed: the hub is a closed local port."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("HF_", "HUGGINGFACE_"))}
    return env | {"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HOME": os.path.join(os.environ.get("TMPDIR", "/tmp"), "prm-labeler-no-hub")}


def test_an_unreachable_hub_input_is_one_line(tmp_path):
    # time.sleep is skipped in this process only, so that the hub client's retries do not wait
    code = "import sys, time\ntime.sleep = lambda seconds: None\nfrom labeler.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    result = cli("label", "--input", "hf:no-such/dataset", "--output", str(tmp_path / "out"), "--quiet", code=code, env=offline_env())
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("labeler label: error: hf:no-such/dataset")


def test_libraries_are_quiet_inside_a_command_unless_verbose(monkeypatch):
    import logging

    seen = {}

    def record(args):
        seen["torch"] = os.environ.get("TORCH_CPP_LOG_LEVEL")
        seen["hub"] = logging.getLogger("huggingface_hub").getEffectiveLevel()
        return 0

    monkeypatch.delenv("TORCH_CPP_LOG_LEVEL", raising=False)
    monkeypatch.setattr(labeler.cli.train, "run_train", record)
    assert main(["train", "--labels", "L", "--output", "O"]) == 0
    assert seen == {"torch": "ERROR", "hub": logging.ERROR}
    assert "TORCH_CPP_LOG_LEVEL" not in os.environ  # restored for an in-process caller
    assert main(["train", "--labels", "L", "--output", "O", "--verbose"]) == 0
    assert seen["torch"] is None and seen["hub"] < logging.ERROR


def test_a_checker_that_cannot_check_stops_the_command_with_one_line_and_exit_1(monkeypatch, capsys, tmp_path):
    from labeler.checking import CheckerUnavailable

    def broken(args):
        raise CheckerUnavailable("its workers fail to start (3 in a row)")

    monkeypatch.setattr(labeler.cli.label, "run_label", broken)
    assert main(["label", "--output", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("labeler label: error: the answer checker cannot check: its workers fail to start") and err.count("\n") == 1


@pytest.mark.parametrize("timeout", ["0", "-1", "nan", "inf"])
def test_checker_timeouts_that_are_not_finite_and_positive_are_refused(timeout, capsys, tmp_path):
    assert main(["label", "--output", str(tmp_path / "out"), "--checker-timeout", timeout]) == 2
    err = capsys.readouterr().err
    assert err.startswith("labeler label: error: --checker-timeout") and ("finite" in err or "> 0" in err) and err.count("\n") == 1
    assert main(["check", "--gold", "1", "--pred", "1", "--timeout", timeout]) == 2
