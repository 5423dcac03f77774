"""The command line: --help everywhere, exit codes, one-line errors on stderr, status output."""

import json
import os
import socket
import subprocess
import sys

import pytest

from labeler.cli import main
from tests.conftest import write_jsonl


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "labeler.cli", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("command", [[], ["label"], ["status"], ["check"]])
def test_help_everywhere(command):
    result = run_cli(*command, "--help")
    assert result.returncode == 0
    assert result.stdout.startswith("usage: labeler")


def test_label_help_lists_the_flags_other_tools_rely_on():
    text = run_cli("label", "--help").stdout
    for flag in ("--input", "--preset", "--output", "--model", "--limit", "--rollouts", "--max-new-tokens", "--temperature", "--seed", "--shard-size"):
        assert flag in text


def error_line(result: subprocess.CompletedProcess) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_missing_input_file_is_one_line_and_exit_2(tmp_path):
    line = error_line(run_cli("label", "--input", str(tmp_path / "nope.jsonl"), "--output", str(tmp_path / "out"), "--quiet"))
    assert line.startswith("labeler label: error:") and "no such file" in line


def test_unknown_preset_is_one_line_and_exit_2(tmp_path):
    data = write_jsonl(tmp_path / "in.jsonl", [{"problem": "1+1?", "answer": "2", "steps": ["2"]}])
    line = error_line(run_cli("label", "--input", str(data), "--preset", "nonsense", "--output", str(tmp_path / "out"), "--quiet"))
    assert "nonsense" in line and "gsm8k" in line


def test_unsupported_input_type_and_bad_values_exit_2(tmp_path):
    (tmp_path / "in.csv").write_text("a,b\n")
    assert "unsupported" in error_line(run_cli("label", "--input", str(tmp_path / "in.csv"), "--output", str(tmp_path / "o"), "--quiet"))
    data = write_jsonl(tmp_path / "in.jsonl", [{"problem": "1+1?", "answer": "2", "steps": ["2"]}])
    assert "--rollouts" in error_line(run_cli("label", "--input", str(data), "--output", str(tmp_path / "o"), "--rollouts", "0", "--quiet"))


def test_unrecognised_format_asks_for_a_preset(tmp_path):
    data = write_jsonl(tmp_path / "in.jsonl", [{"foo": 1, "bar": 2}])
    line = error_line(run_cli("label", "--input", str(data), "--output", str(tmp_path / "out"), "--quiet"))
    assert "--preset" in line


def test_status_of_a_directory_without_a_job_exits_2(tmp_path):
    assert "manifest" in error_line(run_cli("status", str(tmp_path)))


def test_status_reports_a_finished_job(tmp_path, capsys):
    from labeler.checking.checker import AnswerChecker
    from labeler.labeling.config import LabelConfig
    from labeler.labeling.job import run_job
    from workers.local_executor import LocalExecutor
    from tests.fakes import ScriptedGenerator

    data = write_jsonl(tmp_path / "in.jsonl", [{"id": f"r{i}", "problem": f"What is {i}+{i}?", "answer": str(2 * i), "steps": ["a.", f"The answer is {2 * i}."]} for i in range(5)])
    config = LabelConfig(input=str(data), output=str(tmp_path / "out"), model="scripted", rollouts=2, shard_size=2)
    answers = {f"What is {i}+{i}?": str(2 * i) for i in range(5)}
    with AnswerChecker() as checker:
        run_job(config, executor=LocalExecutor(lambda: ScriptedGenerator(answers), checker), model_info={"name": "scripted"}, progress_enabled=False)
    assert main(["status", str(tmp_path / "out"), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["state"] == "finished"
    assert (status["units_committed"], status["units_total"], status["solutions"], status["steps"]) == (3, 3, 5, 10)
    assert status["rollouts"] == 5 * (2 + 1)
    assert main(["status", str(tmp_path / "out")]) == 0
    text = capsys.readouterr().out
    assert "3/3 committed" in text and "5/5 input rows" in text
    assert status["driver"] is None and "driver    : none" in text  # the lock went with the job


def test_status_names_the_driver_that_holds_the_output_and_the_failed_units(tmp_path, capsys):
    from labeler.store.lock import OutputLock
    from labeler.store.location import OutputLocation
    from labeler.labeling.config import LabelConfig
    from labeler.labeling.job import run_job
    from workers.local_executor import LocalExecutor
    from tests.fakes import ScriptedGenerator
    from labeler.checking.checker import AnswerChecker

    class Poisoned(ScriptedGenerator):  # the unit of problem 0 fails every time
        def generate(self, requests, sampling):
            if any(request.user_message.startswith("What is 0+0?") for request in requests):
                raise ValueError("poison")
            return super().generate(requests, sampling)

    data = write_jsonl(tmp_path / "in.jsonl", [{"id": f"r{i}", "problem": f"What is {i}+{i}?", "answer": str(2 * i), "steps": ["a.", f"The answer is {2 * i}."]} for i in range(4)])
    config = LabelConfig(input=str(data), output=str(tmp_path / "out"), model="scripted", rollouts=2, shard_size=2)
    answers = {f"What is {i}+{i}?": str(2 * i) for i in range(4)}
    with AnswerChecker() as checker:
        executor = LocalExecutor(lambda: Poisoned(answers), checker, max_unit_retries=0)
        run_job(config, executor=executor, model_info={"name": "scripted"}, progress_enabled=False)
    with OutputLock(OutputLocation(str(tmp_path / "out"))):
        assert main(["status", str(tmp_path / "out"), "--json"]) == 0
        status = json.loads(capsys.readouterr().out)
        assert main(["status", str(tmp_path / "out")]) == 0
        text = capsys.readouterr().out
    assert status["units_failed"] == 1 and "2/2 committed (1 failed" in text
    assert status["driver"]["pid"] == os.getpid() and not status["driver"]["stale"]
    assert f"driver    : running on host {socket.gethostname()}, pid {os.getpid()}" in text


def test_label_refuses_a_resume_on_another_checker_timeout_unless_allowed(tmp_path, monkeypatch, capsys):
    import workers.vllm_generator
    from tests.fakes import Crash, CrashingGenerator, ScriptedGenerator

    answers = {f"What is {i}+{i}?": str(2 * i) for i in range(6)}
    data = write_jsonl(tmp_path / "in.jsonl", [{"problem": p, "answer": a, "steps": ["a.", "b."]} for p, a in answers.items()])
    out = tmp_path / "out"
    args = ["label", "--input", str(data), "--output", str(out), "--model", "scripted", "--rollouts", "2", "--shard-size", "2", "--quiet"]
    monkeypatch.setattr(workers.vllm_generator, "start_engine", lambda model, config: CrashingGenerator(answers, crash_on_call=3))
    with pytest.raises(Crash):
        main(args)
    monkeypatch.setattr(workers.vllm_generator, "start_engine", lambda model, config: ScriptedGenerator(answers))
    capsys.readouterr()
    assert main([*args, "--checker-timeout", "2"]) == 2
    error = capsys.readouterr().err.splitlines()
    assert error[0].startswith("labeler label: error:") and "--allow-engine-change" in error[0]
    assert error[1:] == ["  checker_timeout: 5.0 -> 2.0"]
    assert main([*args, "--checker-timeout", "2", "--allow-engine-change"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    timeouts = [manifest["engine_records"][unit["engine_record"]]["checker_timeout"] for unit in manifest["units"]]
    assert timeouts == [5.0, 5.0, 2.0]
