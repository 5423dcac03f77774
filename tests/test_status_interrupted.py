"""`labeler status` tells a running job from an interrupted one: only a job whose driver is alive (it
holds the output's lock) has an ETA; one with units left and no driver says it is interrupted, what is
committed, and the command that resumes it."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import textwrap

import pytest

import workers.vllm_generator
from labeler.cli import main
from labeler.store.location import OutputLocation
from labeler.store.lock import LOCK_NAME, OutputLock
from tests.conftest import status_of, write_jsonl
from tests.fakes import Crash, CrashingGenerator, ScriptedGenerator

ANSWERS = {f"What is {i}+{i}?": str(2 * i) for i in range(6)}


@pytest.fixture
def interrupted(tmp_path, monkeypatch):
    """A real `labeler label` run whose engine died on its 3rd call: 2 of 3 units committed, the lock released."""
    data = write_jsonl(tmp_path / "in.jsonl", [{"problem": p, "answer": a, "steps": ["a.", "b."]} for p, a in ANSWERS.items()])
    out = tmp_path / "out"
    args = ["label", "--input", str(data), "--output", str(out), "--model", "scripted", "--rollouts", "2", "--shard-size", "2",
            "--temperature", "0.5", "--stop", "END", "--no-rollouts", "--quiet"]  # fmt: skip
    monkeypatch.setattr(workers.vllm_generator, "start_engine", lambda model, config: CrashingGenerator(ANSWERS, crash_on_call=3))
    with pytest.raises(Crash):
        main(args)
    return out, args


def test_an_interrupted_job_has_no_eta_and_says_how_to_resume(interrupted, capsys, monkeypatch):
    out, args = interrupted
    assert not (out / LOCK_NAME).exists()  # no driver
    status, text = status_of(out, capsys)
    assert status["state"] == "interrupted" and (status["units_committed"], status["units_total"]) == (2, 3)
    assert status["eta_seconds"] is None and status["eta_reason"].startswith("interrupted: no driver is running")
    assert status["driver"] is None
    # the documented state words (docs/guides/resume.md): "incomplete" was retired
    assert "(interrupted: no driver holds its lock (unless it runs with --no-output-lock))" in text and "2/3 committed" in text
    assert "incomplete" not in text
    assert "only when no job runs on it" in text and "--checker-timeout, --max-rejected-share" in text
    assert "ETA       : none: the job is interrupted" in text
    assert "rate      : none now (no driver is running)" in text
    command = status["resume_command"]
    assert f"resume    : {command}" in text
    assert shlex.split(command) == [
        "labeler", "label", f"--input={args[2]}", "--model=scripted", "--rollouts=2", "--temperature=0.5", "--shard-size=2",
        "--stop=END", "--no-rollouts", "--output", str(out),
    ], command  # fmt: skip

    # the command it gives resumes the job (its settings are the job's: a mismatch would be refused)
    monkeypatch.setattr(workers.vllm_generator, "start_engine", lambda model, config: ScriptedGenerator(ANSWERS))
    assert main([*shlex.split(command)[1:], "--quiet"]) == 0
    status, text = status_of(out, capsys)
    assert status["state"] == "finished" and status["resume_command"] is None and "resume" not in text


def test_a_job_whose_lock_holder_is_alive_is_running_and_has_an_eta(interrupted, capsys):
    out, _ = interrupted
    with OutputLock(OutputLocation(str(out))):  # a live driver (this process) holds the output
        status, text = status_of(out, capsys)
    assert status["state"] == "running" and status["eta_reason"] is None and status["resume_command"] is None
    assert status["eta_seconds"] is not None and status["eta_seconds"] >= 0
    assert "(running)" in text and "incomplete" not in text and "ETA       : none" not in text and "resume" not in text
    assert "rate      : none now" not in text and f"pid {os.getpid()}" in text


def test_a_killed_drivers_lock_does_not_pass_for_a_running_job(interrupted, tmp_path, capsys):
    """kill -9 leaves the lock behind with a fresh heartbeat: its process being gone makes it stale at once."""
    out, _ = interrupted
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, time
            from labeler.store.location import OutputLocation
            from labeler.store.lock import OutputLock
            lock = OutputLock(OutputLocation({str(out)!r}))
            lock.acquire()
            print("held", flush=True)
            time.sleep(600)
        """)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        status, _ = status_of(out, capsys)
        assert status["state"] == "running" and status["driver"]["pid"] == holder.pid
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert (out / LOCK_NAME).exists()  # left behind, its heartbeat seconds old
    status, text = status_of(out, capsys)
    assert status["driver"]["stale"] and status["driver"]["gone"] == "that process is gone"
    assert status["state"] == "interrupted" and status["eta_seconds"] is None and status["resume_command"]
    assert "its driver is gone (that process is gone)" in text and "ETA       : none: the job is interrupted" in text


def test_the_resume_command_gives_back_the_jobs_settings():
    from labeler.cli import build_parser
    from labeler.cli.label import config_from_args
    from labeler.cli.status import resume_command
    from labeler.labeling.config import LabelConfig

    config = LabelConfig(
        input="data/my problems.jsonl", output="o", model="Qwen/Qwen2.5-Math-7B-Instruct", preset="gsm8k", columns={"answer": "final"},
        stop=("x", "y z", "-x"), strategy="adaptive", stop_after_answer=False, write_rollouts=False, limit=5, temperature=0.5,
        sample_solutions=True, answers="answers.jsonl", min_counted_rollouts=2, trust_remote_code=True,
    )  # fmt: skip
    command = shlex.split(resume_command("label", config.output_settings(), "runs/the job"))
    assert command[:2] == ["labeler", "label"] and command[-2:] == ["--output", "runs/the job"]
    args = build_parser().parse_args(command[1:])
    rebuilt = config_from_args(args, args.model)
    assert rebuilt.output_settings() == config.output_settings() and rebuilt.config_hash() == config.config_hash()
    assert resume_command("judge", {}, "out") is None  # said in words instead
    # bon's and search's candidates job is a label job: resuming it with `labeler label` would not score it
    assert resume_command("label", LabelConfig(input="p.jsonl", output="o", model="m", strategy="final-answer").output_settings(), "o") is None


@pytest.mark.parametrize("pid", ['"123"', "null", str(2**63), "0", "-1", "true"])
def test_a_lock_edited_by_hand_is_unreadable_not_a_traceback(tmp_path, pid, capsys):
    from labeler.store.lock import read_lock_holder

    holder = json.loads(OutputLock(OutputLocation(str(tmp_path))).holder.to_bytes())
    (tmp_path / LOCK_NAME).write_text(json.dumps(holder | {"pid": json.loads(pid)}))
    assert read_lock_holder(OutputLocation(str(tmp_path))).get("unreadable")
