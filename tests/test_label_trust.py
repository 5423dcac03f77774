"""A labeling job a new user can trust (issue 53, items 9, 10, 14's label parts, 17's first part): settings that
cannot sample are refused before a model loads, a job that labels nothing does not finish green, SIGTERM stops a
job as Ctrl-C does, --dry-run says why rows are rejected, flags of another strategy are refused, posterior says
when it fitted no prior, and a row that is not UTF-8 keeps its bytes in rejected/.

The scripted generator (tests/fakes.py) stands in for the engine: what is tested is the job's logic and the CLI,
not vLLM (vLLM's own refusal of n > 1 under greedy sampling is what the first tests keep the user from meeting)."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import workers.vllm_generator
from labeler.cli import main
from labeler.inputs.readers import read_rows
from labeler.store.lock import LOCK_NAME
from tests.conftest import status_of, write_jsonl
from tests.fakes import ScriptedGenerator

REPO = Path(__file__).parents[1]
ANSWERS = {f"What is {i} plus {i}?": str(2 * i) for i in range(1, 9)}


def rows(n: int = 4) -> list[dict]:
    return [
        {"id": f"q{k}", "problem": problem, "answer": answer, "steps": ["We add.", "Then we check.", f"The answer is: {answer}"]}
        for k, (problem, answer) in enumerate(list(ANSWERS.items())[:n])
    ]


class NoModel:
    """start_engine's stand-in where no model may load: the test fails if one is asked for."""

    def __call__(self, model, config):
        raise AssertionError("a model was loaded for settings that should have been refused first")


def label_args(tmp_path, data, *flags) -> list[str]:
    return ["label", "--input", str(data), "--output", str(tmp_path / "out"), "--model", "scripted", *flags]


def one_error(capsys, args, code: int = 2) -> str:
    capsys.readouterr()
    assert main(args) == code
    lines = [line for line in capsys.readouterr().err.strip().splitlines() if "error:" in line]
    assert len(lines) == 1, lines
    return lines[0]


# -- 9: settings that cannot sample, refused before a model loads -------------------------------------------------
@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]])
def test_greedy_sampling_with_several_rollouts_is_refused_before_the_model_loads(tmp_path, monkeypatch, capsys, dry_run):
    monkeypatch.setattr(workers.vllm_generator, "start_engine", NoModel())
    data = write_jsonl(tmp_path / "in.jsonl", rows())
    line = one_error(capsys, label_args(tmp_path, data, "--temperature", "0", "--rollouts", "4", *dry_run))
    assert "--temperature 0" in line and "greedy" in line and "--rollouts 4" in line, line
    assert not (tmp_path / "out").exists()  # nothing written


def test_greedy_sampling_of_several_solutions_per_problem_is_refused_where_rows_need_them(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(workers.vllm_generator, "start_engine", NoModel())
    data = write_jsonl(tmp_path / "in.jsonl", [{"problem": p, "answer": a} for p, a in list(ANSWERS.items())[:2]])  # no solutions
    line = one_error(capsys, label_args(tmp_path, data, "--temperature", "0", "--rollouts", "1", "--dry-run"))
    assert "--solutions-per-problem 4" in line and "greedy" in line, line
    line = one_error(capsys, label_args(tmp_path, data, "--temperature", "0", "--rollouts", "1", "--sample-solutions", "--dry-run"))
    assert "--solutions-per-problem 4" in line, line


def test_greedy_sampling_with_one_rollout_is_accepted(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(workers.vllm_generator, "start_engine", lambda model, config: ScriptedGenerator(ANSWERS))
    data = write_jsonl(tmp_path / "in.jsonl", rows(2))
    assert main(label_args(tmp_path, data, "--temperature", "0", "--rollouts", "1", "--quiet")) == 0
    assert "solutions labelled : 2" in capsys.readouterr().out


class AlwaysRaises(ScriptedGenerator):
    """An engine that refuses every request, as vLLM refuses n > 1 under greedy sampling."""

    def generate(self, requests, sampling):
        raise ValueError("n must be 1 when using greedy sampling, got 4.")


@pytest.mark.parametrize("flags", [["--shard-size", "2"], ["--shard-size", "8", "--max-unit-retries", "0"]])
def test_a_job_whose_every_unit_fails_for_one_cause_stops_with_it_and_writes_off_no_row(tmp_path, monkeypatch, capsys, flags):
    """Whatever the setting: two units (fewer than the three that make a broken setup) or one, retried or not."""
    monkeypatch.setattr(workers.vllm_generator, "start_engine", lambda model, config: AlwaysRaises(ANSWERS))
    data = write_jsonl(tmp_path / "in.jsonl", rows(4))
    capsys.readouterr()
    assert main(label_args(tmp_path, data, "--rollouts", "2", "--quiet", *flags)) == 1
    out, err = capsys.readouterr()
    assert "solutions labelled" not in out
    [line] = [line for line in err.splitlines() if "error:" in line]
    assert "n must be 1 when using greedy sampling" in line and "4 rows" in line and "no row" in line, line
    rejected = tmp_path / "out" / "rejected"
    assert not any(p.suffix == ".parquet" and pq.read_table(p).num_rows for p in rejected.rglob("*.parquet")), "rows written off"
    status, _ = status_of(tmp_path / "out", capsys)
    assert status["state"] != "finished" and status["units_committed"] == 0

    # the cause fixed, a plain rerun labels every row
    monkeypatch.setattr(workers.vllm_generator, "start_engine", lambda model, config: ScriptedGenerator(ANSWERS))
    assert main(label_args(tmp_path, data, "--rollouts", "2", "--quiet", *flags)) == 0
    assert "solutions labelled : 4" in capsys.readouterr().out


def test_a_job_that_labels_some_rows_still_rejects_its_poison_rows(tmp_path, monkeypatch, capsys):
    class Poisoned(ScriptedGenerator):
        def generate(self, requests, sampling):
            if any(r.user_message.startswith("What is 1 plus 1?") for r in requests):
                raise ValueError("the tokenizer choked on this row")
            return super().generate(requests, sampling)

    monkeypatch.setattr(workers.vllm_generator, "start_engine", lambda model, config: Poisoned(ANSWERS))
    data = write_jsonl(tmp_path / "in.jsonl", rows(4))
    # the poison row's unit (rows 0 and 1) runs first and is given up whole before any row is labelled
    assert main(label_args(tmp_path, data, "--rollouts", "2", "--shard-size", "2", "--max-unit-retries", "0", "--quiet")) == 0
    assert "solutions labelled : 3" in capsys.readouterr().out
    assert [r["problem_id"] for r in pq.read_table(tmp_path / "out" / "rejected").to_pylist()] == ["q0"]


def test_a_resumed_job_whose_last_unit_is_all_poison_rows_finishes_with_them_rejected(tmp_path, monkeypatch, capsys):
    """An earlier run of the job labelled units: the setup works, so rows that all fail in this run are the rows' fault
    and go to rejected/ (holding them back would leave a job that can never finish: a resume cannot change its input)."""
    from tests.fakes import Crash

    poison = ("What is 3 plus 3?", "What is 4 plus 4?")  # rows 2 and 3: unit 1 of shard size 2

    class Poisoned(ScriptedGenerator):
        def __init__(self, answers, fail):
            super().__init__(answers)
            self.fail = fail

        def generate(self, requests, sampling):
            if any(r.user_message.startswith(problem) for r in requests for problem in poison):
                raise self.fail
            return super().generate(requests, sampling)

    data = write_jsonl(tmp_path / "in.jsonl", rows(4))
    args = label_args(tmp_path, data, "--rollouts", "2", "--shard-size", "2", "--max-unit-retries", "0", "--quiet")
    monkeypatch.setattr(workers.vllm_generator, "start_engine", lambda model, config: Poisoned(ANSWERS, Crash()))
    with pytest.raises(Crash):  # the first run stops (a kill) after unit 0 is committed
        main(args)
    assert _committed(tmp_path / "out") == 1
    monkeypatch.setattr(workers.vllm_generator, "start_engine", lambda model, config: Poisoned(ANSWERS, ValueError("tokenizer choked")))
    capsys.readouterr()
    assert main(args) == 0
    assert "solutions labelled : 2" in capsys.readouterr().out
    assert sorted(r["problem_id"] for r in pq.read_table(tmp_path / "out" / "rejected").to_pylist()) == ["q2", "q3"]


# -- 10: SIGTERM, as Ctrl-C --------------------------------------------------------------------------------------
SLOW_LABEL = """
import sys, time
import workers.vllm_generator
from tests.fakes import ScriptedGenerator

class Slow(ScriptedGenerator):
    def generate(self, requests, sampling):
        time.sleep(0.4)
        return super().generate(requests, sampling)

workers.vllm_generator.start_engine = lambda model, config: Slow({answers!r})
from labeler.cli import main
sys.exit(main({args!r}))
"""


@pytest.mark.parametrize("to_group", [False, True])
def test_sigterm_stops_a_label_job_with_a_message_its_lock_released_and_a_rerun_resumes(tmp_path, monkeypatch, capsys, to_group):
    """To the driver (Kubernetes: the container's first process; Ray) or to its whole process group, the answer
    checker's processes too (Slurm signals every process of the job step)."""
    data = write_jsonl(tmp_path / "in.jsonl", rows(8))
    out = tmp_path / "out"
    args = label_args(tmp_path, data, "--rollouts", "2", "--shard-size", "1")
    script = textwrap.dedent(SLOW_LABEL).format(answers=ANSWERS, args=args)
    job = subprocess.Popen(
        [sys.executable, "-c", script], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    deadline = time.monotonic() + 300
    while not _committed(out):
        assert job.poll() is None, job.communicate()
        assert time.monotonic() < deadline, "no unit committed in time"
        time.sleep(0.05)
    if to_group:
        os.killpg(job.pid, signal.SIGTERM)
    else:
        job.send_signal(signal.SIGTERM)
    stdout, stderr = job.communicate(timeout=120)
    assert job.returncode == 143, stderr[-3000:]
    assert "labeler label: stopped by SIGTERM; rerun the same command to resume" in stderr, stderr[-3000:]
    assert "Traceback" not in stderr and stdout == ""
    assert not (out / LOCK_NAME).exists()  # released, not left stale
    status, _ = status_of(out, capsys)
    assert status["state"] == "interrupted" and 1 <= status["units_committed"] < 8

    monkeypatch.setattr(workers.vllm_generator, "start_engine", lambda model, config: ScriptedGenerator(ANSWERS))
    assert main([*args, "--quiet"]) == 0
    assert "solutions labelled : 8" in capsys.readouterr().out
    assert sorted(r["problem_id"] for r in pq.read_table(out / "labels").to_pylist()) == [f"q{k}" for k in range(8)]


def _committed(out: Path) -> int:
    try:
        manifest = json.loads((out / "manifest.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return 0
    return sum(unit["state"] == "committed" for unit in manifest["units"])


def test_sigterm_stops_any_command_as_ctrl_c_does_and_the_handler_is_put_back(monkeypatch, capsys):
    """The handler is installed once, in main, for every command; a command run in-process leaves SIGTERM as it found it."""
    from labeler.cli import label as label_command

    before = signal.getsignal(signal.SIGTERM)

    def terminated(args):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises before this ends
        raise AssertionError("SIGTERM did not stop the command")

    monkeypatch.setattr(label_command, "run_label", terminated)  # registered as label's handler when main builds its parser
    capsys.readouterr()
    assert main(["label", "--output", "unused"]) == 143
    assert capsys.readouterr().err.strip() == "labeler label: stopped by SIGTERM; rerun the same command to resume"
    assert signal.getsignal(signal.SIGTERM) == before


# -- 14: --dry-run and its --output, rejected reasons, flags of other strategies, posterior without a prior --------
def test_dry_run_refuses_an_output_that_is_a_file(tmp_path, capsys):
    data = write_jsonl(tmp_path / "in.jsonl", rows(2))
    (tmp_path / "out").write_text("a file")
    for dry in (["--dry-run"], []):
        line = one_error(capsys, label_args(tmp_path, data, *dry))
        assert str(tmp_path / "out") in line and "is a file" in line, line


def test_dry_run_shows_each_rejection_reason_with_its_count_and_first_rows(tmp_path, capsys):
    bad = [{"problem": f"What is {k} minus 0?", "steps": ["x"]} for k in range(4)]  # no answer
    data = write_jsonl(tmp_path / "in.jsonl", rows(8) + bad + [{"answer": "1", "steps": ["x"]}])  # and one without a problem
    capsys.readouterr()
    assert main(label_args(tmp_path, data, "--dry-run")) == 0
    out = capsys.readouterr().out
    assert "rows               : 13 read, 5 rejected" in out
    assert "rejected           : 4 rows: answer: " in out and "(rows 8, 9, 10, 11)" in out, out
    assert "rejected           : 1 row: problem: " in out and "(row 12)" in out, out
    assert main(label_args(tmp_path, data, "--dry-run", "--json")) == 0
    estimate = json.loads(capsys.readouterr().out)
    reasons = {(r["field"], r["count"]): r["rows"] for r in estimate["rejected_reasons"]}
    assert reasons[("answer", 4)] == [8, 9, 10, 11] and reasons[("problem", 1)] == [12]


@pytest.mark.parametrize(
    "strategy, flag, used_by",
    [
        ("exhaustive", ["--round-size", "4"], "adaptive and posterior"),
        ("first-error", ["--round-size", "2"], "adaptive and posterior"),  # its default, but given
        ("adaptive", ["--stop-risk", "0.1"], "posterior"),
        ("posterior", ["--ci-width", "0.3"], "adaptive"),
        ("exhaustive", ["--after-first-error", "unlabelled"], "first-error and posterior"),
        ("final-answer", ["--after-first-error", "negative"], "first-error and posterior"),
    ],
)
def test_a_flag_of_another_strategy_is_refused_naming_the_ones_that_use_it(tmp_path, monkeypatch, capsys, strategy, flag, used_by):
    monkeypatch.setattr(workers.vllm_generator, "start_engine", NoModel())
    data = write_jsonl(tmp_path / "in.jsonl", rows(2))
    for dry in (["--dry-run"], []):
        line = one_error(capsys, label_args(tmp_path, data, "--strategy", strategy, *flag, *dry))
        assert f"{flag[0]} is read only by --strategy {used_by}" in line and f"--strategy {strategy}" in line, line


def test_flags_of_the_chosen_strategy_and_defaults_are_accepted(tmp_path, capsys):
    data = write_jsonl(tmp_path / "in.jsonl", rows(2))
    for flags in (
        ["--strategy", "posterior", "--round-size", "4", "--stop-risk", "0.1", "--after-first-error", "unlabelled"],
        ["--strategy", "adaptive", "--round-size", "4", "--ci-width", "0.3"],
        ["--strategy", "first-error", "--after-first-error", "unlabelled"],
        ["--strategy", "exhaustive"],
    ):
        assert main(label_args(tmp_path, data, *flags, "--dry-run")) == 0, capsys.readouterr().err


def test_a_job_started_with_a_flag_of_another_strategy_still_resumes_with_it(tmp_path, monkeypatch, capsys):
    """A job started before such flags were refused holds the setting in its config hash: its resume must pass it,
    so it is accepted where --output holds a job started with that value (and only there)."""
    import labeler.labeling.job as job_module
    from labeler.checking.checker import AnswerChecker
    from labeler.labeling.config import LabelConfig
    from workers.local_executor import LocalExecutor

    data = write_jsonl(tmp_path / "in.jsonl", rows(2))
    config = LabelConfig(input=str(data), output=str(tmp_path / "out"), model="scripted", rollouts=2, round_size=4)
    with AnswerChecker(timeout_s=5) as checker:
        job_module.run_job(config, executor=LocalExecutor(lambda: ScriptedGenerator(ANSWERS), checker), model_info={"name": "scripted"},
                           progress_enabled=False)  # fmt: skip
    monkeypatch.setattr(workers.vllm_generator, "start_engine", NoModel())
    capsys.readouterr()
    assert main(label_args(tmp_path, data, "--rollouts", "2", "--round-size", "4", "--quiet")) == 0  # nothing left to run
    assert "solutions labelled : 2" in capsys.readouterr().out
    line = one_error(capsys, label_args(tmp_path, data, "--rollouts", "2", "--round-size", "3", "--dry-run"))
    assert "--round-size is read only by" in line, line  # another value: refused as before
    line = one_error(capsys, label_args(tmp_path, data, "--rollouts", "2", "--round-size", "4", "--overwrite", "--dry-run"))
    assert "--round-size is read only by" in line, line  # a fresh start is held to the rule


def test_a_posterior_job_that_fitted_no_prior_says_it_labelled_as_first_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(workers.vllm_generator, "start_engine", lambda model, config: ScriptedGenerator(ANSWERS))
    data = write_jsonl(tmp_path / "in.jsonl", rows(2))  # too few prefixes for a prior
    capsys.readouterr()
    assert main(label_args(tmp_path, data, "--strategy", "posterior", "--rollouts", "4", "--quiet")) == 0
    err = capsys.readouterr().err
    assert "warning: posterior fitted no prior in 1 of 1 units" in err and "as first-error" in err, err
    assert main(label_args(tmp_path, data, "--strategy", "posterior", "--rollouts", "4", "--quiet", "--json")) == 0
    assert json.loads(capsys.readouterr().out)["units_without_prior"] == 1


def test_a_posterior_job_that_fitted_a_prior_says_nothing_of_it(tmp_path, monkeypatch, capsys):
    answers = {f"What is {i} times 3?": str(3 * i) for i in range(1, 25)}
    data = write_jsonl(tmp_path / "in.jsonl", [{"problem": p, "answer": a, "steps": ["We multiply.", "We check.", f"The answer is: {a}"]}
                                               for p, a in answers.items()])  # fmt: skip
    monkeypatch.setattr(workers.vllm_generator, "start_engine", lambda model, config: ScriptedGenerator(answers))
    capsys.readouterr()
    assert main(label_args(tmp_path, data, "--strategy", "posterior", "--rollouts", "4", "--quiet", "--json")) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["units_without_prior"] == 0 and "fitted no prior" not in err


# -- 17: a row that is not UTF-8 keeps its bytes ------------------------------------------------------------------
def test_a_row_that_is_not_utf8_keeps_its_original_bytes_in_rejected(tmp_path, monkeypatch, capsys):
    line = '{"problem": "What is 2 plus 2?", "answer": "4", "steps": ["Caf\xe9 au lait.", "The answer is: 4"]}'.encode("latin-1")
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"\n".join(json.dumps(row).encode() for row in rows(3)) + b"\n" + line + b"\n")
    [raw] = [row for row in read_rows(str(path)) if row.error is not None]
    assert "not valid UTF-8" in raw.error.reason and "base64" in raw.error.reason
    assert base64.b64decode(raw.raw.removeprefix("base64:")) == line

    monkeypatch.setattr(workers.vllm_generator, "start_engine", lambda model, config: ScriptedGenerator(ANSWERS))
    assert main(label_args(tmp_path, path, "--rollouts", "2", "--quiet")) == 0
    [rejected] = pq.read_table(tmp_path / "out" / "rejected").to_pylist()
    assert rejected["row_index"] == 3 and rejected["raw"].startswith("base64:")
    assert base64.b64decode(rejected["raw"].removeprefix("base64:")) == line  # repairable: the bytes as they were
