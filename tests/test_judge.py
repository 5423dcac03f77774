"""`labeler judge` on a test-double judge (tests/fakes.py: ScriptedJudge), for the logic: votes and their
majority, critiques resampled with new seeds then rejected with the reason, inputs (labels outputs,
ProcessBench rows), the template flag, resume after a crash, Ray workers, and eval --judgments."""

import json
from functools import partial
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from labeler.cli import main
from labeler.judging.config import JudgeConfig
from labeler.judging.job import run_judge
from labeler.judging.prompts import critique_prompt
from labeler.judging.unit import critique_seed
from labeler.labeling.job import plan_job
from labeler.labeling.config import LabelConfig
from labeler.store.manifest import ConfigMismatchError, load_manifest
from tests.conftest import shared_data, write_jsonl
from tests.fakes import CUT_MARKER, Crash, ScriptedJudge
from tests.synthetic_labels import labels_row, write_labels
from workers.local_executor import LocalExecutor

ROWS = 8


def problem(i: int) -> str:
    return f"Tom has {i} apples and buys 3 more. How many apples does he have?"


@pytest.fixture
def dataset(tmp_path) -> Path:
    rows = [{"id": f"r{i}", "problem": problem(i), "steps": [f"Tom starts with {i}.", f"He buys 3: {i} + 3 = {i + 3}.", f"The answer is: {i + 3}"]}
            for i in range(ROWS)]  # fmt: skip
    return write_jsonl(tmp_path / "in.jsonl", rows)


def judge(dataset, out, script=None, judge_model=None, **settings):
    config = JudgeConfig(input=str(dataset), output=str(out), model="scripted-judge", **({"shard_size": 2} | settings))
    model = judge_model or ScriptedJudge(script)
    summary = run_judge(config, executor=LocalExecutor(lambda: model, None), model_info={"name": "scripted"}, progress_enabled=False)
    return summary, model


def judgments(out: Path) -> dict[str, dict]:
    return {row["problem_id"]: row for row in pq.read_table(out / "judgments").to_pylist()}


def rejected(out: Path) -> list[dict]:
    folder = out / "rejected"
    return [row for path in sorted(folder.glob("part-*.parquet")) for row in pq.read_table(path).to_pylist()]


def test_votes_give_their_majority_and_agreement_with_seeds_from_the_prompt(dataset, tmp_path):
    def script(text, seed):  # r0: all -1; r1: two votes of three name step 1; others: whatever the seed says
        if text == problem(0):
            return "All fine.\n\\boxed{-1}"
        if text == problem(1):
            return f"\\boxed{{{1 if seed % 3 else 2}}}"
        return f"Paragraph {seed % 3}"

    out = tmp_path / "out"
    summary, model = judge(dataset, out, script, votes=5)
    rows = judgments(out)
    assert summary.solutions == ROWS and summary.votes == 5 and summary.rejected_rows == 0
    assert rows["r0"]["critique_indices"] == [-1] * 5 and rows["r0"]["first_error"] == -1 and rows["r0"]["agreement"] == 1.0
    for row in rows.values():
        prompt = critique_prompt(JudgeConfig(input="x", output="o", model="m").template, row["problem"], row["steps"])
        assert row["critique_seeds"] == [critique_seed(0, prompt, v, 0) for v in range(5)]  # vote v, first sample
        counts = {index: row["critique_indices"].count(index) for index in row["critique_indices"]}
        assert row["agreement"] == max(counts.values()) / 5
        assert row["critique_samples"] == [1] * 5 and len(row["critiques"]) == 5
        assert (row["model"], row["votes"], row["seed"], row["schema_version"]) == ("scripted-judge", 5, 0, "1.0")
    assert len(set(model.seeds)) == len(model.seeds) == 5 * ROWS
    assert model.calls == [10] * (ROWS // 2)  # one generate call per unit, every vote in it
    manifest = load_manifest(out)
    assert manifest["job"] == "judge" and manifest["totals"]["rollouts"] == 5 * ROWS  # its critiques
    assert {row["template_hash"] for row in rows.values()} == {JudgeConfig(input="x", output="o", model="m").template_hash}


def test_unreadable_critiques_are_resampled_with_new_seeds_then_rejected_with_the_reason(dataset, tmp_path):
    def script(text, seed):
        if text == problem(2):
            return "I cannot decide."  # never readable
        if text == problem(3):
            return "Let me go through it very carefully " + CUT_MARKER  # always cut by the budget
        if text == problem(4):
            return "\\boxed{1}" if seed % 4 == 0 else "hmm"  # readable for some seeds only
        return "\\boxed{-1}"

    out = tmp_path / "out"
    summary, model = judge(dataset, out, script, votes=3, critique_retries=12)
    rows = judgments(out)
    assert sorted(rows) == [f"r{i}" for i in range(ROWS) if i not in (2, 3)]  # the job went on
    assert max(rows["r4"]["critique_samples"]) > 1, "some vote of r4 was resampled"
    for samples, seed in zip(rows["r4"]["critique_samples"], rows["r4"]["critique_seeds"]):
        assert seed % 4 == 0 and seed in model.seeds  # the sample kept is the readable one
    prompt = critique_prompt(JudgeConfig(input="x", output="o", model="m").template, rows["r4"]["problem"], rows["r4"]["steps"])
    assert rows["r4"]["critique_seeds"][0] == critique_seed(0, prompt, 0, rows["r4"]["critique_samples"][0] - 1)
    reasons = {row["problem_id"]: row for row in rejected(out)}
    assert sorted(reasons) == ["r2", "r3"]
    assert reasons["r2"]["stage"] == "judge" and reasons["r2"]["field"] == "critique"
    assert "critique 1 of 3 could not be read in 13 samples (3 of its 3 votes alike); the last: no \\boxed{}, and its last line states no verdict: 'I cannot decide.'" in reasons["r2"]["reason"]
    assert "cut by its token budget" in reasons["r3"]["reason"]
    assert summary.rejected_rows == 2 and summary.critique_resamples == summary.critiques - 3 * ROWS
    assert load_manifest(out)["totals"]["rejected_in_units"] == 2


def test_a_stray_number_is_no_verdict_the_critique_is_resampled_and_the_reason_reaches_rejected(dataset, tmp_path):
    def script(text, seed):
        if text == problem(1):  # a box around a computed total, then another paragraph named: never read
            return "The correct total is \\boxed{1}. The earliest error is in paragraph 2."
        if text == problem(2):  # a paragraph found correct is not an error at it; a later sample states its verdict
            return "Paragraph 1 is correct." if seed % 2 else "The earliest error is in paragraph 1."
        return "\\boxed{-1}"

    out = tmp_path / "out"
    summary, _ = judge(dataset, out, script, votes=1, critique_retries=6)
    rows = judgments(out)
    assert "r1" not in rows and rows["r2"]["critique_indices"] == [1] and rows["r2"]["critique_seeds"][0] % 2 == 0
    [reason] = [row["reason"] for row in rejected(out)]
    assert reason.startswith("solution ") and "critique 1 of 1 could not be read in 7 samples" in reason
    assert "it contradicts itself: its last \\boxed{} holds 1 and its closing verdict names paragraph 2" in reason


def test_a_prompt_too_long_for_the_context_is_rejected_and_the_rest_judged(dataset, tmp_path):
    summary, _ = judge(dataset, tmp_path / "out", judge_model=ScriptedJudge(too_long=problem(5)))
    [row] = rejected(tmp_path / "out")
    assert row["problem_id"] == "r5" and row["field"] == "steps" and "the model's context is 2048" in row["reason"]
    assert summary.solutions == ROWS - 1


def test_a_labels_output_keeps_its_solution_ids_and_processbench_rows_get_labelings_ids(tmp_path):
    rows = [labels_row("p1", "sampled-7f3a", "What is 2 + 2?", ["2 + 2 = 5.", "The answer is: 5"], [0.0, 0.0], [False, False]),
            labels_row("p2", "given-91bc", "What is 3 + 3?", ["3 + 3 = 6.", "The answer is: 6"], [1.0, 1.0], [True, True])]  # fmt: skip
    labels = write_labels(tmp_path / "labels-job", rows)
    judge(labels, tmp_path / "from-labels")
    found = judgments(tmp_path / "from-labels")
    assert {p: r["solution_id"] for p, r in found.items()} == {"p1": "sampled-7f3a", "p2": "given-91bc"}
    assert {r["source"] for r in found.values()} == {"labels"}

    processbench = shared_data("processbench/gsm8k.jsonl")
    subset = write_jsonl(tmp_path / "gsm8k.jsonl", [json.loads(line) for line in processbench.read_text().splitlines()[:6]])
    judge(subset, tmp_path / "from-rows")
    planned = plan_job(LabelConfig(input=str(subset), output="unused", model="m"))
    labeling_ids = {row.source.problem_id: row.given_solution().solution_id for unit in planned.units for row in unit.rows}
    assert {p: r["solution_id"] for p, r in judgments(tmp_path / "from-rows").items()} == labeling_ids


def test_rows_without_steps_are_rejected_and_rows_without_an_answer_are_judged(tmp_path):
    dataset = write_jsonl(tmp_path / "in.jsonl", [
        {"id": "a", "problem": "What is 1 + 1?", "steps": ["1 + 1 = 2.", "The answer is: 2"]},  # no answer: fine
        {"id": "b", "problem": "What is 2 + 2?", "solution": ""},
        {"id": "c", "problem": "What is 3 + 3?", "steps": ["3 + 3 = 6."], "answer": "6"},
    ])  # fmt: skip
    summary, _ = judge(dataset, tmp_path / "out", preset="processbench")
    assert sorted(judgments(tmp_path / "out")) == ["a", "c"]
    [row] = pq.read_table(tmp_path / "out" / "rejected" / "input.parquet").to_pylist()
    assert row["row_index"] == 1 and row["field"] == "steps" and row["stage"] == "input"


class CrashingJudge(ScriptedJudge):
    """Dies (like a killed process: no executor retries it) on its n-th generate call."""

    def __init__(self, crash_on_call: int):
        super().__init__()
        self.crash_on_call = crash_on_call

    def generate(self, requests, sampling):
        if len(self.calls) + 1 == self.crash_on_call:
            raise Crash("killed")
        return super().generate(requests, sampling)


def test_a_crash_mid_job_then_a_rerun_judges_every_solution_exactly_once(dataset, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(Crash):
        judge(dataset, out, judge_model=CrashingJudge(crash_on_call=3), votes=2)
    first = load_manifest(out)
    committed = [unit for unit in first["units"] if unit["state"] == "committed"]
    assert 1 <= len(committed) < ROWS // 2
    shards = {unit["files"]["judgments"]: (out / unit["files"]["judgments"]).read_bytes() for unit in committed}
    summary, model = judge(dataset, out, votes=2)
    assert summary.units_run_now == ROWS // 2 - len(committed) and summary.solutions == ROWS
    assert len(model.calls) == summary.units_run_now  # committed units were not judged again
    assert sorted(judgments(out)) == [f"r{i}" for i in range(ROWS)]
    for name, content in shards.items():
        assert (out / name).read_bytes() == content
    fresh, _ = judge(dataset, tmp_path / "fresh", votes=2)
    assert pq.read_table(out / "judgments").to_pylist() == pq.read_table(tmp_path / "fresh" / "judgments").to_pylist()


def test_a_judge_job_refuses_other_settings_and_a_labeling_output(dataset, tmp_path):
    out = tmp_path / "out"
    judge(dataset, out)
    with pytest.raises(ConfigMismatchError, match="changed: votes: 1 -> 3"):
        judge(dataset, out, votes=3)
    labels = write_labels(tmp_path / "labels", [labels_row("p", "s", "Q", ["a"], [1.0], [True])])
    from labeler.store.shard_store import ShardStore

    store = ShardStore(labels)  # a labeling job's manifest, without the "job" key
    from labeler.store.manifest import new_manifest

    store.start(new_manifest(config={}, config_hash="h", plan_hash="p", versions={}, model={}, input_info={}, units=[]))
    with pytest.raises(ConfigMismatchError, match="holds the output of `labeler label`, not of `labeler judge`"):
        judge(dataset, labels)


def write_template(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "template.txt"
    path.write_text(text)
    return path


def test_the_template_flag_refuses_a_template_without_its_placeholders(dataset, tmp_path, capsys):
    base = ["judge", "--input", str(dataset), "--output", str(tmp_path / "out"), "--model", "/nowhere"]
    assert main([*base, "--prompt-template", str(write_template(tmp_path, "Check {problem} please."))]) == 2
    assert "--prompt-template" in (error := capsys.readouterr().err) and "no {paragraphs}" in error
    assert main([*base, "--prompt-template", str(tmp_path / "missing.txt")]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert main([*base, "--votes", "0"]) == 2
    assert "--votes must be >= 1" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # refused before any engine or output


def test_a_template_of_ones_own_is_what_the_judge_sees_and_is_in_the_config_hash(dataset, tmp_path):
    template = "Q: {problem}\nSteps:\n{paragraphs}\nLast one is {last_index}. Box the first wrong one."
    seen = []

    def script(text, seed):
        return "\\boxed{-1}"

    class Recording(ScriptedJudge):
        def generate(self, requests, sampling):
            seen.extend(r.user_message for r in requests)
            return super().generate(requests, sampling)

    config = JudgeConfig(input=str(dataset), output=str(tmp_path / "out"), model="m", template=template)
    run_judge(config, executor=LocalExecutor(lambda: Recording(script), None), model_info={}, progress_enabled=False)
    assert seen[0].startswith(f"Q: {problem(0)}\nSteps:\n<paragraph_0>") and "Last one is 2." in seen[0]
    assert config.config_hash() != JudgeConfig(input=str(dataset), output="o", model="m").config_hash()
    assert judgments(tmp_path / "out")["r0"]["template_hash"] == config.template_hash


def test_eval_judgments_scores_the_judge_as_a_critic_on_processbench(tmp_path, capsys):
    processbench = shared_data("processbench/gsm8k.jsonl")
    every = [json.loads(line) for line in processbench.read_text().splitlines()]
    rows = [row for row in every if row["label"] >= 0][:10] + [row for row in every if row["label"] < 0][:10]
    reference = write_jsonl(tmp_path / "gsm8k.jsonl", rows)
    human = {row["problem"].strip(): row["label"] for row in rows}
    erroneous = [row for row in rows if row["label"] >= 0]
    missed = {row["problem"].strip() for row in erroneous[::2]}  # the judge finds no error in half the erroneous rows
    fooled = {[row["problem"].strip() for row in rows if row["label"] < 0][0]}  # and flags one correct row

    def script(text, seed):
        if text in missed:
            return "\\boxed{-1}"
        if text in fooled:
            return "\\boxed{0}"
        return f"\\boxed{{{human[text]}}}"

    judge(reference, tmp_path / "judged", script, shard_size=8)
    assert main(["eval", "--judgments", str(tmp_path / "judged"), "--reference", str(reference), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    [subset] = report["subsets"]
    correct = len(rows) - len(erroneous)
    assert report["kind"] == "judgments" and subset["matched"] == 20
    assert subset["erroneous"] == len(erroneous) and subset["correct"] == correct
    assert subset["erroneous_accuracy"] == pytest.approx((len(erroneous) - len(missed)) / len(erroneous))
    assert subset["correct_accuracy"] == pytest.approx((correct - 1) / correct)
    a, b = subset["erroneous_accuracy"], subset["correct_accuracy"]
    assert subset["f1"] == pytest.approx(2 * a * b / (a + b))
    assert main(["eval", "--judgments", str(tmp_path / "judged"), "--reference", str(reference)]) == 0
    assert "gsm8k" in capsys.readouterr().out
    assert main(["eval", "--judgments", str(tmp_path / "judged"), "--reference", str(reference), "--threshold", "0.5"]) == 2
    assert "does not apply to --judgments" in capsys.readouterr().err


def test_status_of_a_judge_job_counts_critiques(dataset, tmp_path, capsys):
    judge(dataset, tmp_path / "out", votes=2)
    assert main(["status", str(tmp_path / "out")]) == 0
    shown = capsys.readouterr().out
    assert "labeler judge" in shown and f"{2 * ROWS} critiques" in shown


# Judging on Ray workers: tests/test_ray_executor.py (its local Ray, shared)
