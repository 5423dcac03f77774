"""The Python API (`from labeler import Labeler`): labels in memory, the same as a job's shards."""

import os
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from labeler import Labeler
from schemas.tables import LABELS_SCHEMA
from tests.conftest import write_jsonl
from tests.fakes import WRONG_MARKER, ScriptedGenerator

PROBLEMS = {f"What is {i} times 3?": str(3 * i) for i in range(1, 8)}
API_PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "python-api.md"  # the docs site's Python API page


def rows() -> list[dict]:
    result = []
    for k, (problem, answer) in enumerate(PROBLEMS.items()):
        first = f"Multiply by 3 to get {answer}." + (f" {WRONG_MARKER}" if k % 3 == 0 else "")
        result.append({"id": f"q{k}", "problem": problem, "answer": answer, "steps": [first, "Check it.", f"The answer is: {answer}"]})
    result.append({"id": "no-answer", "problem": "What is 1 times 3?", "steps": ["3."]})  # rejected: no reference answer
    return result


def without_run_specific(table) -> list[dict]:
    """Every column but config_hash, whose settings include the input spec (a file for the job, memory here)."""
    return table.drop_columns(["config_hash"]).sort_by("solution_id").to_pylist()


def test_label_returns_the_labels_a_job_writes(tmp_path):
    settings = dict(rollouts=4, shard_size=3, seed=5, strategy="exhaustive")
    with Labeler(model="scripted", generator=ScriptedGenerator(PROBLEMS), **settings) as labeler:
        tables = labeler.label_tables(rows())
        summary = labeler.run_job(input=str(write_jsonl(tmp_path / "in.jsonl", rows())), output=str(tmp_path / "job"))
    assert tables.labels.schema.equals(LABELS_SCHEMA, check_metadata=False)
    assert tables.labels.num_rows == len(PROBLEMS) == summary.solutions
    assert without_run_specific(tables.labels) == without_run_specific(pq.read_table(tmp_path / "job" / "labels"))
    assert tables.rollouts.num_rows == pq.read_table(tmp_path / "job" / "rollouts").num_rows
    assert [(r["row_index"], r["field"]) for r in tables.rejected.to_pylist()] == [(len(PROBLEMS), "answer")]
    first_errors = {row["problem_id"]: row["first_error"] for row in tables.labels.to_pylist()}
    assert first_errors["q0"] == 0 and first_errors["q1"] == -1  # the WRONG marker sinks the first step


def test_label_logs_rejected_rows_and_unknown_settings_are_refused(caplog):
    with Labeler(model="scripted", generator=ScriptedGenerator(PROBLEMS), rollouts=2) as labeler:
        labels = labeler.label(rows()[-2:])
    assert labels.num_rows == 1 and "1 rows rejected" in caplog.text
    with pytest.raises(TypeError, match="rolouts"):
        Labeler(model="scripted", rolouts=2)
    with pytest.raises(TypeError, match="output"):
        Labeler(model="scripted", output="somewhere")


def test_no_rows_give_an_empty_table_with_the_schema():
    with Labeler(model="scripted", generator=ScriptedGenerator(PROBLEMS)) as labeler:
        labels = labeler.label([])
    assert labels.num_rows == 0 and labels.schema.equals(LABELS_SCHEMA, check_metadata=False)


def test_run_job_refuses_another_engine_unless_allowed(tmp_path):
    from labeler.store.manifest import EngineChangeError
    from tests.fakes import Crash, CrashingGenerator

    data, out = str(write_jsonl(tmp_path / "in.jsonl", rows())), str(tmp_path / "job")
    with Labeler(model="scripted", generator=CrashingGenerator(PROBLEMS, crash_on_call=2), shard_size=2) as labeler:
        with pytest.raises(Crash):
            labeler.run_job(input=data, output=out)
    other = ScriptedGenerator(PROBLEMS)
    other.dtype = "bfloat16"
    with Labeler(model="scripted", generator=other, shard_size=2) as labeler:
        with pytest.raises(EngineChangeError, match='dtype: "float32" -> "bfloat16"'):
            labeler.run_job(input=data, output=out)
        assert labeler.run_job(input=data, output=out, allow_engine_change=True).units_run_now == 3


def readme_example() -> str:
    text = API_PAGE.read_text()
    return re.search(r"```python\n(.*?)```", text, re.S).group(1)


@pytest.mark.engine
def test_readme_example_runs_on_the_tiny_model(tiny_model_dir, tiny_engine, capsys):
    """The docs' Python API example as it is, but on the tiny model (its engine shared with the other tests)."""
    code = readme_example()
    assert "Labeler(" in code
    code = code.replace("Labeler(", "Labeler(model=TINY_MODEL, generator=TINY_ENGINE, ", 1)
    namespace = {"TINY_MODEL": str(tiny_model_dir), "TINY_ENGINE": tiny_engine}
    exec(compile(code, str(API_PAGE), "exec"), namespace)
    labels = namespace["labels"]
    assert labels.num_rows == 2 and labels.schema.equals(LABELS_SCHEMA, check_metadata=False)
    for row in labels.to_pylist():
        sampled = [n + cut for n, cut in zip(row["n_rollouts"], row["n_truncated"])]
        assert len(row["soft_labels"]) == len(row["steps"]) and sampled[:-1] == [4] * (len(row["steps"]) - 1)
        assert row["model"] == str(tiny_model_dir) and row["config_hash"]
    assert "first_error" in capsys.readouterr().out


def without_vllm_logging_switches() -> dict[str, str]:
    """This process's environment less what decides where vLLM logs: a `labeler` command run earlier in this
    process (tests call labeler.cli.main) set VLLM_CONFIGURE_LOGGING and VLLM_LOGGING_CONFIG_PATH."""
    from workers.engine_logging import VLLM_LOGGING_SWITCHES

    return {key: value for key, value in os.environ.items() if key not in VLLM_LOGGING_SWITCHES and not key.startswith("VLLM_LOGGING")}


API_CALL = """
import sys
from labeler import Labeler

with Labeler(model=sys.argv[1], rollouts=2, max_new_tokens=8, max_model_len=512, dtype="float32") as labeler:
    labels = labeler.label([{"problem": "What is 2 + 2?", "answer": "4", "steps": ["2 + 2 = 4.", "The answer is: 4"]}])
print("labelled", labels.num_rows)
"""


# make faults, not make test: make test keeps vLLM's logging set up after the API (its "after" case, below) and the real
# engine through the API (the docs' example above).
@pytest.mark.engine
@pytest.mark.slow
def test_the_api_prints_nothing_on_stdout_but_what_its_caller_prints(tiny_model_dir, tmp_path):
    """vLLM logs to stdout by default (its INFO lines, from this process and the engine's): a caller's
    stdout must hold only its own output; the libraries' logs go to stderr."""
    import os
    import subprocess
    import sys

    environment = without_vllm_logging_switches()
    result = subprocess.run(
        [sys.executable, "-c", API_CALL, str(tiny_model_dir)], capture_output=True, text=True, timeout=600, env=environment, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout == "labelled 1\n", result.stdout[-3000:]
    assert "INFO" in result.stderr  # vLLM's log, at its own level, where a library's log belongs


LOG_CALL = """
import sys
from vllm.config.logging import LoggingConfig
from vllm.logger import configure_logging, init_logger

if sys.argv[1] == "before":
    configure_logging(LoggingConfig())  # a caller that started an engine of its own first: vLLM's handler is set, on stdout
from labeler import Labeler
from tests.fakes import ScriptedGenerator

with Labeler(model="scripted", generator=ScriptedGenerator({})) as labeler:
    configure_logging(LoggingConfig())  # what vLLM does as an engine starts, in this process and in the engine's
    init_logger("vllm.engine").info("an engine log line")
print("the caller's result")
"""


def test_vllm_logs_on_stderr_whether_its_logging_was_set_up_before_the_api_or_after(tmp_path):
    import os
    import subprocess
    import sys

    environment = without_vllm_logging_switches()
    environment["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[1]), environment.get("PYTHONPATH", "")])
    # both at once: each is mostly vLLM's import, about 8 s of one core
    callers = {
        started: subprocess.Popen([sys.executable, "-c", LOG_CALL, started], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment, cwd=tmp_path)
        for started in ("before", "after")
    }  # fmt: skip
    try:
        for started, caller in callers.items():
            stdout, stderr = caller.communicate(timeout=300)
            assert caller.returncode == 0, f"{started}: {stderr[-3000:]}"
            assert stdout == "the caller's result\n", started
            assert "an engine log line" in stderr, started
    finally:  # a failure or a timeout leaves no caller running
        for caller in callers.values():
            if caller.poll() is None:
                caller.kill()
                caller.wait()
