"""Every script under bench/ at its smallest size, so that no change of a protocol (the generator's, the
labeler's flags, a table's columns) breaks a bench unnoticed (issue 53, item 7).

The cheap ones (no engine, seconds) run in `make test`; those that start an engine, train or start a
cluster are marked `slow` (and `engine`), so that `make faults` (bench/faults.py) runs them. Each run
checks that the bench printed its figures, not only that it exited 0. Which test covers which script:
BENCH_COVERAGE below (a test checks that every script under bench/ is named there).

Scripts covered elsewhere: bench/world.py (tests/test_bench_world.py: every command of the bench, and
tests/test_world.py), bench/world_rl.py (tests/test_bench_world.py), bench/world_active.py
(tests/test_bench_world.py, slow, and tests/test_world_active.py), bench/faults.py (it is `make faults`), bench/process_cpu.py
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

# every script under bench/ -> the test (in this file or another) that runs it, or why it is not run
BENCH_COVERAGE = {
    "bon.py": "test_bon_at_its_smallest (slow)",
    "checker.py": "test_checker_bench_at_its_smallest (slow)",
    "checker_verdicts.py": "test_checker_verdicts_at_its_smallest (slow)",
    "cluster.py": "test_cluster_bench_at_its_smallest (slow)",
    "compare_outputs.py": "test_compare_outputs_at_its_smallest",
    "completions.py": "a library of bench/cpu_side.py and checker_verdicts.py: test_cpu_side_at_its_smallest",
    "cpu_side.py": "test_cpu_side_at_its_smallest (slow)",
    "faults.py": "make faults itself; test_faults_lists_its_cases (slow)",
    "judge.py": "test_judge_at_its_smallest (slow)",
    "long_traces.py": "a library of bench/strategies.py: test_strategies_simulated_at_its_smallest",
    "overhead.py": "test_overhead_at_its_smallest (slow); test_the_overhead_recorder_takes_what_the_engine_is_called_with",
    "process_cpu.py": "tests/test_checker_health.py::test_the_benches_count_the_cpu_of_workers_killed_at_their_deadline",
    "prm_backends.py": "test_prm_backends_at_its_smallest (slow)",
    "review_app.py": "test_review_app_at_its_smallest (slow); its output maker in test_compare_outputs_at_its_smallest",
    "reward_server.py": "test_reward_server_at_its_smallest (slow)",
    "scale.py": "test_scale_store_at_its_smallest; test_scale_at_its_smallest (slow)",
    "splitting.py": "test_splitting_at_its_smallest",
    "strategies.py": "test_strategies_simulated_at_its_smallest; test_strategies_on_a_model_at_its_smallest (slow)",
    "train_memory.py": "tests/test_train_memory.py",
    "trainer.py": "test_trainer_at_its_smallest (slow)",
    "world.py": "tests/test_bench_world.py::test_every_command_of_the_world_bench_runs_and_reports",
    "world_active.py": "tests/test_bench_world.py::test_the_active_labeling_bench_runs_on_a_world_run (slow); tests/test_world_active.py",
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


def test_every_test_named_in_the_bench_coverage_exists():
    """A name in BENCH_COVERAGE that no test has would pass for coverage: each one, in this file or the tests/ file it names."""
    missing = []
    for script, covered_by in BENCH_COVERAGE.items():
        for path in re.findall(r"\b(tests/[\w/]+\.py)\b", covered_by):
            if not (ROOT / path).is_file():
                missing.append(f"{script}: {path}")
        for path, name in re.findall(r"(?:\b(tests/[\w/]+\.py)::)?(?<![/\w])(test_\w+)(?!\w|\.py)", covered_by):
            source = (ROOT / path).read_text() if path else inspect.getsource(sys.modules[__name__])
            if not re.search(rf"^(async )?def {name}\(", source, re.MULTILINE):
                missing.append(f"{script}: {path + '::' if path else ''}{name}")
    assert missing == [], f"tests named in BENCH_COVERAGE that do not exist: {missing}"


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
    result = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("{")))
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


def test_strategies_simulated_at_its_smallest():
    """The simulated completer (no model): every strategy's row of the table and the by-length rows."""
    done = bench("bench/strategies.py", "--trace-steps", "30-40", "--rows", "2", "--simulate", "0.5", "--rollouts", "4")
    for strategy in ("exhaustive", "first-error", "adaptive", "posterior"):
        assert re.search(rf"^{strategy}\s+\d+\s+\d+\s+[\d.]+\s+[\d.]+\s+[\d.]+%\s+(n/a|[\d.]+%)", done.stdout, re.M), done.stdout
    assert re.search(r"^\s+30-59 steps \(2 solutions\): first-error [\d.]+x (n/a|\d+%) of \d", done.stdout, re.M), done.stdout


@pytest.mark.slow
@pytest.mark.engine
def test_strategies_on_a_model_at_its_smallest():
    done = bench("bench/strategies.py", "--rows", "2", "--rollouts", "2", "--max-new-tokens", "16", "--strategies", "exhaustive,posterior",
                 timeout=900)  # fmt: skip
    assert re.search(r"^posterior\s+\d+\s+\d+\s+[\d.]+", done.stdout, re.M), done.stdout
    assert "by solution length" in done.stdout


# -- cheap benches -----------------------------------------------------------------------------------


def test_splitting_at_its_smallest():
    done = bench("bench/splitting.py", "--size", "2000")
    assert re.search(r"slowest split [\d.]+ s on 2000 characters: target 2.0 s met", done.stdout), done.stdout


def test_compare_outputs_at_its_smallest(tmp_path):
    """compare_outputs.py finds a real output (made as bench/review_app.py makes its own: the job path with the
    test-double generator) identical to itself, and a copy with one column changed different, naming the column."""
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    sys.path.insert(0, str(ROOT))
    from bench.review_app import make_output

    out = make_output(tmp_path, 12)
    same = bench("bench/compare_outputs.py", str(out), str(out))
    assert same.stdout.strip().endswith("IDENTICAL") and "labels: rows 12/12" in same.stdout, same.stdout
    changed = tmp_path / "changed"
    shutil.copytree(out, changed)
    shard = sorted((changed / "labels").rglob("*.parquet"))[0]
    table = pq.read_table(shard)
    column = table.schema.get_field_index("first_error")
    pq.write_table(table.set_column(column, "first_error", pa.array([99] * table.num_rows, table.schema.field("first_error").type)), shard)
    different = subprocess.run([sys.executable, "bench/compare_outputs.py", str(out), str(changed)], cwd=ROOT, capture_output=True, text=True)
    assert different.returncode == 1 and "DIFFERENT" in different.stdout and "first_error" in different.stdout, different.stdout


@pytest.mark.slow
def test_review_app_at_its_smallest(tmp_path):
    """`labeler view` started as a user starts it, on a 12-solution output (slow: 10-16 s with the server's start)."""
    done = bench("bench/review_app.py", "--solutions", "12", "--keep", str(tmp_path))
    view = json.loads(next(line for line in done.stdout.splitlines() if '"part": "view"' in line))
    assert view["solutions"] == 12 and view["first_page_ms"] > 0 and view["server_rss_mb"] > 0, done.stdout


@pytest.mark.slow
def test_faults_lists_its_cases():
    """bench/faults.py (make faults) with a selection of one cheap case: its table of cases and outcomes (slow: it is
    make faults' own runner, and 9 s)."""
    done = bench("bench/faults.py", "--only", "faults", "-k", "test_a_unit_of_poison_rows_has_every_row_rejected_once", timeout=300)
    assert re.search(r"^case\s+outcome\s+seconds", done.stdout, re.M) and re.search(r"passed\s+[\d.]+$", done.stdout, re.M), done.stdout


# -- slow benches: an engine, training, a cluster -------------------------------------------------------


@pytest.mark.slow
@pytest.mark.engine
def test_bon_at_its_smallest(tmp_path):
    done = bench("bench/bon.py", "--problems", "2", "--train-problems", "2", "--candidates", "2", "--rollouts", "2", "--epochs", "1",
                 "--beams", "1", "--proposals", "2", "--max-steps", "2", "--step-max-new-tokens", "16", "--solution-max-new-tokens", "32",
                 "--work", str(tmp_path / "bon"), timeout=1800)  # fmt: skip
    assert "--min-steps 0, a departure" in done.stdout and re.search(r"^seconds: label \d+, train \d+, bon \d+, search \d+", done.stdout, re.M)
    assert re.search(r"^candidates: 4 \(\d+ correct\)", done.stdout, re.M), done.stdout


@pytest.mark.slow
def test_checker_bench_at_its_smallest():
    done = bench("bench/checker.py", "--skip", "processbench", "--skip", "throughput", timeout=900)
    assert re.search(r"^\| heldout \(held out\) \| \d+ \| [\d.]+% \| \d+ \| \d+ \| [\d.]+% \|", done.stdout, re.M), done.stdout[-3000:]
    figures = json.loads(next(line for line in done.stdout.splitlines() if line.startswith('{"eval_sets"')))
    assert figures["eval_sets"]["heldout"]["ours"]["n"] > 0


@pytest.mark.slow
def test_checker_verdicts_at_its_smallest(tmp_path):
    bench("bench/checker_verdicts.py", "--write", str(tmp_path / "verdicts.json"), timeout=1800)
    verdicts = json.loads((tmp_path / "verdicts.json").read_text())
    assert verdicts and any(key.startswith("eval/") for key in verdicts), list(verdicts)[:5]


@pytest.mark.slow
def test_cpu_side_at_its_smallest():
    done = bench("bench/cpu_side.py", "--parts", "checker,label,gpu", "--families", "processbench,degenerate", "--rows", "4", "--rollouts", "2",
                 "--unit", "2", "--gpu-rate", "40000", "--max-workers", "1", timeout=1200)  # fmt: skip
    assert "== 1. checker alone" in done.stdout and "== 2. the whole labeling path" in done.stdout
    assert re.search(r"verdicts and \d+ labelled steps per CPU-second", done.stdout), done.stdout[-3000:]


@pytest.mark.slow
def test_cluster_bench_at_its_smallest():
    """Starts a Ray head and a node (tests/ray_cluster.py), as make cluster does; no frozen node."""
    done = bench("bench/cluster.py", "--rows", "4", "--no-freeze", timeout=1800)
    assert re.search(r"^ray start --head: [\d.]+ s", done.stdout, re.M) and "labels and rollouts equal to one process" in done.stdout, done.stdout


@pytest.mark.slow
@pytest.mark.engine
def test_judge_at_its_smallest():
    done = bench("bench/judge.py", "--rows", "2", "--max-new-tokens", "32", "--critique-retries", "0", timeout=1200)
    assert re.search(r"^judged\s+: \d+", done.stdout, re.M) and re.search(r"^cost\s+: \d+ tokens", done.stdout, re.M), done.stdout


@pytest.mark.slow
@pytest.mark.engine
def test_prm_backends_at_its_smallest():
    done = bench("bench/prm_backends.py", "--problems", "1", "--n", "2", "--pairs", "1", timeout=1200)
    assert re.search(r"^ratio vllm/torch \(median of 1 pairs\): [\d.]+", done.stdout, re.M), done.stdout
    assert re.search(r"largest step-score difference between the backends: [\d.e+-]+", done.stdout), done.stdout


@pytest.mark.slow
@pytest.mark.engine
def test_reward_server_at_its_smallest():
    done = bench("bench/reward_server.py", "--clients", "1", "--requests", "2", "--prm-backend", "torch", timeout=900)
    assert re.search(r"^requests 2\s+errors 0\s+p50 [\d.]+ ms", done.stdout, re.M), done.stdout


def test_scale_store_at_its_smallest():
    """The store part alone (a test-double generator, no engine, no Ray): about 15 s on 2 cores, in `make test`. Its
    manifest rewrite at 10M solutions has 10M / --unit units: --unit 256 keeps it to one 17 MB manifest (--unit 8: 2 minutes)."""
    done = bench("bench/scale.py", "--parts", "store", "--solutions", "512", "--unit", "256", timeout=300)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [line["part"] for line in lines] == [
        "store (one process, test-double generator, commit records)",
        "store (one process, test-double generator, manifest rewrite per commit)",
        "manifest rewrite",
    ], lines
    assert all(line["manifest_bytes"] > 0 for line in lines) and lines[-1]["units_at_512"] == 2, lines


@pytest.mark.slow
@pytest.mark.engine
def test_scale_at_its_smallest():
    done = bench("bench/scale.py", "--solutions", "32", "--unit", "8", "--engine-rows", "4", "--engine-unit", "2", timeout=1800)
    parts = [json.loads(line)["part"] for line in done.stdout.splitlines() if line.startswith("{")]
    assert any(p.startswith("store") for p in parts) and any(p.startswith("ray") for p in parts) and "checker" in parts, parts
    assert "speed-up of 2 Ray workers over 1" in parts, parts


@pytest.mark.slow
def test_trainer_at_its_smallest():
    done = bench("bench/trainer.py", "--solutions", "4", "--epochs", "1", "--repeats", "1", "--batch-size", "2", "--max-length", "256",
                 timeout=1200)  # fmt: skip
    assert re.search(r"^\s*packed\s+[\d.]+\s+[\d.]+", done.stdout, re.M) and "packed vs padded, this run" in done.stdout, done.stdout


def test_the_trainer_bench_trains_the_epochs_it_times():
    """bench/trainer.py printed "N epochs" while `labeler train`'s --min-steps (300 by default) trained 4 solutions for
    150 epochs: the bench times --epochs, so it passes min_steps=0, as its --scale run does."""
    sys.path.insert(0, str(ROOT))
    from bench.trainer import parser, train_config

    args = parser().parse_args(["--solutions", "4", "--epochs", "1", "--batch-size", "2"])
    config = train_config(args, Path("/labels"), Path("/run"), Path("/backbone"), "packed")
    assert config.epochs == 1 and config.min_steps == 0 and config.batching == "packed"


def test_importing_a_bench_leaves_the_labeling_job_as_it_is():
    """bench/scale.py swapped the job's ShardStore and ProgressReporter for its timed ones when imported (as
    bench/review_app.py imports it): every later job in the same process, the suite's progress tests among them,
    printed no progress. The swap holds only while one of its runs labels."""
    import labeler.labeling.job as job
    from labeler.store.progress import ProgressReporter
    from labeler.store.shard_store import ShardStore

    sys.path.insert(0, str(ROOT))
    import bench.review_app  # noqa: F401  (imports bench.scale)
    import bench.scale

    assert job.ProgressReporter is ProgressReporter and job.ShardStore is ShardStore
    with bench.scale.instrumented():
        assert job.ProgressReporter is bench.scale.TimedProgress and job.ShardStore is bench.scale.TimedStore
    assert job.ProgressReporter is ProgressReporter and job.ShardStore is ShardStore
