"""The job's planning, commit and resume logic, on the deterministic test-double generator."""

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from labeler.checking.checker import AnswerChecker
from labeler.labeling.config import LabelConfig
from labeler.labeling.job import run_job
from workers.local_executor import LocalExecutor
from labeler.store.manifest import ConfigMismatchError, EngineChangeError
from tests.conftest import write_jsonl
from tests.fakes import WRONG_MARKER, Crash, CrashingGenerator, ScriptedGenerator

PROBLEMS = {f"What is {i} plus {i}?": str(2 * i) for i in range(1, 12)}


def input_rows() -> list[dict]:
    rows = []
    for k, (problem, answer) in enumerate(PROBLEMS.items()):
        first = f"{answer} is the sum." + (f" {WRONG_MARKER}" if k % 4 == 0 else "")
        rows.append({"id": f"q{k}", "problem": problem, "answer": answer, "steps": [first, "Check it.", f"The answer is: {answer}"]})
    rows.insert(3, {"id": "bad", "problem": "What is 1 plus 1?", "steps": ["x"]})  # no answer: rejected
    return rows


@pytest.fixture(scope="module")
def checker():
    with AnswerChecker(timeout_s=5) as checker:
        yield checker


@pytest.fixture
def dataset(tmp_path) -> Path:
    path = write_jsonl(tmp_path / "input.jsonl", input_rows())
    with open(path, "a") as handle:
        handle.write("{not json\n")  # malformed line: rejected, the job goes on
    return path


def config(dataset: Path, output: Path, **overrides) -> LabelConfig:
    settings = dict(input=str(dataset), output=str(output), model="scripted", rollouts=4, shard_size=3, seed=7)
    return LabelConfig(**{**settings, **overrides})


def run(cfg: LabelConfig, checker, generator=None, **kwargs):
    generator = generator or ScriptedGenerator(PROBLEMS)
    return run_job(cfg, executor=LocalExecutor(lambda: generator, checker), model_info={"name": "scripted"}, progress_enabled=False, **kwargs)


def read_labels(output: Path) -> list[dict]:
    return pq.read_table(output / "labels").sort_by("row_index").to_pylist()


def test_job_writes_labels_rollouts_rejected_and_manifest(dataset, tmp_path, checker):
    out = tmp_path / "out"
    summary = run(config(dataset, out), checker)
    labels = read_labels(out)
    assert [row["problem_id"] for row in labels] == [f"q{k}" for k in range(11)]
    assert summary.solutions == 11 and summary.steps == 33
    for row in labels:
        assert row["n_rollouts"] == [4, 4, 1]
        wrong_first = WRONG_MARKER in row["steps"][0]
        assert (row["n_correct"][0] == 0) == wrong_first
        assert row["first_error"] == (0 if wrong_first else -1)
    rollouts = pq.read_table(out / "rollouts").to_pylist()
    assert len(rollouts) == 11 * (4 + 4 + 1)
    rejected = pq.read_table(out / "rejected").to_pylist()
    assert sorted((r["row_index"], r["field"]) for r in rejected) == [(3, "answer"), (12, "row")]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["totals"]["units_committed"] == manifest["totals"]["units"] == 4
    assert manifest["totals"]["solutions"] == 11
    assert manifest["input"]["rows_read"] == 13 and manifest["input"]["rows_rejected"] == 2
    assert manifest["config"]["rollouts"] == 4 and manifest["config_hash"]
    assert {"prm_labeler", "pyarrow"} <= set(manifest["versions"])


def test_labels_read_with_datasets_as_is(dataset, tmp_path, checker):
    import datasets

    out = tmp_path / "out"
    run(config(dataset, out), checker)
    loaded = datasets.load_dataset("parquet", data_files=str(out / "labels" / "*.parquet"), split="train")
    assert loaded.num_rows == 11
    assert set(loaded.column_names) >= {"problem_id", "solution_id", "steps", "soft_labels", "hard_labels", "n_correct", "n_rollouts", "first_error"}


def test_rerun_of_a_finished_job_runs_nothing(dataset, tmp_path, checker):
    out = tmp_path / "out"
    run(config(dataset, out), checker)
    before = {p.name: p.stat().st_mtime_ns for p in (out / "labels").iterdir()}
    generator = ScriptedGenerator(PROBLEMS)
    summary = run(config(dataset, out), checker, generator)
    assert generator.calls == [] and summary.units_run_now == 0 and summary.solutions == 11
    assert {p.name: p.stat().st_mtime_ns for p in (out / "labels").iterdir()} == before


def test_crash_then_resume_gives_every_solution_exactly_once(dataset, tmp_path, checker):
    reference, out = tmp_path / "reference", tmp_path / "out"
    run(config(dataset, reference), checker)
    with pytest.raises(Crash):
        run(config(dataset, out), checker, CrashingGenerator(PROBLEMS, crash_on_call=3))
    committed = {p.name: p.read_bytes() for p in (out / "labels").iterdir()}
    assert len(committed) == 2
    # leftovers of a crash between shard rename and manifest commit, and a stray temp file
    (out / "labels" / "part-00002.parquet").write_bytes(b"partial")
    (out / "labels" / ".part-00003.parquet.tmp").write_bytes(b"partial")
    summary = run(config(dataset, out), checker)
    assert summary.units_run_now == 2
    for name, content in committed.items():
        assert (out / "labels" / name).read_bytes() == content  # committed shards untouched
    assert sorted(p.name for p in (out / "labels").iterdir()) == [f"part-{i:05d}.parquet" for i in range(4)]
    resumed, expected = read_labels(out), read_labels(reference)
    assert [r["solution_id"] for r in resumed] == [r["solution_id"] for r in expected]
    strip = lambda rows: [{k: v for k, v in r.items()} for r in rows]  # noqa: E731
    assert strip(resumed) == strip(expected)


def test_same_directory_with_other_settings_is_refused(dataset, tmp_path, checker):
    out = tmp_path / "out"
    run(config(dataset, out), checker)
    with pytest.raises(ConfigMismatchError, match="rollouts"):
        run(config(dataset, out, rollouts=2), checker)
    summary = run(config(dataset, out, rollouts=2), checker, overwrite=True)
    assert summary.units_run_now == 4
    assert read_labels(out)[0]["n_rollouts"] == [2, 2, 1]


def test_config_mismatch_lists_only_the_settings_that_changed(dataset, tmp_path, checker):
    out = tmp_path / "out"
    run(config(dataset, out), checker)
    # the manifest holds stop as [] and the config as (): equal values, not a change
    with pytest.raises(ConfigMismatchError, match=r"\(changed: rollouts: 4 -> 2\)"):
        run(config(dataset, out, rollouts=2), checker)
    with pytest.raises(ConfigMismatchError, match=r"\(changed: stop: \[\] -> \[\"x\"\]\)"):
        run(config(dataset, out, stop=("x",)), checker)


def test_engine_settings_do_not_block_resume(dataset, tmp_path, checker):
    """Requested engine settings may change as long as the engine resolves them alike (the test
    double's engine is float32 with a 2048-token context whatever is asked)."""
    out = tmp_path / "out"
    with pytest.raises(Crash):
        run(config(dataset, out), checker, CrashingGenerator(PROBLEMS, crash_on_call=3))
    summary = run(config(dataset, out, dtype="float32", max_model_len=512), checker)
    assert summary.units_run_now == 2


def test_changed_input_is_refused(dataset, tmp_path, checker):
    out = tmp_path / "out"
    run(config(dataset, out), checker)
    rows = input_rows()
    rows[0]["steps"][1] = "Another check."
    changed = write_jsonl(dataset, rows)
    with pytest.raises(ConfigMismatchError, match="different input"):
        run(config(changed, out), checker)


def test_changed_input_file_is_refused_even_when_its_rows_plan_alike(dataset, tmp_path, checker):
    out = tmp_path / "out"
    run(config(dataset, out), checker)
    with open(dataset, "a") as handle:
        handle.write("{another bad line\n")  # one more rejected row: the same planned units, another input
    with pytest.raises(ConfigMismatchError, match=f"different input: {dataset} has changed since the job started"):
        run(config(dataset, out), checker)


def manifest_of(output: Path) -> dict:
    return json.loads((output / "manifest.json").read_text())


def half_done(dataset: Path, out: Path, checker, **overrides) -> LabelConfig:
    """A job killed after two of its four units committed."""
    cfg = config(dataset, out, **overrides)
    with pytest.raises(Crash):
        run(cfg, checker, CrashingGenerator(PROBLEMS, crash_on_call=3))
    assert manifest_of(out)["totals"]["units_committed"] == 2
    return cfg


def engine(dtype="float32", max_model_len=2048, **kwargs) -> ScriptedGenerator:
    generator = ScriptedGenerator(PROBLEMS, **kwargs)
    generator.dtype, generator.max_model_len = dtype, max_model_len
    return generator


def test_manifest_and_every_unit_record_what_labelled_them(dataset, tmp_path, checker):
    out = tmp_path / "out"
    run(config(dataset, out), checker)
    manifest = manifest_of(out)
    record = manifest["engine_records"][manifest["engine_record"]]
    assert record["model"] == "scripted-test-double" and record["model_revision"] == "scripted"
    assert (record["dtype"], record["max_model_len"]) == ("float32", 2048)
    from labeler.checking.checker import CHECKER_VERSION

    assert (record["checker_version"], record["checker_timeout"]) == (CHECKER_VERSION, 5.0)
    assert {"prm-labeler", "torch", "transformers", "math-verify", "sympy"} <= set(record["versions"])
    assert {unit["engine_record"] for unit in manifest["units"]} == {manifest["engine_record"]}


def test_resume_on_an_engine_that_resolves_otherwise_is_refused_one_line_per_difference(dataset, tmp_path, checker):
    out = tmp_path / "out"
    cfg = half_done(dataset, out, checker)
    generator = engine(dtype="bfloat16", max_model_len=1024)
    with pytest.raises(EngineChangeError) as refused:
        run(cfg, checker, generator)
    assert str(refused.value).splitlines()[1:] == ['  dtype: "float32" -> "bfloat16"', "  max_model_len: 2048 -> 1024"]
    assert generator.calls == []  # refused when the engine started, before it labelled anything
    assert isinstance(refused.value, ConfigMismatchError)  # the CLI's exit code 2
    assert manifest_of(out)["totals"]["units_committed"] == 2


def test_resume_with_another_checker_timeout_is_refused(dataset, tmp_path, checker):
    out = tmp_path / "out"
    cfg = half_done(dataset, out, checker)
    with AnswerChecker(timeout_s=2) as other, pytest.raises(EngineChangeError, match=r"\n  checker_timeout: 5.0 -> 2.0$"):
        run(cfg, other)


def test_allowed_engine_change_is_recorded_per_unit(dataset, tmp_path, checker):
    out = tmp_path / "out"
    cfg = half_done(dataset, out, checker)
    first = manifest_of(out)["engine_record"]
    summary = run(cfg, checker, engine(dtype="bfloat16"), allow_engine_change=True)
    assert summary.units_run_now == 2
    manifest = manifest_of(out)
    assert manifest["engine_record"] == first  # the job's record stays that of its first units
    records = manifest["engine_records"]
    by_unit = [records[unit["engine_record"]]["dtype"] for unit in manifest["units"]]
    assert by_unit == ["float32", "float32", "bfloat16", "bfloat16"]


def test_a_new_engine_before_any_commit_becomes_the_jobs(dataset, tmp_path, checker):
    out = tmp_path / "out"
    with pytest.raises(Crash):
        run(config(dataset, out), checker, CrashingGenerator(PROBLEMS, crash_on_call=1))
    assert manifest_of(out)["engine_records"]  # recorded when the engine started
    run(config(dataset, out), checker, engine(dtype="bfloat16"))
    manifest = manifest_of(out)
    assert [record["dtype"] for record in manifest["engine_records"].values()] == ["bfloat16"]


def test_a_job_from_before_engine_records_resumes_only_when_allowed(dataset, tmp_path, checker):
    out = tmp_path / "out"
    cfg = half_done(dataset, out, checker)
    manifest = manifest_of(out)
    for key in ("engine_record", "engine_records"):
        del manifest[key]
    for unit in manifest["units"]:
        unit.pop("engine_record", None)
    (out / "manifest.json").write_text(json.dumps(manifest))
    for record in (out / "commits").iterdir():
        record.unlink()  # already folded into the manifest by the crash run's compaction
    with pytest.raises(EngineChangeError, match=r'\n  dtype: \(not recorded\) -> "float32"\n'):
        run(cfg, checker)
    assert run(cfg, checker, allow_engine_change=True).units_run_now == 2


def test_problem_only_rows_get_sampled_solutions(tmp_path, checker):
    rows = [{"problem": problem, "answer": answer} for problem, answer in list(PROBLEMS.items())[:3]]
    dataset = write_jsonl(tmp_path / "problems.jsonl", rows)
    generator = ScriptedGenerator(PROBLEMS, sampled_solution="First we add.\n\nThen we check.\n\nThe answer is: {answer}")
    out = tmp_path / "out"
    run(config(dataset, out, preset="math", solutions_per_problem=2, shard_size=4), checker, generator)
    labels = read_labels(out)
    assert len(labels) == 6
    assert len({r["solution_id"] for r in labels}) == 6
    assert all(r["steps"] == ["First we add.", "Then we check.", r["steps"][2]] for r in labels)
    assert all(r["n_rollouts"] == [4, 4, 1] for r in labels)
    manifest = json.loads((out / "manifest.json").read_text())
    # each sampled solution carries the tokens that sampled it, so the labels add up to the manifest
    assert all(r["solution_tokens"] > 0 and r["generated_tokens"] >= r["solution_tokens"] and not r["solution_truncated"] for r in labels)
    assert manifest["totals"]["generated_tokens"] == sum(r["generated_tokens"] for r in labels)
    assert manifest["totals"]["rejected_tokens"] == 0


def test_solutions_the_engine_cannot_run_are_rejected_not_dropped(dataset, tmp_path, checker):
    out = tmp_path / "out"
    generator = ScriptedGenerator(PROBLEMS, fail_when="6 is the sum")
    run(config(dataset, out), checker, generator)
    labels = read_labels(out)
    assert len(labels) == 10
    rejected = pq.read_table(out / "rejected").to_pylist()
    generation = [r for r in rejected if r["stage"] == "generation"]
    assert len(generation) == 1 and generation[0]["problem_id"] == "q2" and "engine error" in generation[0]["reason"]


def test_manifest_records_shared_prefix_savings(tmp_path, checker):
    rows = [
        {"id": f"q{k}", "problem": "What is 1 plus 1?", "answer": "2", "steps": ["1 plus 1 is 2.", ending, "The answer is: 2"]}
        for k, ending in enumerate(["Check it.", "Double-check it."])
    ]
    dataset = write_jsonl(tmp_path / "same.jsonl", rows)
    out = tmp_path / "out"
    run(config(dataset, out), checker)
    totals = json.loads((out / "manifest.json").read_text())["totals"]
    assert (totals["prefix_probes"], totals["prefix_requests"]) == (4, 3)  # the shared first step is rolled out once


def test_the_summary_counts_labelled_and_unlabelled_steps_apart(tmp_path, checker):
    from labeler.cli.label import _format_summary
    from tests.fakes import CUT_MARKER

    rows = input_rows()
    rows[0]["steps"][0] += f" {CUT_MARKER}!"  # every rollout from these prefixes is cut: those steps have no label
    out = tmp_path / "out"
    summary = run(config(write_jsonl(tmp_path / "input.jsonl", rows), out), checker)
    hard = [label for row in read_labels(out) for label in row["hard_labels"]]
    assert summary.steps == len(hard) and summary.steps_labelled == sum(label is not None for label in hard) < len(hard)
    unlabelled = summary.steps - summary.steps_labelled
    assert f"steps              : {summary.steps} ({summary.steps_labelled} labelled, {unlabelled} unlabelled)" in _format_summary(summary)


@pytest.mark.parametrize("allow_engine_change", [False, True])
def test_resuming_an_output_of_another_schema_version_is_refused(dataset, tmp_path, checker, allow_engine_change):
    from schemas.tables import SCHEMA_VERSION

    out = tmp_path / "out"
    cfg = half_done(dataset, out, checker)
    manifest = manifest_of(out)
    manifest["schema_version"] = "1.4"
    (out / "manifest.json").write_text(json.dumps(manifest))
    generator = ScriptedGenerator(PROBLEMS)
    with pytest.raises(ConfigMismatchError, match=rf"schema 1\.4.*{SCHEMA_VERSION}.*another --output.*--overwrite"):
        run(cfg, checker, generator, allow_engine_change=allow_engine_change)
    assert generator.calls == [] and manifest_of(out)["totals"]["units_committed"] == 2
    assert run(cfg, checker, overwrite=True).units_run_now == 4


def test_an_output_of_labels_schema_1_5_resumes_under_1_6(dataset, tmp_path, checker, capsys):
    """1.6 changed only first_error's rule, and the readers recompute it for older rows: an interrupted 1.5 job
    resumes (its committed units kept, a one-line notice), its new shards are written 1.6."""
    import pyarrow as pa

    from labeler.store.reader import read_labels_table
    from schemas.tables import SCHEMA_VERSION, first_error

    out = tmp_path / "out"
    cfg = half_done(dataset, out, checker)
    manifest = manifest_of(out)
    manifest["schema_version"] = "1.5"
    (out / "manifest.json").write_text(json.dumps(manifest))
    old_shards = sorted((out / "labels").glob("*.parquet"))
    for shard in old_shards:  # as 1.5 wrote them: first_error -1 whatever the steps say
        table = pq.read_table(shard)
        table = table.set_column(table.schema.get_field_index("schema_version"), "schema_version", pa.array(["1.5"] * table.num_rows))
        table = table.set_column(table.schema.get_field_index("first_error"), table.schema.field("first_error"), pa.array([-1] * table.num_rows, pa.int32()))
        pq.write_table(table, shard)
    capsys.readouterr()
    assert run(cfg, checker).units_run_now == 2
    assert capsys.readouterr().err.count("schema 1.5") == 1
    assert manifest_of(out)["schema_version"] == SCHEMA_VERSION
    table = read_labels_table(out)
    versions = table.column("schema_version").to_pylist()
    assert versions.count("1.5") > 0 and versions.count(SCHEMA_VERSION) > 0
    assert table.column("first_error").to_pylist() == [first_error(h) for h in table.column("hard_labels").to_pylist()]


def test_a_judge_output_of_an_older_labels_schema_still_resumes():
    """A judge job writes judgments (JUDGMENTS_SCHEMA_VERSION, unchanged by labels 1.5): the labels schema its
    manifest recorded must not refuse its resume; a labeling, import or consensus output of another one is refused."""
    from labeler.store.manifest import check_same_schema

    old = {"schema_version": "1.4"}
    check_same_schema(old | {"job": "judge"}, "out", "judge")
    for kind in (None, "import", "consensus"):
        with pytest.raises(ConfigMismatchError, match="schema 1.4"):
            check_same_schema(old | ({"job": kind} if kind else {}), "out", kind)
        check_same_schema({"schema_version": "1.5"} | ({"job": kind} if kind else {}), "out", kind)  # only first_error's rule since


def test_the_executor_starts_the_checker_before_loading_the_engine(dataset, tmp_path):
    """Its worker pool starts (and proves itself) once, before the model loads, not at the first check beside a
    generating engine (issue 25)."""
    events = []

    class Recorded(AnswerChecker):
        def start(self):
            events.append("checker")
            super().start()
            events.append(f"proven {self._pool.proven}")

    def load_engine():
        events.append("engine")
        return ScriptedGenerator(PROBLEMS)

    with Recorded(timeout_s=5, workers=1) as checker:
        run_job(config(dataset, tmp_path / "out"), executor=LocalExecutor(load_engine, checker), model_info={"name": "scripted"}, progress_enabled=False)
        assert checker._pool.self_tests == 1  # noqa: SLF001
    assert events[:3] == ["checker", "proven True", "engine"]


@pytest.mark.parametrize("final_step", ["check", "rollouts"])
def test_the_dry_run_and_the_progress_plan_the_rollouts_exhaustive_samples(tmp_path, checker, final_step):
    """One count for both: N per prefix, the last step left out only where its stated answer is checked (a last step
    that states no answer, or a PRM800K trajectory that stops early, is rolled out)."""
    from labeler.labeling.estimate import estimate
    from labeler.labeling.job import plan_job, planned_rollouts

    rows = input_rows()[:3]
    rows.append({"id": "open", "problem": "What is 2 plus 2?", "answer": "4", "steps": ["4 is the sum.", "Check it."]})  # no answer stated
    cfg = config(write_jsonl(tmp_path / "in.jsonl", rows), tmp_path / "out", final_step=final_step)
    plan = plan_job(cfg)

    class Counting(ScriptedGenerator):
        sampled = 0

        def generate(self, requests, sampling):
            self.sampled += sum(request.n for request in requests)
            return super().generate(requests, sampling)

    generator = Counting(PROBLEMS)
    summary = run(cfg, checker, generator)
    planned = estimate(plan, cfg)
    assert generator.sampled == planned_rollouts(plan.units, cfg) == planned.max_rollouts - planned.final_checks  # generated
    assert summary.rollouts == planned.max_rollouts  # as the job counts them: each final check counts as one


def test_a_job_whose_solutions_are_mostly_one_step_says_so_once_as_it_starts(tmp_path, checker, capsys):
    """As --dry-run does (the same words): a one-step solution gets only an outcome label."""
    from labeler.labeling.estimate import estimate
    from labeler.labeling.job import plan_job

    rows = [{"id": f"q{k}", "problem": p, "answer": a, "steps": [f"The answer is: {a}"]} for k, (p, a) in enumerate(list(PROBLEMS.items())[:4])]
    cfg = config(write_jsonl(tmp_path / "in.jsonl", rows), tmp_path / "out")
    [expected] = estimate(plan_job(cfg), cfg).warnings
    capsys.readouterr()
    run(cfg, checker)
    err = capsys.readouterr().err
    assert err.count("4 of 4 solutions are one step under --split") == 1 and expected in err
