"""`labeler report`: an HTML page with embedded PNG plots, and the PNG files beside it; what it
shows is what the labels hold: measured soft labels by step, counts on integer axes, rejection
reasons in full, an unfinished job said to be one, no plot where there is nothing to plot."""

import base64
import io
import json
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from labeler.checking.checker import AnswerChecker
from labeler.cli import main
from labeler.evaluation.report import (
    Rejections,
    ReportInputs,
    first_error_section,
    measured_soft_labels_by_step,
    spend_section,
    write_report,
)
from labeler.store.reader import read_labelled_rows
from schemas import REJECTED_SCHEMA
from tests.synthetic_labels import arithmetic_rows, labels_row, write_labels

PLOTS = ("soft_labels.png", "first_error.png", "soft_label_by_step.png", "spend.png", "rejected.png")
LONG_REASON = (
    "the row has 61234 characters of text, over max_row_chars=50000; split it or raise --max-row-chars to label it as one solution"
)


def write_rejected(job, reasons):
    folder = job / "rejected"
    folder.mkdir(exist_ok=True)
    rows = [
        {"row_index": i, "problem_id": None, "stage": "input", "field": field, "reason": reason, "raw": "{}"}
        for i, (field, reason) in enumerate(reasons)
    ]
    pq.write_table(pa.Table.from_pylist(rows, schema=REJECTED_SCHEMA), folder / "input.parquet")


def embedded_pngs(page: str) -> list[bytes]:
    return [base64.b64decode(data) for data in re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)]


def test_report_writes_a_page_and_png_plots(tmp_path, capsys):
    job = write_labels(tmp_path / "job", arithmetic_rows(problems=10, solutions_per_problem=3, seed=0))
    write_rejected(
        job, [("row", "12034 characters of text, over max_row_chars=50000"), ("row", LONG_REASON), ("answer", "missing column 'answer'")]
    )
    assert main(["report", str(job)]) == 0
    page = job / "report" / "index.html"
    assert capsys.readouterr().out.strip() == str(page)
    for name in PLOTS:
        with Image.open(job / "report" / name) as image:
            image.verify()
            assert image.format == "PNG" and image.size[0] > 300 and image.size[1] > 150
    html = page.read_text()
    embedded = embedded_pngs(html)
    assert len(embedded) == len(PLOTS) and all(Image.open(io.BytesIO(data)).format == "PNG" for data in embedded)
    assert not re.search(r'src="(?!data:)', html)  # self-contained: nothing loaded from elsewhere
    assert "<th>solutions</th><td class=number>30</td>" in html
    assert "<p class=incomplete>" not in html and "<th>job</th>" not in html  # a folder of shards: no job to be unfinished
    # every reason in full, numbers folded so that rows differing only in them count as one, with an example row as written
    folded = "the row has N characters of text, over max_row_chars=N; split it or raise --max-row-chars to label it as one solution"
    assert f"<td>{folded}</td><td class=number>1</td><td>row 1: {LONG_REASON}</td>" in html
    assert "<td>missing column &#x27;answer&#x27;</td><td class=number>1</td>" in html


def test_mean_soft_label_by_step_counts_only_steps_measured_by_rollouts(tmp_path):
    rows = [
        labels_row(
            "p", "a", "Q", ["s1", "s2", "s3"], [0.5, 0.25, 1.0], [True, True, True], label_method=["rollouts", "rollouts", "final_answer"]
        ),
        labels_row("p", "b", "Q", ["s1", "s2"], [1.0, 0.0], [True, False], label_method=["rollouts", "final_answer"]),
        labels_row(
            "q", "c", "Q", ["s1", "s2", "s3"], [0.75, None, None], [True, True, None], label_method=["rollouts", "inferred", "unlabelled"]
        ),
    ]
    labels = read_labelled_rows(write_labels(tmp_path / "job", rows))
    by_index, left_out = measured_soft_labels_by_step(labels)
    assert by_index == {0: [0.5, 1.0, 0.75], 1: [0.25]} and left_out == 2  # the final-answer 1.0 and 0.0 are not in
    page = write_report(str(tmp_path / "job")).read_text()
    assert "2 final-answer checks are left out" in page and "label_method &quot;rollouts&quot;" in page


def test_count_axes_have_whole_number_ticks(tmp_path):
    rows = read_labelled_rows(write_labels(tmp_path / "job", arithmetic_rows(problems=2, solutions_per_problem=1, seed=1)))
    inputs = ReportInputs(str(tmp_path / "job"), rows, Rejections(), None)
    figures = [first_error_section(inputs).plots[0].figure, spend_section(inputs).plots[0].figure]
    axes = [figures[0].axes[0].yaxis, figures[1].axes[0].yaxis, figures[1].axes[1].yaxis, figures[1].axes[1].xaxis]
    for axis in axes:
        ticks = axis.get_majorticklocs()
        assert len(ticks) >= 2 and all(float(t).is_integer() for t in ticks), ticks


def test_sections_with_nothing_to_show_are_a_line_not_an_empty_plot(tmp_path):
    rows = [
        labels_row("p", f"s{i}", "Q", ["a", "b"], [None, None], [True, None], label_method=["inferred", "unlabelled"]) for i in range(3)
    ]
    job = write_labels(tmp_path / "job", rows)
    page = write_report(str(job)).read_text()
    assert sorted(p.name for p in (job / "report").glob("*.png")) == ["first_error.png", "spend.png"]
    assert len(embedded_pngs(page)) == 2
    assert "No step has a soft label" in page and "No step was measured by rollouts" in page and "No rejected rows." in page


@pytest.fixture(scope="module")
def checker():
    with AnswerChecker(timeout_s=5) as checker:
        yield checker


def test_an_interrupted_job_is_reported_incomplete_then_finished(tmp_path, checker):
    from tests.conftest import write_jsonl
    from tests.fakes import Crash, CrashingGenerator
    from tests.test_job import PROBLEMS, config, input_rows, run

    dataset = write_jsonl(tmp_path / "input.jsonl", input_rows())  # 11 solutions (one row rejected) in 4 units of 3 rows
    out = tmp_path / "out"
    with pytest.raises(Crash):
        run(config(dataset, out), checker, CrashingGenerator(PROBLEMS, crash_on_call=3))
    page = write_report(str(out)).read_text()
    banner = (
        "incomplete: 6 of 11 solutions (2 of 4 units committed); the job was interrupted: rerun its `labeler label` command to finish it"
    )
    assert f"<p class=incomplete>{banner}</p>" in page
    assert "<th>job</th><td class=number>incomplete: 6 of 11 solutions</td>" in page
    run(config(dataset, out), checker)
    page = write_report(str(out)).read_text()
    assert "class=incomplete" not in page and "<th>job</th><td class=number>finished</td>" in page


def test_report_of_a_job_without_labels_exits_2(tmp_path, capsys):
    (tmp_path / "job").mkdir()
    assert main(["report", str(tmp_path / "job")]) == 2
    assert capsys.readouterr().err.startswith("labeler report: error:")


@pytest.mark.parametrize("truncated", ["excluded", "incorrect"])
def test_report_counts_the_rollouts_the_manifest_counts_cut_ones_apart(tmp_path, checker, truncated):
    from labeler.store.status import job_status
    from tests.conftest import write_jsonl
    from tests.fakes import CUT_MARKER
    from tests.test_job import config, input_rows, run

    rows = input_rows()
    for row in rows[::2]:
        row["steps"][0] += f" {CUT_MARKER}"  # half the rollouts from these prefixes are cut by their budget
    out = tmp_path / "out"
    run(config(write_jsonl(tmp_path / "input.jsonl", rows), out, truncated=truncated), checker)
    status = job_status(str(out))
    totals = json.loads((out / "manifest.json").read_text())["totals"]
    cut = totals["truncated_rollouts"]
    assert cut > 0 and status["rollouts"] == totals["rollouts"]
    page = write_report(str(out)).read_text()
    assert f"<th>rollouts</th><td class=number>{status['rollouts']}</td>" in page
    assert f"<th>{CUT_LINE}</th><td class=number>{cut}</td>" in page
    from labeler.evaluation.report import read_inputs

    rollouts_axes = spend_section(read_inputs(str(out))).plots[0].figure.axes[1]
    assert rollouts_axes.get_title() == f"Rollouts spent: {status['rollouts']} in all, {cut} cut by the budget or ended still thinking"
    assert f"<th>steps</th><td class=number>{status['steps']}</td>" in page
    assert f"<th>solutions</th><td class=number>{status['solutions']}</td>" in page


CUT_LINE = "rollouts cut by the budget or ended still thinking"


def test_report_counts_the_rollouts_the_manifest_counts_timed_out_ones_apart(tmp_path, checker):
    from labeler.evaluation.report import read_inputs
    from labeler.labeling.config import LabelConfig
    from labeler.labeling.job import run_job
    from labeler.store.status import job_status
    from tests.conftest import write_jsonl
    from tests.fakes import SLOW_MARKER, ScriptedGenerator, SlowChecker
    from workers.local_executor import LocalExecutor

    problem = "What is 20 + 22?"
    rows = [{"id": f"r{i}", "problem": problem, "answer": "42", "steps": [f"One {SLOW_MARKER}.", "The answer is 42."]} for i in range(2)]
    out = tmp_path / "out"
    config = LabelConfig(input=str(write_jsonl(tmp_path / "in.jsonl", rows)), output=str(out), model="scripted", rollouts=4)
    generator = ScriptedGenerator({problem: "42"}, miss_every=None)
    run_job(config, executor=LocalExecutor(lambda: generator, SlowChecker(checker)), model_info={"name": "s"}, progress_enabled=False)
    status, totals = job_status(str(out)), json.loads((out / "manifest.json").read_text())["totals"]
    timed_out = totals["timed_out_rollouts"]
    assert timed_out > 0 and status["rollouts"] == totals["rollouts"]
    page = write_report(str(out)).read_text()
    assert f"<th>rollouts</th><td class=number>{totals['rollouts']}</td>" in page
    assert f"<th>rollouts whose check timed out</th><td class=number>{timed_out}</td>" in page
    assert f"<th>{CUT_LINE}</th><td class=number>0</td>" in page
    rollouts_axes = spend_section(read_inputs(str(out))).plots[0].figure.axes[1]
    assert rollouts_axes.get_title() == f"Rollouts spent: {totals['rollouts']} in all, {timed_out} whose check timed out"


def test_a_first_error_behind_an_unlabelled_step_is_unknown_not_none(tmp_path):
    rows = [
        labels_row("p", "a", "Q", ["s1", "s2"], [1.0, 1.0], [True, True]),  # none
        labels_row("p", "b", "Q", ["s1", "s2"], [1.0, None], [True, None]),  # unknown: s2 unlabelled
        labels_row("p", "c", "Q", ["s1", "s2", "s3"], [1.0, None, 0.0], [True, None, False]),  # unknown: s2 before s3
        labels_row("p", "d", "Q", ["s1", "s2"], [0.0, None], [False, None]),  # step 0 (as first_error); s2 after it does not matter
    ]
    job = write_labels(tmp_path / "job", rows)
    inputs = ReportInputs(str(job), read_labelled_rows(job), Rejections(), None)
    axes = first_error_section(inputs).plots[0].figure.axes[0]
    bars = {tick.get_text(): patch.get_height() for tick, patch in zip(axes.get_xticklabels(), axes.patches)}
    assert bars == {"none": 1, "unknown": 2, "0": 1}
    page = write_report(str(job)).read_text()
    assert "<th>solutions with a first error</th><td class=number>1 (50.0% of the 2 whose first error is known)</td>" in page
    assert "<th>solutions whose first error is unknown</th><td class=number>2 (an unlabelled step before it)</td>" in page


def test_report_counts_the_tokens_the_manifest_counts_rejected_solutions_apart(tmp_path, checker):
    import dataclasses

    from labeler.store.status import job_status
    from tests.conftest import write_jsonl
    from tests.fakes import ScriptedGenerator
    from tests.test_job import PROBLEMS, config, run

    class EmptyFirstSolution(ScriptedGenerator):
        def generate(self, requests, sampling):  # the first problem's sampled solutions have tokens but no steps
            results = super().generate(requests, sampling)
            empty = [request.user_message.startswith("What is 1 plus 1?") and not request.assistant_prefix for request in requests]
            return [
                dataclasses.replace(result, completions=tuple(dataclasses.replace(c, text="\n\n", tokens=7) for c in result.completions))
                if is_empty else result
                for result, is_empty in zip(results, empty)
            ]

    rows = [{"problem": problem, "answer": answer} for problem, answer in list(PROBLEMS.items())[:3]]
    generator = EmptyFirstSolution(PROBLEMS, sampled_solution="First we add.\n\nThen we check.\n\nThe answer is: {answer}")
    out = tmp_path / "out"
    dataset = write_jsonl(tmp_path / "problems.jsonl", rows)
    run(config(dataset, out, preset="math", solutions_per_problem=2, shard_size=4), checker, generator)
    totals = json.loads((out / "manifest.json").read_text())["totals"]
    assert totals["rejected_tokens"] == 14
    page = write_report(str(out)).read_text()
    assert f"<th>generated tokens</th><td class=number>{job_status(str(out))['generated_tokens']}</td>" in page
    assert "<th>of them on rejected solutions</th><td class=number>14</td>" in page


def cut_job(tmp_path, checker, truncated):
    from tests.conftest import write_jsonl
    from tests.fakes import CUT_MARKER
    from tests.test_job import config, input_rows, run

    rows = input_rows()
    for row in rows[::2]:
        row["steps"][0] += f" {CUT_MARKER}"  # half the rollouts from these prefixes are cut by their budget
    out = tmp_path / "out"
    run(config(write_jsonl(tmp_path / "input.jsonl", rows), out, truncated=truncated), checker)
    return out, json.loads((out / "manifest.json").read_text())["totals"]


def test_shards_without_their_jobs_config_say_whether_cut_rollouts_count_is_unknown(tmp_path, checker):
    """A folder of shards holds no --truncated: its cut rollouts may be inside n_rollouts (incorrect) or not, so the
    count is a range, never the counted plus the cut as if excluded; and no manifest is said to agree."""
    import shutil

    from labeler.evaluation.report import read_inputs

    out, totals = cut_job(tmp_path, checker, "incorrect")
    cut = totals["truncated_rollouts"]
    page = write_report(str(out), str(tmp_path / "r1")).read_text()
    assert f"<th>rollouts</th><td class=number>{totals['rollouts']}</td>" in page
    assert "checked as they stand (--truncated incorrect)" in page and "agree with the manifest" in page
    shutil.copytree(out / "labels", tmp_path / "shards")
    page = write_report(str(tmp_path / "shards"), str(tmp_path / "r2")).read_text()
    assert f"<th>rollouts</th><td class=number>{totals['rollouts']} to {totals['rollouts'] + cut}" in page
    assert "whether they are among the counted rollouts is not known" in page and "manifest" not in page
    title = spend_section(read_inputs(str(tmp_path / "shards"))).plots[0].figure.axes[1].get_title()
    assert title.startswith(f"Rollouts spent: {totals['rollouts']} to {totals['rollouts'] + cut}")


def test_one_old_shard_leaves_the_cut_rollouts_of_the_others_counted(tmp_path, checker):
    """A shard older than schema 1.2 (no n_truncated) among newer ones: only its rows have no known cut rollouts."""
    import pyarrow.parquet as pq

    out, totals = cut_job(tmp_path, checker, "excluded")
    last = sorted((out / "labels").glob("*.parquet"))[-1]
    table = pq.read_table(last)
    dropped = sum(sum(per_step) for per_step in table.column("n_truncated").to_pylist())
    pq.write_table(table.drop(["n_truncated"]), last)
    page = write_report(str(out)).read_text()
    cut = totals["truncated_rollouts"] - dropped
    assert cut > 0
    assert f"<th>rollouts cut by the budget or ended still thinking</th><td class=number>{cut}</td>" in page
    assert f"<th>rollouts</th><td class=number>{totals['rollouts'] - dropped}</td>" in page
    assert f"{table.num_rows} solutions come from shards older than schema 1.2 (no n_truncated): their cut rollouts are not known" in page
