"""Every script under bench/ at its smallest size, so that no change of a protocol (the generator's, the
labeler's flags, a table's columns) breaks a bench unnoticed (issue 53, item 7).

The cheap ones (no engine, seconds) run in `make test`; those that start an engine, train or start a
cluster are marked `slow` (and `engine`), so that `make faults` (bench/faults.py) runs them. Each run
checks that the bench printed its figures, not only that it exited 0. Which test covers which script:
BENCH_COVERAGE below (a test checks that every script under bench/ is named there).

Scripts covered elsewhere: bench/world.py (tests/test_bench_world.py: every command of the bench, and
tests/test_world.py), bench/world_rl.py (tests/test_bench_world.py), bench/world_active.py
(tests/test_world_active.py), bench/faults.py (it is `make faults`), bench/process_cpu.py
(tests/test_checker_health.py), bench/train_memory.py (tests/test_train_memory.py).
"""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"

# every script under bench/ -> the test (in this file or another) that runs it, or why it is not run
BENCH_COVERAGE = {
    "bon.py": "test_bon_at_its_smallest (slow)",
    "checker.py": "test_checker_bench_at_its_smallest (slow)",
    "checker_verdicts.py": "test_checker_verdicts_at_its_smallest (slow)",
    "cluster.py": "tests/test_cluster.py runs the same cluster (make cluster); test_cluster_bench_refuses_bad_flags here",
    "compare_outputs.py": "test_compare_outputs_and_review_app_at_their_smallest",
    "completions.py": "a library of bench/cpu_side.py and checker_verdicts.py: test_cpu_side_at_its_smallest",
    "cpu_side.py": "test_cpu_side_at_its_smallest (slow)",
    "faults.py": "make faults itself; test_faults_lists_its_cases",
    "judge.py": "test_judge_at_its_smallest (slow)",
    "long_traces.py": "a library of bench/strategies.py: test_strategies_simulated_at_its_smallest",
    "overhead.py": "test_overhead_at_its_smallest (slow); test_the_overhead_recorder_takes_what_the_engine_is_called_with",
    "process_cpu.py": "tests/test_checker_health.py::test_the_benches_count_the_cpu_of_workers_killed_at_their_deadline",
    "prm_backends.py": "test_prm_backends_at_its_smallest (slow)",
    "review_app.py": "test_compare_outputs_and_review_app_at_their_smallest",
    "reward_server.py": "test_reward_server_at_its_smallest (slow)",
    "scale.py": "test_scale_store_at_its_smallest; test_scale_at_its_smallest (slow)",
    "splitting.py": "test_splitting_at_its_smallest",
    "strategies.py": "test_strategies_simulated_at_its_smallest; test_strategies_on_a_model_at_its_smallest (slow)",
    "train_memory.py": "tests/test_train_memory.py",
    "trainer.py": "test_trainer_at_its_smallest (slow)",
    "world.py": "tests/test_bench_world.py::test_every_command_of_the_world_bench_runs_and_reports",
    "world_active.py": "tests/test_world_active.py",
    "world_rl.py": "tests/test_bench_world.py::test_the_rl_bench_trains_every_arm_and_writes_its_summary",
    "checker_eval/sets.py": "a library of bench/checker.py: tests/test_checker_eval.py",
    "checker_eval/build_sets.py": "a data builder (writes the committed evaluation sets once), not a bench: not run",
    "checker_eval/redteam_build.py": "a data builder (writes the committed red-team sets once), not a bench: not run",
    "checker_eval/redteam_r2_build.py": "a data builder (writes the committed red-team sets once), not a bench: not run",
}


def bench(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """A bench script as a user runs it; its output, after checking it exited 0."""
    done = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(args)} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def test_every_bench_script_is_run_somewhere():
    scripts = sorted(str(p.relative_to(ROOT / "bench")) for p in (ROOT / "bench").rglob("*.py") if p.name != "__init__.py")
    assert [s for s in scripts if s not in BENCH_COVERAGE] == [], "a bench script no test runs: add it to BENCH_COVERAGE and run it"
    assert [s for s in BENCH_COVERAGE if s not in scripts] == []


# -- overhead.py -------------------------------------------------------------------------------------


def test_the_overhead_recorder_takes_what_the_engine_is_called_with():
    """The recorder stands in for VLLMGenerator._generate: it must take every argument the real one takes
    (`report` was added to the generator's protocol and broke every unit of the bench)."""
    sys.path.insert(0, str(ROOT))
    from bench.overhead import RecordingGenerator
    from workers.vllm_generator import VLLMGenerator

    real = inspect.signature(VLLMGenerator._generate)

    class Engine:  # the real generate's one call, with the real _generate's signature
        model_name = "stand-in"

        def _generate(self, prompts, params, report=False):
            return [("done", prompt, report) for prompt in prompts]

        def generate(self, requests, sampling):
            return self._generate(list(requests), [sampling] * len(requests), report=True)

    assert list(inspect.signature(Engine._generate).parameters) == list(real.parameters)
    recorder = RecordingGenerator(Engine())
    assert recorder.generate(["a", "b"], "params") == [("done", "a", True), ("done", "b", True)]
    assert recorder.calls == [(["a", "b"], ["params", "params"])] and recorder.engine_s >= 0
    assert "_generate" not in vars(recorder.engine)  # the engine's own method again


@pytest.mark.slow
@pytest.mark.engine
def test_overhead_at_its_smallest():
    done = bench("bench/overhead.py", "--models", "tiny", "--pairs", "1", "--rows", "2", timeout=900)
    result = json.loads(done.stdout.splitlines()[0])
    assert result["model"] == "tiny" and result["generated_tokens"] > 0 and result["ratio"] > 0, done.stdout
    assert re.search(r"^tiny\s+\d+\s+[\d.]+\s+[\d.]+\s+[\d.]+", done.stdout, re.M), done.stdout  # the table's row


# -- strategies.py -----------------------------------------------------------------------------------


def test_strategies_agreement_over_no_known_first_error_is_na_in_the_table_and_by_length():
    """Exhaustive's first errors all null (unknown): the table printed 0.0% and the by-length rows 100% for the
    same runs. Both come from one function now, and an agreement over nothing is n/a."""
    sys.path.insert(0, str(ROOT / "bench"))
    sys.path.insert(0, str(ROOT))
    from bench.strategies import agreement_by_length, agreement_text, first_error_agreement

    row = lambda first_error, steps=8: {"first_error": first_error, "steps": ["s"] * steps}  # noqa: E731
    reference = {"a": row(None), "b": row(None), "c": row(None, 30), "d": row(None, 30)}
    ours = {"a": row(2), "b": row(None), "c": row(-1, 30), "d": row(None, 30)}
    assert first_error_agreement(ours, reference) == (0, 0)
    assert agreement_text(*first_error_agreement(ours, reference)) == "n/a"
    by_length = agreement_by_length({"exhaustive": reference, "posterior": ours}, reference)
    assert {length: agree["posterior"] for length, agree in by_length.items()} == {"8-9": (0, 0), "30-59": (0, 0)}
    assert agreement_text(*by_length["8-9"]["posterior"]) == "n/a"
    # where first errors are known, the table's figure is the by-length rows' pooled
    reference |= {"e": row(3), "f": row(-1, 30)}
    ours |= {"e": row(3), "f": row(4, 30)}
    by_length = agreement_by_length({"posterior": ours}, reference)
    assert first_error_agreement(ours, reference) == (1, 2) == tuple(map(sum, zip(*(a["posterior"] for a in by_length.values()))))
    assert agreement_text(1, 2) == "50.0%" and agreement_text(1, 2, digits=0) == "50%"


# -- bon.py ------------------------------------------------------------------------------------------


def test_bon_trains_the_epochs_it_is_given_and_says_so():
    """Issue 53, item 7: `labeler train`'s --min-steps (300 by default) turned the bench's --epochs 1 into 300
    optimizer steps (25 minutes on 2 cores for 12 solutions): the bench passes --min-steps and names the departure."""
    sys.path.insert(0, str(ROOT))
    from bench.bon import parser, train_command

    args = parser().parse_args(["--epochs", "1"])
    command, said = train_command(args, Path("/w"), ["--seed", "0"])
    assert command[command.index("--epochs") + 1] == "1" and command[command.index("--min-steps") + 1] == "0"
    assert "--min-steps 0" in said and "300" in said and "--epochs 1" in said
