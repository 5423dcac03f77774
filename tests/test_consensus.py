"""`labeler consensus` on synthetic labels and judgments: the three disagreement policies, the summary's
figures, the output that the other commands read, 1.2 labels shards, and what cannot be joined."""

import json
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from labeler.cli import main
from labeler.judging.consensus import ConsensusConfig, run_consensus
from labeler.store.reader import read_labelled_rows, read_labels_table
from schemas import JUDGMENTS_SCHEMA, JUDGMENTS_SCHEMA_VERSION, LABELS_SCHEMA, SCHEMA_VERSION, SchemaError, validate_judgments, validate_labels
from schemas.judgments import majority
from tests.synthetic_labels import labels_row, write_labels

STEPS = ["3 + 1 = 4.", "4 * 2 = 8.", "8 - 5 = 3.", "The answer is: 3"]


def mc(solution_id: str, hard: list, problem_id: str | None = None) -> dict:
    soft = [None if h is None else (0.75 if h else 0.0) for h in hard]
    return labels_row(problem_id or f"p-{solution_id}", solution_id, f"Problem of {solution_id}", STEPS[: len(hard)], soft, hard)


def judgment(solution_id: str, indices: list[int], n_steps: int = 4, problem_id: str | None = None, steps=None) -> dict:
    verdict, agreement = majority(indices)
    return {
        "problem_id": problem_id or f"p-{solution_id}",
        "solution_id": solution_id,
        "problem": f"Problem of {solution_id}",
        "steps": steps or STEPS[:n_steps],
        "critiques": [f"... \\boxed{{{i}}}" for i in indices],
        "critique_indices": indices,
        "critique_seeds": list(range(len(indices))),
        "critique_samples": [1] * len(indices),
        "first_error": verdict,
        "agreement": agreement,
        "votes": len(indices),
        "generated_tokens": 100 * len(indices),
        "row_index": 0,
        "unit_id": "u-judge",
        "source": "labels",
        "model": "judge-model",
        "seed": 7,
        "template_hash": "t",
        "config_hash": "judge-hash",
        "schema_version": JUDGMENTS_SCHEMA_VERSION,
    }


def write_judgments(directory: Path, rows: list[dict]) -> Path:
    folder = directory / "judgments"
    folder.mkdir(parents=True)
    table = pa.Table.from_pylist(rows, schema=JUDGMENTS_SCHEMA)
    validate_judgments(table)
    pq.write_table(table, folder / "part-00000.parquet")
    return directory


LABELS = [
    mc("s0", [True, True, True, True]),  # MC -1, judge -1: agree
    mc("s1", [True, False, False, False]),  # MC 1, judge 1: agree
    mc("s2", [True, False, True, True]),  # MC 1, judge 2: disagree
    mc("s3", [True, True, True, True]),  # MC -1, judge 0: disagree
    mc("s4", [True, None, False, False]),  # MC 2 after an unlabelled step, judge 2: undetermined
    mc("s5", [True, True, True, True]),  # not judged
]
JUDGMENTS = [
    judgment("s0", [-1, -1, -1]),
    judgment("s1", [1, 1, 2]),
    judgment("s2", [2, 2, 1]),
    judgment("s3", [0, -1, 0]),
    judgment("s4", [2, 2, 2]),
    judgment("j6", [1]),  # not labelled
]


@pytest.fixture
def inputs(tmp_path) -> tuple[Path, Path]:
    return write_labels(tmp_path / "mc", LABELS), write_judgments(tmp_path / "judge", JUDGMENTS)


def consensus(inputs, out: Path, *extra: str) -> int:
    labels, judgments = inputs
    return main(["consensus", "--labels", str(labels), "--judgments", str(judgments), "--output", str(out), *extra])


def by_id(out: Path) -> dict:
    return {row.solution_id: row for row in read_labelled_rows(out)}


def test_drop_keeps_only_the_agreements_and_the_summary_counts_everything(inputs, tmp_path, capsys):
    out = tmp_path / "out"
    assert consensus(inputs, out, "--json") == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary == json.loads((out / "consensus.json").read_text())
    assert {key: summary[key] for key in ("compared", "agreed", "disagreed", "undetermined", "not_judged", "not_labelled")} == {
        "compared": 5, "agreed": 2, "disagreed": 2, "undetermined": 1, "not_judged": 1, "not_labelled": 1,
    }  # fmt: skip
    # missing is never a value: the undetermined solution is out of the rates (2 of the 4 determined agree)
    assert summary["agreement_rate"] == pytest.approx(0.5)
    assert summary["by_monte_carlo_first_error"] == [  # s4's Monte-Carlo first error is unknown: in no group
        {"first_error": -1, "solutions": 2, "undetermined": 0, "agreed": 1, "agreement_rate": 0.5},
        {"first_error": 1, "solutions": 2, "undetermined": 0, "agreed": 1, "agreement_rate": 0.5},
    ]
    keys = ("first_error", "solutions", "undetermined", "agreed", "agreement_rate")
    by_judge = [tuple(row[key] for key in keys) for row in summary["by_judge_first_error"]]
    assert by_judge == [(-1, 1, 0, 1, 1.0), (0, 1, 0, 0, 0.0), (1, 1, 0, 1, 1.0), (2, 2, 1, 0, 0.0)]
    assert main(["consensus", "--labels", str(inputs[0]), "--judgments", str(inputs[1]), "--output", str(out)]) == 0
    assert "agreed             : 2 (50.0% of the 4 determined)" in capsys.readouterr().out
    assert summary["written"] == {"consensus": 2} and summary["solutions_written"] == 2
    rows = by_id(out)
    assert sorted(rows) == ["s0", "s1"]
    source = {row["solution_id"]: row for row in LABELS}
    for solution_id, row in rows.items():
        assert row.label_source == "consensus"
        assert list(row.hard_labels) == source[solution_id]["hard_labels"]  # the Monte-Carlo labels, untouched
        assert list(row.soft_labels) == source[solution_id]["soft_labels"]


def test_judge_policy_labels_the_disagreements_from_the_judges_first_error(inputs, tmp_path):
    out = tmp_path / "out"
    assert consensus(inputs, out, "--on-disagreement", "judge") == 0
    rows = by_id(out)
    assert sorted(rows) == ["s0", "s1", "s2", "s3", "s4"]
    assert {sid: row.label_source for sid, row in rows.items()} == {"s0": "consensus", "s1": "consensus", "s2": "judge", "s3": "judge", "s4": "judge"}
    s2, s3 = rows["s2"], rows["s3"]
    assert list(s2.hard_labels) == [True, True, False, False] and s2.first_error == 2  # before it positive, it and after negative
    assert list(s3.hard_labels) == [False, False, False, False] and s3.first_error == 0
    assert list(s2.label_method) == ["judge"] * 4 and list(s2.soft_labels) == [None] * 4 and list(s2.n_rollouts) == [0] * 4
    table = read_labels_table(out).to_pylist()
    judged = next(row for row in table if row["solution_id"] == "s2")
    assert (judged["model"], judged["strategy"], judged["seed"], judged["config_hash"]) == ("judge-model", "judge", 7, "judge-hash")
    assert judged["generated_tokens"] == 300  # the three critiques'
    summary = json.loads((out / "consensus.json").read_text())
    assert summary["written"] == {"consensus": 2, "judge": 3}


def test_monte_carlo_policy_keeps_the_monte_carlo_labels_of_the_disagreements(inputs, tmp_path):
    out = tmp_path / "out"
    assert consensus(inputs, out, "--on-disagreement", "monte-carlo") == 0
    rows = by_id(out)
    assert {sid: row.label_source for sid, row in rows.items()} == {
        "s0": "consensus", "s1": "consensus", "s2": "monte-carlo", "s3": "monte-carlo", "s4": "monte-carlo",
    }  # fmt: skip
    assert list(rows["s4"].hard_labels) == [True, None, False, False]  # as Monte-Carlo labelled it


def test_the_output_is_a_labels_output_that_train_eval_export_report_and_status_read(inputs, tmp_path, capsys):
    out = tmp_path / "out"
    assert consensus(inputs, out, "--on-disagreement", "judge") == 0
    validate_labels(pq.read_table(out / "labels"))
    assert main(["status", str(out), "--json"]) == 0
    capsys.readouterr()
    assert main(["export", str(out), "--format", "trl", "--output", str(tmp_path / "trl.jsonl")]) == 0
    exported = [json.loads(line) for line in (tmp_path / "trl.jsonl").read_text().splitlines()]
    assert len(exported) == 5 and [True, True, False, False] in [row["labels"] for row in exported]
    assert main(["report", str(out)]) == 0 and (out / "report" / "index.html").exists()


def test_a_rerun_resumes_and_other_settings_are_refused(inputs, tmp_path, capsys):
    out = tmp_path / "out"
    assert consensus(inputs, out) == 0
    shard = (out / "labels" / "part-00000.parquet").read_bytes()
    assert consensus(inputs, out) == 0  # the same command: nothing to do
    assert (out / "labels" / "part-00000.parquet").read_bytes() == shard
    capsys.readouterr()
    assert consensus(inputs, out, "--on-disagreement", "judge") == 2
    assert "different config (changed: on_disagreement" in capsys.readouterr().err
    assert consensus(inputs, out, "--on-disagreement", "judge", "--overwrite") == 0
    assert len(by_id(out)) == 5


def test_labels_of_schema_1_2_read_as_monte_carlo(tmp_path):
    newer = ("label_source", "thinking_steps", "trajectory_verdict", "trajectory_label", "n_timeouts")  # columns 1.2 did not have
    old_schema = pa.schema([field for field in LABELS_SCHEMA if field.name not in newer])
    old_rows = [{key: value for key, value in row.items() if key not in newer} | {"schema_version": "1.2"} for row in LABELS[:3]]
    folder = tmp_path / "mixed" / "labels"
    folder.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(old_rows, schema=old_schema), folder / "part-00000.parquet")  # a 1.2 shard
    pq.write_table(pa.Table.from_pylist(LABELS[3:], schema=LABELS_SCHEMA), folder / "part-00001.parquet")  # beside a current one
    assert [row.label_source for row in read_labelled_rows(tmp_path / "mixed")] == ["monte-carlo"] * 6
    assert read_labels_table(tmp_path / "mixed", columns=["solution_id", "label_source"]).column("label_source").to_pylist() == ["monte-carlo"] * 6
    result = run_consensus(ConsensusConfig(labels=str(tmp_path / "mixed"), judgments=str(write_judgments(tmp_path / "j", JUDGMENTS)), output=str(tmp_path / "out")))
    assert result["agreed"] == 2
    written = read_labels_table(tmp_path / "out")
    assert set(written.column("schema_version").to_pylist()) == {"1.2"}  # the agreements s0, s1: rows of the 1.2 shard, as they were
    # the old shard's solutions had no trajectory check: written as unchecked, with no trajectory label
    verdicts = dict(zip(written.column("solution_id").to_pylist(), written.column("trajectory_verdict").to_pylist()))
    assert verdicts["s0"] == "unchecked" and verdicts["s1"] == "unchecked"


def test_labels_that_are_not_monte_carlo_or_steps_that_differ_are_refused(tmp_path, capsys):
    labels = write_labels(tmp_path / "consensus-labels", [mc("s0", [True, True, True, True]) | {"label_source": "consensus"}])
    judgments = write_judgments(tmp_path / "j", [judgment("s0", [-1])])
    assert main(["consensus", "--labels", str(labels), "--judgments", str(judgments), "--output", str(tmp_path / "o1")]) == 2
    assert "label_source is 'consensus'; consensus compares a judge with Monte-Carlo labels only" in capsys.readouterr().err
    labels = write_labels(tmp_path / "mc", [mc("s0", [True, True, True, True])])
    other = write_judgments(tmp_path / "j2", [judgment("s0", [-1], steps=["another solution"])])
    assert main(["consensus", "--labels", str(labels), "--judgments", str(other), "--output", str(tmp_path / "o2")]) == 2
    assert "solution s0: its steps in the judgments differ from those in the labels" in capsys.readouterr().err
    assert main(["consensus", "--labels", str(judgments), "--judgments", str(judgments), "--output", str(tmp_path / "o3")]) == 2
    assert "labeler consensus: error:" in capsys.readouterr().err
    assert not (tmp_path / "o1").exists() and not (tmp_path / "o2").exists()  # refused before the output was touched


@pytest.mark.parametrize(
    "change, message",
    [
        ({"first_error": 1}, "the votes give 2"),
        ({"agreement": 1.0}, "the votes give 2 and 0.666"),
        ({"critique_indices": [2, 2, 9]}, "critique index 9 is not a step"),
        ({"critique_seeds": [1]}, "critique_seeds has 1 entries for 3 votes"),
        ({"critique_samples": [1, 0, 1]}, "a vote with no sample"),
        ({"steps": []}, "no steps"),
    ],
)
def test_judgments_that_break_their_contract_are_refused(change, message):
    table = pa.Table.from_pylist([judgment("s0", [2, 2, 1]) | change], schema=JUDGMENTS_SCHEMA)
    with pytest.raises(SchemaError, match=message):
        validate_judgments(table)


def test_labels_with_a_judge_step_outside_a_judge_row_are_refused():
    row = mc("s0", [True, True, True, True])
    row["label_method"] = ["rollouts", "judge", "rollouts", "rollouts"]
    row["n_rollouts"][1], row["n_correct"][1], row["soft_labels"][1] = 0, 0, None
    with pytest.raises(SchemaError, match="a step labelled judge in a row with label_source monte-carlo"):
        validate_labels(pa.Table.from_pylist([row], schema=LABELS_SCHEMA))
    with pytest.raises(SchemaError, match="label_source has unknown values"):
        validate_labels(pa.Table.from_pylist([mc("s1", [True, True]) | {"label_source": "oracle"}], schema=LABELS_SCHEMA))


def test_the_report_of_a_consensus_output_claims_no_agreement_with_its_manifest(tmp_path):
    """A consensus output samples nothing (its manifest counts no rollouts); its rows carry the counts of the labels
    it read, whose --truncated is not known when they are a folder of shards: their cut rollouts make a range."""
    labels = [mc("s0", [True, True, True, True]) | {"n_truncated": [2, 0, 0, 0]}, *LABELS[1:]]
    inputs = write_labels(tmp_path / "mc", labels), write_judgments(tmp_path / "judge", JUDGMENTS)
    out = tmp_path / "out"
    assert consensus(inputs, out) == 0
    counted = sum(sum(row.n_rollouts) for row in read_labelled_rows(out))
    assert main(["report", str(out)]) == 0
    page = (out / "report" / "index.html").read_text()
    assert f"<th>rollouts</th><td class=number>{counted} to {counted + 2}</td>" in page
    assert "manifest" not in page


def test_rows_of_an_older_schema_keep_their_version_and_judge_rows_are_current(tmp_path):
    """A 1.4 row counted its timed-out checks as wrong answers: written again, it still says 1.4 (its n_timeouts
    0: none was left out then), never 1.5; the rows the judge labels now are of the current schema."""
    old_schema = pa.schema([field for field in LABELS_SCHEMA if field.name != "n_timeouts"])
    old_rows = [{key: value for key, value in row.items() if key != "n_timeouts"} | {"schema_version": "1.4"} for row in LABELS]
    folder = tmp_path / "old" / "labels"
    folder.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(old_rows, schema=old_schema), folder / "part-00000.parquet")
    judgments = str(write_judgments(tmp_path / "j", JUDGMENTS))
    for policy, written_by in (("monte-carlo", {"consensus", "monte-carlo"}), ("judge", {"consensus", "judge"})):
        out = tmp_path / f"out-{policy}"
        result = run_consensus(ConsensusConfig(labels=str(tmp_path / "old"), judgments=judgments, output=str(out), on_disagreement=policy))
        rows = read_labels_table(out).to_pylist()
        assert {row["label_source"] for row in rows} == written_by
        for row in rows:
            assert row["schema_version"] == (SCHEMA_VERSION if row["label_source"] == "judge" else "1.4"), row
            assert row["n_timeouts"] == [0] * len(row["steps"])
        assert result["schema_versions"] == dict(Counter(row["schema_version"] for row in rows))
        from labeler.cli.consensus import format_summary

        [line] = [line for line in format_summary(result).splitlines() if line.startswith("schema versions")]
        assert "of 1.4" in line and line.endswith("(rows of older shards keep their version and its rules)")


def test_rows_of_schema_1_5_are_written_as_1_6_rows(tmp_path):
    """1.5 differs from 1.6 only in first_error's rule, recomputed when read: a 1.5 row written again carries 1.6's
    first_error, and says 1.6."""
    from schemas.tables import first_error

    folder = tmp_path / "old" / "labels"
    folder.mkdir(parents=True)
    old_rows = [row | {"schema_version": "1.5"} for row in LABELS]
    pq.write_table(pa.Table.from_pylist(old_rows, schema=LABELS_SCHEMA), folder / "part-00000.parquet")
    out = tmp_path / "out"
    judgments = str(write_judgments(tmp_path / "j", JUDGMENTS))
    result = run_consensus(ConsensusConfig(labels=str(tmp_path / "old"), judgments=judgments, output=str(out), on_disagreement="monte-carlo"))
    rows = pq.read_table(out / "labels").to_pylist()  # as written, not as a reader recomputes it
    assert rows and {row["schema_version"] for row in rows} == {SCHEMA_VERSION}
    assert [row["first_error"] for row in rows] == [first_error(row["hard_labels"]) for row in rows]
    assert result["schema_versions"] == {SCHEMA_VERSION: len(rows)}


def test_corrections_beside_the_labels_are_not_applied_and_a_warning_says_so(inputs, tmp_path, caplog):
    from labeler.store.corrections import new_correction, write_correction

    labels, _ = inputs
    write_correction(labels, new_correction("s0", "p-s0", LABELS[0]["steps"], "wrong", 0, "", "ada"))
    with caplog.at_level("WARNING"):
        assert consensus(inputs, tmp_path / "out") == 0
    assert "1 correction file(s) from `labeler view`" in caplog.text and "not applied" in caplog.text
    assert by_id(tmp_path / "out")["s0"].label_source == "consensus"
