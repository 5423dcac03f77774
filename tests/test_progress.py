"""Progress between commits: a line when a generation batch of a unit is done (rollouts so far, their rate, an
ETA from it), throttled, so that a first job on a CPU is not silent until its first unit commits."""

import io
import re

from labeler.checking import AnswerChecker
from labeler.labeling.config import LabelConfig
from labeler.labeling.job import run_job
from labeler.store import progress as progress_module
from labeler.store.progress import ProgressReporter
from tests.conftest import write_jsonl
from tests.fakes import ScriptedGenerator
from workers.local_executor import LocalExecutor

PROBLEMS = {f"What is {i} minus 1?": str(i - 1) for i in range(2, 10)}


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def clocked_reporter(monkeypatch, units: int, solutions: int, **kwargs) -> tuple[Clock, io.StringIO, ProgressReporter]:
    """A reporter on a clock the test moves, writing to a string, its clock started."""
    clock = Clock()
    monkeypatch.setattr(progress_module.time, "monotonic", clock)
    stream = io.StringIO()
    reporter = ProgressReporter(units, solutions, stream=stream, **kwargs)
    reporter.start_clock()
    return clock, stream, reporter


def test_batch_lines_give_rollouts_rate_and_eta_and_are_throttled(monkeypatch):
    clock, stream, reporter = clocked_reporter(monkeypatch, 4, 40, rollouts_planned=1000)
    clock.now += 10
    reporter.generated(100, 2000)  # 100 rollouts in 10 s: 10/s, 900 left: 1m30s
    clock.now += 1
    reporter.generated(50, 1000)  # within the throttle: no line
    clock.now += progress_module.BATCH_LINE_EVERY_S
    reporter.generated(50, 1000)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2, lines
    assert "rollouts generated 100 (10.0/s)" in lines[0] and "of about 1000" in lines[0] and "ETA 1m30s" in lines[0]
    assert "units 0/4" in lines[0] and "rollouts generated 200" in lines[1]


def test_without_a_planned_count_the_eta_comes_from_committed_solutions(monkeypatch):
    clock, stream, reporter = clocked_reporter(monkeypatch, 4, 40)
    clock.now += 10
    reporter.generated(100, 2000)
    assert "ETA ? (until a unit is committed)" in stream.getvalue()
    reporter.unit_committed(10, 100, 2000)  # at 10 s: 10 solutions in 10 s, 30 left
    assert stream.getvalue().splitlines()[-1].endswith("ETA 0m30s")
    clock.now += 10
    reporter.generated(100, 2000)
    assert stream.getvalue().splitlines()[-1].endswith("ETA 0m20s")  # 30 s at the committed rate, 10 s of them gone


def test_the_eta_counts_down_between_commits_and_never_grows_with_the_wait(monkeypatch):
    """The ETA comes from the committed units' rate (solutions over the time to the last commit), counted down since
    that commit: waiting for the next commit does not make the job look slower and slower (it did: elapsed time
    over the solutions committed, so every idle second between commits raised it)."""
    clock, stream, reporter = clocked_reporter(monkeypatch, 10, 100)
    clock.now += 60
    reporter.unit_committed(10, 100, 2000)  # 10 solutions a minute: 90 left, 9 minutes
    etas = [stream.getvalue().splitlines()[-1].rsplit("ETA ", 1)[1]]
    for _ in range(4):
        clock.now += progress_module.BATCH_LINE_EVERY_S * 3
        reporter.generated(10, 100)
        etas.append(stream.getvalue().splitlines()[-1].rsplit("ETA ", 1)[1])
    assert etas == ["9m00s", "8m45s", "8m30s", "8m15s", "8m00s"], etas
    clock.now += 9 * 60  # far past what the committed rate gave: no made-up time, and no growing one
    reporter.generated(10, 100)
    assert stream.getvalue().splitlines()[-1].endswith("ETA ? (the next commit is later than the committed units' rate; it updates the estimate)")
    reporter.unit_committed(10, 100, 2000)  # 20 solutions in 11 minutes now: 80 left at 33 s each
    assert stream.getvalue().splitlines()[-1].endswith("ETA 44m00s")


def test_a_labeling_job_reports_progress_before_its_first_unit_commits(tmp_path, monkeypatch, capfd):
    monkeypatch.setattr(progress_module, "BATCH_LINE_EVERY_S", 0.0)
    rows = [
        {"id": f"q{k}", "problem": p, "answer": a, "steps": [f"Take 1 from {k + 2}.", "Then more.", f"The answer is: {a}"]}
        for k, (p, a) in enumerate(PROBLEMS.items())
    ]
    dataset = write_jsonl(tmp_path / "in.jsonl", rows)
    config = LabelConfig(input=str(dataset), output=str(tmp_path / "out"), model="scripted", rollouts=4, shard_size=4, seed=5)
    with AnswerChecker(timeout_s=5) as checker:
        executor = LocalExecutor(lambda: ScriptedGenerator(PROBLEMS), checker)
        run_job(config, executor=executor, model_info={"name": "scripted"}, progress_enabled=True)
    lines = capfd.readouterr().err.splitlines()
    first_commit = next(i for i, line in enumerate(lines) if "units 1/2" in line)
    batches = [line for line in lines[:first_commit] if "rollouts generated" in line]
    # 4 solutions of 3 steps, the last checked: 2 prefixes of 4 rollouts each, 32 rollouts planned per unit
    assert batches and re.search(r"rollouts generated 32 \([0-9.]+/s\) of about 64", batches[0]), batches


def test_no_batch_lines_when_progress_is_off():
    stream = io.StringIO()
    reporter = ProgressReporter(1, 1, stream=stream, enabled=False)
    reporter.generated(5, 50)
    assert stream.getvalue() == ""


def test_the_real_engine_reports_each_finished_request_within_one_generate_call(tiny_engine, monkeypatch):
    """One generate call of many requests (an exhaustive unit is one) moves the progress as each request finishes,
    not only at its end; the tokens come with the batch's end. The engine is left without a callback after."""
    from labeler.labeling.generation import GenerationRequest, SamplingSettings
    from labeler.store.progress import CountedGenerator

    calls: list[tuple[int, int]] = []
    reporter = ProgressReporter(1, 8, stream=io.StringIO())
    monkeypatch.setattr(reporter, "generated", lambda rollouts, tokens: calls.append((rollouts, tokens)))
    requests = [GenerationRequest(f"What is {i} plus 1?", "Step 1:", n=2, seed=i) for i in range(8)]
    results = CountedGenerator(tiny_engine, reporter).generate(requests, SamplingSettings(max_new_tokens=8))
    completions = [c for result in results for c in result.completions]
    assert sum(rollouts for rollouts, _ in calls) == len(completions) == 16
    assert len([rollouts for rollouts, _ in calls if rollouts]) > 1  # several lines' worth within the one call
    assert sum(tokens for _, tokens in calls) == sum(c.tokens for c in completions)
    assert tiny_engine.on_finished is None


class SlowScriptedGenerator(ScriptedGenerator):
    """Half a second a generate call: a unit on a Ray worker is still generating when the driver asks."""

    def generate(self, requests, sampling):
        import time

        time.sleep(0.5)
        return super().generate(requests, sampling)


def test_a_job_on_ray_reports_its_workers_generation_before_its_first_unit_commits(tmp_path, monkeypatch, capfd, local_ray):
    """The workers' units generate away from the driver: it asks them what they generated, as it waits."""
    from functools import partial

    from workers import ray_executor
    from workers.ray_executor import ClusterSettings, RayExecutor

    monkeypatch.setattr(progress_module, "BATCH_LINE_EVERY_S", 0.0)
    monkeypatch.setattr(ray_executor, "POLL_S", 0.1)
    rows = [
        {"id": f"q{k}", "problem": p, "answer": a, "steps": [f"Take {k}.", "Then more.", "And more.", f"The answer is: {a}"]}
        for k, (p, a) in enumerate(PROBLEMS.items())
    ]
    dataset = write_jsonl(tmp_path / "in.jsonl", rows)
    config = LabelConfig(
        input=str(dataset), output=str(tmp_path / "out"), model="scripted", rollouts=4, shard_size=8, seed=5, strategy="first-error"
    )  # one unit of several generate calls (first-error's rounds)
    executor = RayExecutor(ClusterSettings(workers=1), partial(SlowScriptedGenerator, PROBLEMS), partial(AnswerChecker, timeout_s=5))
    run_job(config, executor=executor, model_info={"name": "scripted"}, progress_enabled=True)
    lines = capfd.readouterr().err.splitlines()
    first_commit = next(i for i, line in enumerate(lines) if "units 1/1" in line)
    batches = [line for line in lines[:first_commit] if "rollouts generated" in line]
    assert batches and all(re.search(r"rollouts generated [1-9][0-9]* \([0-9.]+/s\)", line) for line in batches), lines
