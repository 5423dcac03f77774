"""Human corrections (labeler/store/corrections.py): how they resolve into step labels, how they lie over
the labels every reader reads, and how they are written and read back."""

from __future__ import annotations

import json
import multiprocessing
from dataclasses import asdict
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labeler.store.corrections import (
    AFTER_REVIEWED_ERROR,
    Correction,
    CorrectionError,
    Corrections,
    apply_corrections,
    new_correction,
    read_corrections,
    resolve,
    steps_hash,
    write_correction,
)
from labeler.store.reader import LabelsError, read_labelled_rows
from schemas.corrections import ACTIONS, CLEAR, FIRST_ERROR, NO_ERROR, RIGHT, WRONG
from schemas import LABELS_SCHEMA
from schemas.tables import first_error
from schemas.validate import validate_labels
from tests.synthetic_labels import labels_row, write_labels

STEPS = ["a = 1.", "b = 2.", "a + b = 3.", "The answer is 3."]


def correction(action, step, at="2026-12-04T10:00:00.000000+00:00", steps=STEPS, solution_id="s0") -> Correction:
    return Correction(solution_id, "p0", steps_hash(steps), action, step, "", "ada", at)


@st.composite
def histories(draw):
    n = draw(st.integers(1, 6))
    made = []
    for i in range(draw(st.integers(0, 8))):
        action = draw(st.sampled_from(ACTIONS))
        step = None if action == NO_ERROR else draw(st.one_of(st.none(), st.integers(0, n - 1)) if action == CLEAR else st.integers(0, n - 1))
        made.append(correction(action, step, at=f"2026-12-04T10:00:{i:02d}.000000+00:00"))
    return n, made


@given(histories())
def test_the_last_correction_of_a_step_decides_it(history):
    n, made = history
    reviews = resolve(made, n)
    for step, review in reviews.items():
        assert 0 <= step < n
        last = [c for c in made if c.action in (NO_ERROR, CLEAR) and c.step_index is None or c.step_index == step or c.action == FIRST_ERROR]
        decider = last[-1]  # the latest correction that touched this step
        assert review.by == decider
        if decider.action in (RIGHT, WRONG):
            assert review.label is (decider.action == RIGHT)
        elif decider.action == NO_ERROR:
            assert review.label is True
        elif decider.action == FIRST_ERROR:
            k = decider.step_index
            assert review.label == (True if step < k else (False if step == k else None))
    # a step whose latest correction is a clear (of it, or of every step) is not reviewed
    for step in range(n):
        touching = [c for c in made if c.step_index == step or c.step_index is None or c.action == FIRST_ERROR]
        if touching and touching[-1].action == CLEAR:
            assert step not in reviews


@settings(deadline=None)
@given(histories())
def test_a_corrected_row_keeps_its_steps_meets_the_labels_contract_and_says_who_labelled_it(history):
    n, made = history
    steps = STEPS[:n] if n <= len(STEPS) else STEPS + [f"step {i}." for i in range(len(STEPS), n)]
    made = [Correction(c.solution_id, c.problem_id, steps_hash(steps), c.action, c.step_index, c.note, c.reviewer, c.created_at) for c in made]
    soft = [0.5] * n
    from labeler.store.reader import LabelledRow

    written = labels_row("p0", "s0", "P", steps, soft, [True] * n)
    row = LabelledRow(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in _row_fields(written).items()})
    applied = apply_corrections([row], Corrections(made))
    out = applied.rows[0]
    reviews = resolve(made, n)
    assert out.steps == row.steps
    # what `labeler export` and train read is a labels row like any other: a reviewed step counts no rollout
    validate_labels(pa.Table.from_pylist([written | {k: v for k, v in asdict(out).items() if k in written}], schema=LABELS_SCHEMA))
    for i in range(n):
        counts = (out.n_correct[i], out.n_rollouts[i], out.n_truncated[i], out.n_timeouts[i])
        assert counts == ((0, 0, 0, 0) if i in reviews else (row.n_correct[i], row.n_rollouts[i], row.n_truncated[i], row.n_timeouts[i]))
    if not reviews:
        assert out == row and applied.solutions == 0
        return
    assert out.label_source == "human" and applied.solutions == 1
    for i in range(n):
        if i in reviews:
            assert out.soft_labels[i] is None and out.hard_labels[i] == reviews[i].label
            assert out.label_method[i] == ("human" if reviews[i].label is not None else "unlabelled")
            assert (out.unlabelled_reason[i] == AFTER_REVIEWED_ERROR) == (reviews[i].label is None)
        else:
            assert (out.soft_labels[i], out.hard_labels[i], out.label_method[i]) == (0.5, True, row.label_method[i])
    assert out.first_error == first_error(out.hard_labels)  # null behind a step left unlabelled


def test_a_judge_labelled_row_with_one_step_corrected_is_a_human_row_that_keeps_its_judge_steps():
    from labeler.store.reader import LabelledRow

    n = len(STEPS)
    written = labels_row("p0", "s0", "P", STEPS, [None] * n, [True, True, False, False])
    written |= {"label_method": ["judge"] * n, "n_correct": [0] * n, "n_rollouts": [0] * n, "label_source": "judge"}
    row = LabelledRow(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in _row_fields(written).items()})
    out = apply_corrections([row], Corrections([correction(RIGHT, 2)])).rows[0]
    assert out.label_source == "human" and out.label_method == ("judge", "judge", "human", "judge") and out.first_error == 3
    validate_labels(pa.Table.from_pylist([written | {k: v for k, v in asdict(out).items() if k in written}], schema=LABELS_SCHEMA))


def _row_fields(row: dict) -> dict:
    names = (
        "problem_id solution_id problem reference_answer steps soft_labels hard_labels n_correct n_rollouts label_method "
        "first_error generated_tokens label_source thinking_steps trajectory_label n_truncated n_timeouts unlabelled_reason strategy"
    ).split()
    return {name: row[name] for name in names}


def test_corrections_of_other_steps_or_of_no_solution_are_stale_and_not_applied(tmp_path):
    out = write_labels(tmp_path / "out", [labels_row("p0", "s0", "P", STEPS, [1.0] * 4, [True] * 4)])
    write_correction(out, correction(WRONG, 1, steps=["other", "steps"]))
    write_correction(out, correction(WRONG, 2, solution_id="gone"))
    write_correction(out, correction(WRONG, 3))
    row = read_labelled_rows(out)[0]
    assert row.hard_labels == (True, True, True, False) and row.label_method[3] == "human" and row.first_error == 3
    assert read_labelled_rows(out / "labels")[0].hard_labels == (True,) * 4  # the shards alone: no corrections


def test_each_save_is_a_whole_file_of_its_own_and_reads_back_as_written(tmp_path):
    made = new_correction("s0", "p0", STEPS, FIRST_ERROR, 2, "  the sum is wrong  ", " ada ")
    name = write_correction(tmp_path, made)
    assert name.startswith("corrections/") and name.endswith("-ada-" + name.rsplit("-", 1)[1])
    assert not [p for p in (tmp_path / "corrections").iterdir() if p.name.startswith(".")]  # no temp file left
    line = json.loads((tmp_path / name).read_text())
    assert line["note"] == "the sum is wrong" and line["reviewer"] == "ada" and line["schema_version"] == "1.0"
    assert read_corrections(tmp_path).records == [made]


@pytest.mark.parametrize(
    "action, step, field",
    [("wrong", None, "step_index"), ("first_error", 4, "step_index"), ("no_error", 1, "step_index"), ("shrug", 1, "action"), ("right", -1, "step_index")],
)
def test_a_correction_that_does_not_fit_its_solution_is_refused_by_field(action, step, field):
    with pytest.raises(CorrectionError) as error:
        new_correction("s0", "p0", STEPS, action, step, "", "ada")
    assert error.value.field == field


def test_hand_edited_lines_are_named_by_file_line_and_field_and_the_good_ones_still_read(tmp_path):
    folder = tmp_path / "corrections"
    folder.mkdir()
    good = correction(RIGHT, 0).record()
    lines = [
        json.dumps(good),
        json.dumps(good | {"step_index": "1"}),
        json.dumps(good | {"created_at": "yesterday"}),
        json.dumps(good | {"colour": "red"}),
        "[1, 2]",
        "",
    ]
    (folder / "edited.jsonl").write_text("\n".join(lines))
    (folder / "latin1.jsonl").write_bytes("caf\xe9".encode("latin-1"))
    (folder / ".half-written.jsonl.tmp").write_text("{")
    read = read_corrections(tmp_path)
    assert len(read.records) == 1
    assert [b.describe() for b in read.bad] == [
        "corrections/edited.jsonl:2: step_index: '1' is not an integer",
        "corrections/edited.jsonl:3: created_at: 'yesterday' is not an ISO 8601 time",
        "corrections/edited.jsonl:4: colour: is not a field of the corrections table",
        "corrections/edited.jsonl:5: line: not a JSON object",
        "corrections/latin1.jsonl: file: not UTF-8: 'utf-8' codec can't decode byte 0xe9 in position 3: unexpected end of data",
    ]
    write_labels(tmp_path, [labels_row("p0", "s0", "P", STEPS, [1.0] * 4, [True] * 4)])
    with pytest.raises(LabelsError, match="5 corrections line"):
        read_labelled_rows(tmp_path)


def _save_many(args) -> None:
    folder, reviewer, count = args
    for i in range(count):
        write_correction(folder, new_correction(f"s{i}", "p0", STEPS, WRONG, i % 4, "", reviewer))


def test_reviewers_saving_at_once_from_several_processes_lose_nothing(tmp_path):
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        pool.map(_save_many, [(str(tmp_path), f"r{r}", 25) for r in range(4)])
    read = read_corrections(tmp_path)
    assert len(read.records) == 100 and not read.bad
    assert len({(c.reviewer, c.solution_id) for c in read.records}) == 100


@settings(max_examples=30)
@given(st.lists(st.sampled_from([RIGHT, WRONG]), min_size=1, max_size=6))
def test_a_later_save_overrides_an_earlier_one_read_back_from_disk(tmp_path_factory, actions):
    folder = tmp_path_factory.mktemp("saves")
    for action in actions:
        write_correction(folder, new_correction("s0", "p0", STEPS, action, 1, "", "ada"))
    reviews = resolve(read_corrections(folder).records, len(STEPS))
    assert reviews[1].label is (actions[-1] == RIGHT)


def test_training_weights_a_reviewed_step_by_its_human_label(tmp_path):
    """--labels OUT: the step a reviewer marked wrong trains towards 0, whatever its rollouts said."""
    from labeler.prm.stepwise import read_training_rows

    out = write_labels(tmp_path / "out", [labels_row("p0", "s0", "P", STEPS, [1.0, 1.0, 1.0, 1.0], [True] * 4)])
    write_correction(out, new_correction("s0", "p0", STEPS, FIRST_ERROR, 1, "", "ada"))
    row = read_training_rows(str(out))[0]
    assert [row.soft_or_hard(i) for i in range(4)] == [1.0, 0.0, None, None]
    assert row.label_method == ("human", "human", "unlabelled", "unlabelled") and row.label_source == "human"
    Path(out / "corrections" / "note.txt").write_text("ignored: not a .jsonl file")
    assert read_training_rows(str(out))[0] == row


def test_corrections_apply_in_time_order_whatever_the_time_zone_then_file_then_line(tmp_path):
    (tmp_path / "corrections").mkdir()
    earlier = correction(WRONG, 1, at="2026-12-04T10:00:00+02:00")  # 08:00 UTC: sorts after 09:00 as a string
    later = correction(RIGHT, 1, at="2026-12-04T09:00:00+00:00")
    same_time = [correction(RIGHT if i % 2 else WRONG, 2, at="2026-12-04T07:00:00+00:00") for i in range(11)]
    (tmp_path / "corrections" / "a.jsonl").write_text("".join(json.dumps(c.record()) + "\n" for c in [later, earlier, *same_time]))
    read = read_corrections(tmp_path)
    assert [c.where.rsplit(":", 1)[1] for c in read.records] == [str(n) for n in range(3, 14)] + ["2", "1"]
    reviews = resolve(read.records, len(STEPS))
    assert reviews[1].label is True and reviews[2].label is False  # the 11th line, the last of those at 07:00, is wrong
    (tmp_path / "corrections" / "b.jsonl").write_text(json.dumps(correction(RIGHT, 0, at="2026-12-04T09:00:00").record()) + "\n")
    assert [(b.field, b.reason) for b in read_corrections(tmp_path).bad] == [("created_at", "'2026-12-04T09:00:00' has no time zone")]


def test_a_time_out_of_range_is_a_bad_line_not_a_traceback(tmp_path):
    (tmp_path / "corrections").mkdir()
    (tmp_path / "corrections" / "a.jsonl").write_text(json.dumps(correction(RIGHT, 0, at="0001-01-01T00:00:00+01:00").record()) + "\n")
    assert [(b.field, b.reason) for b in read_corrections(tmp_path).bad] == [("created_at", "'0001-01-01T00:00:00+01:00' is out of range")]
