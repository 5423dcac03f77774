"""`labeler train` as TRL's PRMTrainer's successor: TRL's stepwise-supervision rows as labels (files, a folder,
hf:), bad rows refused with their count and names, --train-on-last-step-only, --lr-scheduler."""

import json
import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labeler.cli import main
from labeler.prm.config import TrainConfig
from labeler.prm.data import build_examples, last_step_only
from labeler.prm.model import ProcessRewardModel
from labeler.prm.rendering import render_solution
from labeler.prm.stepwise import TRL_STEPWISE, read_training_rows
from labeler.prm.trainer import _examples, learning_rate_at, train
from labeler.store.reader import LabelsError
from tests.conftest import write_jsonl
from tests.synthetic_labels import arithmetic_rows


def trl_rows(problems: int = 8, seed: int = 5) -> list[dict]:
    """Stepwise-supervision rows, two solutions a prompt: the arithmetic solutions of the PRM tests."""
    return [
        {"prompt": f"Add the numbers of problem {row['problem_id']}.", "completions": row["steps"], "labels": row["hard_labels"]}
        for row in arithmetic_rows(problems=problems, solutions_per_problem=2, seed=seed)
    ]


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    return ProcessRewardModel.from_backbone(str(tiny_model_dir), max_length=384, target="soft").tokenizer


def config(labels, output, model, **overrides) -> TrainConfig:
    settings = {"labels": labels, "output": str(output), "model": str(model), "epochs": 1, "batch_size": 4, "learning_rate": 1e-3}
    return TrainConfig(**(settings | {"max_length": 384, "device": "cpu", "min_steps": 0} | overrides))


def test_a_trl_file_trains_to_a_checkpoint_with_its_labels_as_targets(tiny_model_dir, tmp_path, tokenizer, capsys):
    rows = trl_rows()
    data = write_jsonl(tmp_path / "math_shepherd.jsonl", rows)
    run = tmp_path / "run"
    argv = ["train", "--labels", str(data), "--output", str(run), "--model", str(tiny_model_dir), "--epochs", "1",
            "--batch-size", "4", "--max-length", "384", "--min-steps", "0", "--device", "cpu", "--json"]  # fmt: skip
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["epochs_done"] == 1 and result["checkpoints"] == [str(run / "best"), str(run / "last")]
    assert ProcessRewardModel.load(run / "best").trajectory_head is None  # TRL's format has no trajectory label

    read = read_training_rows(str(data))
    assert [r.label_source for r in read] == [TRL_STEPWISE] * len(rows)
    examples, stats = build_examples(read, tokenizer, "soft", 128)
    # every step a target, the soft target the hard label (no Monte-Carlo fraction in TRL's format)
    assert [e.targets for e in examples] == [[float(label) for label in row["labels"]] for row in rows]
    assert [e.hard_labels for e in examples] == [row["labels"] for row in rows]
    assert stats.steps_unlabelled == stats.steps_truncated == stats.solutions_dropped == 0

    # split by problem, the problem being the prompt: both solutions of a prompt on one side
    split = json.loads((run / "split.json").read_text())["validation_problem_ids"]
    held_out = [r for r in read if r.problem_id in split]
    assert len(split) == 1 and len(held_out) == 2 and len({r.problem for r in held_out}) == 1


def test_the_same_rows_in_parquet_a_folder_or_through_datasets_are_the_same_data(tiny_model_dir, tmp_path, monkeypatch):
    rows = trl_rows()
    single = write_jsonl(tmp_path / "all.jsonl", rows)
    folder = tmp_path / "folder"
    folder.mkdir()
    pq.write_table(pa.Table.from_pylist(rows[:6]), folder / "a.parquet")
    write_jsonl(folder / "b.jsonl", rows[6:])
    hub = tmp_path / "hub"
    hub.mkdir()
    pq.write_table(pa.Table.from_pylist(rows), hub / "train.parquet")
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "cache"))
    expected = read_training_rows(str(single))
    for spec in (str(folder), f"hf:{hub}@train"):  # hf:NAME is what datasets.load_dataset reads: here a local folder
        assert read_training_rows(spec) == expected, spec

    # resume: started on the JSON Lines file, stopped, resumed on the folder of the same rows (moved data is fine)
    stopped = train(config(str(single), tmp_path / "run", tiny_model_dir, max_steps=2))
    assert stopped.global_step == 2 and stopped.stopped_early
    resumed = train(config(str(folder), tmp_path / "run", tiny_model_dir))
    assert resumed.resumed and resumed.epochs_done == 1 and resumed.global_step > 2
    # other rows are other data
    write_jsonl(tmp_path / "other.jsonl", trl_rows(seed=6))
    with pytest.raises(ValueError, match="other labels"):
        train(config(str(tmp_path / "other.jsonl"), tmp_path / "run", tiny_model_dir, epochs=2))


def test_trl_rows_and_our_labels_train_together(tiny_model_dir, tmp_path):
    from tests.synthetic_labels import write_labels

    ours = write_labels(tmp_path / "mc", arithmetic_rows(problems=4, solutions_per_problem=2, seed=3))
    theirs = write_jsonl(tmp_path / "trl.jsonl", trl_rows(problems=4))
    result = train(config((str(ours), f"{theirs}:2"), tmp_path / "run", tiny_model_dir, validation_fraction=0.0, trajectory_loss_weight=0))
    assert result.epochs_done == 1


BAD_ROWS = [
    {"prompt": "Q0", "completions": ["a", "b"], "labels": [True, False]},  # good
    {"prompt": "Q1", "completions": ["a", "b", "c"], "labels": [True, False]},
    {"prompt": "Q2", "completions": ["a", "b"], "labels": [True, 1]},
    {"prompt": "Q3", "completions": [], "labels": []},
    {"prompt": "Q4", "completions": ["a"]},
    {"prompt": 4, "completions": ["a"], "labels": [True]},
    {"prompt": "Q6", "completions": ["a", None], "labels": [True, True]},
    {"prompt": "Q7", "completions": ["a"], "labels": [0.75]},
]


def test_bad_trl_rows_are_counted_named_and_refused_before_a_model_loads(tmp_path, capsys):
    data = write_jsonl(tmp_path / "bad.jsonl", BAD_ROWS)
    with open(data, "a") as handle:
        handle.write("{not json\n")
    with pytest.raises(LabelsError) as error:
        read_training_rows(str(data))
    message = str(error.value)
    assert "8 of 9 rows are not TRL stepwise-supervision rows" in message
    assert "bad.jsonl row 1: labels: 2 labels for 3 completions" in message
    assert "bad.jsonl row 2: labels: label 1 is 1, not true/false" in message
    assert "bad.jsonl row 3: completions: no steps" in message
    assert "and 5 more" in message

    # each kind of bad row, alone, names its field
    reasons = {
        4: "row 0: labels: missing",
        5: "row 0: prompt: expected text, got int",
        6: "row 0: completions: step 1 is NoneType, not text",
        7: "row 0: labels: label 0 is 0.75, not true/false",
    }
    for index, reason in reasons.items():
        with pytest.raises(LabelsError, match=reason):
            read_training_rows(str(write_jsonl(tmp_path / f"bad-{index}.jsonl", [BAD_ROWS[index]])))

    # the command: exit 2, one line, nothing trained (no model given: the labels are read before any model loads)
    run = tmp_path / "run"
    assert main(["train", "--labels", str(data), "--output", str(run), "--model", str(tmp_path / "no-model"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "8 of 9 rows" in err and not (run / "last").exists()


def test_a_parquet_file_without_a_trl_column_is_named(tmp_path):
    path = tmp_path / "no-labels.parquet"
    pq.write_table(pa.Table.from_pylist([{"prompt": "Q", "completions": ["a"]}]), path)
    with pytest.raises(LabelsError, match="no column labels"):
        read_training_rows(str(path))
    with pytest.raises(LabelsError, match="TRL stepwise supervision"):
        read_training_rows(str(write_jsonl(tmp_path / "rows.csv", [])))


def test_train_on_last_step_only_puts_a_target_on_last_steps_alone(tiny_model_dir, tmp_path):
    rows = trl_rows(problems=10)
    data = write_jsonl(tmp_path / "trl.jsonl", rows)
    settings = config(str(data), tmp_path / "run", tiny_model_dir, validation_fraction=0.2, train_on_last_step_only=True)
    prm = ProcessRewardModel.from_backbone(str(tiny_model_dir), max_length=384, target="soft")
    train_set, validation_set = _examples(settings, prm, [read_training_rows(str(data))])
    by_id = {e.solution_id: e for e in train_set + validation_set}
    labels = {r.solution_id: r.hard_labels for r in read_training_rows(str(data))}
    assert train_set and all(len(e.targets) == 1 and e.targets == [float(labels[e.solution_id][-1])] for e in train_set)
    # validation measures every step, as TRL's PRMTrainer evaluates
    assert validation_set and all(len(e.targets) == len(labels[e.solution_id]) for e in validation_set)
    assert len(by_id) == len(rows)
    assert train(settings).epochs_done == 1


@st.composite
def labelled_solutions(draw):
    steps = draw(st.integers(1, 5))
    labels = draw(st.lists(st.sampled_from([True, False, None]), min_size=steps, max_size=steps))
    return steps, labels


@settings(max_examples=40, deadline=None)
@given(st.lists(labelled_solutions(), min_size=1, max_size=6), st.sampled_from([16, 40, 128]))
def test_last_step_only_keeps_exactly_the_labelled_last_steps_that_fit(tokenizer, solutions, max_length):
    from tests.synthetic_labels import labels_row
    from labeler.store.reader import LabelledRow

    rows = []
    for k, (steps, labels) in enumerate(solutions):
        raw = labels_row(f"p{k}", f"s{k}", "Add.", [f"{i} + 1 = {i + 1}." for i in range(steps)], [None] * steps, labels)
        fields = {name: raw[name] for name in LabelledRow.__dataclass_fields__ if name in raw}
        rows.append(LabelledRow(**{key: tuple(v) if isinstance(v, list) else v for key, v in fields.items()}))
    examples, _ = build_examples(rows, tokenizer, "hard", max_length)
    kept = last_step_only(examples)
    every_step, _ = build_examples(rows, tokenizer, "hard", 10_000)
    by_id = {r.solution_id: r for r in rows}
    for example in kept:
        row = by_id[example.solution_id]
        full = next(e for e in every_step if e.solution_id == example.solution_id)
        assert example.targets == [float(row.hard_labels[-1])] and example.score_positions == full.score_positions[-1:]
    # kept: exactly the solutions whose last step has a label and fits the length limit
    fits = lambda r: render_solution(tokenizer, r.problem, r.steps, max_length).steps_kept == len(r.steps)
    expected = {r.solution_id for r in rows if r.hard_labels[-1] is not None and fits(r)}
    assert {e.solution_id for e in kept} == expected


def test_the_schedules_give_the_learning_rates_they_promise():
    peak, warmup, total = 1.0, 2, 10
    schedules = ("linear", "cosine", "constant")
    rates = {name: [learning_rate_at(step, peak, warmup, total, name) for step in range(total)] for name in schedules}
    for sequence in rates.values():
        assert sequence[:2] == [0.5, 1.0]  # the same warm-up
    assert rates["constant"][2:] == [1.0] * 8
    assert rates["linear"][2:] == pytest.approx([1 - k / 8 for k in range(8)])
    assert rates["cosine"][2:] == pytest.approx([0.5 * (1 + math.cos(math.pi * k / 8)) for k in range(8)])
    assert rates["cosine"][6] == pytest.approx(0.5) == rates["linear"][6]  # halfway down, both at half the peak
    assert learning_rate_at(3, 2e-5, 0, 10, "linear") == pytest.approx(2e-5 * 0.7)  # no warm-up


@given(
    st.sampled_from(["linear", "cosine", "constant"]),
    st.integers(1, 200),
    st.floats(0, 0.9),
    st.floats(1e-7, 1e-2),
)
def test_a_schedule_stays_within_the_peak_and_never_rises_after_the_warm_up(schedule, total, ratio, peak):
    warmup = math.ceil(ratio * total)
    rates = [learning_rate_at(step, peak, warmup, total, schedule) for step in range(total)]
    assert all(0 <= rate <= peak * (1 + 1e-12) for rate in rates)
    assert all(a <= b * (1 + 1e-12) for a, b in zip(rates[:warmup], rates[1 : warmup + 1]))
    assert all(b <= a * (1 + 1e-12) for a, b in zip(rates[warmup:], rates[warmup + 1 :]))
    if schedule == "constant":
        assert rates[warmup:] == [peak] * (total - warmup)


def test_the_schedule_chosen_is_the_one_the_run_follows(tiny_model_dir, tmp_path):
    data = str(write_jsonl(tmp_path / "trl.jsonl", trl_rows()))
    last = {}
    for name in ("linear", "constant", "cosine"):
        result = train(config(data, tmp_path / name, tiny_model_dir, epochs=2, warmup_ratio=0.0, lr_scheduler=name))
        last[name] = [record["learning_rate"] for record in result.history]
    steps = result.global_step // 2  # optimizer steps an epoch
    assert last["constant"] == [1e-3, 1e-3]
    assert last["linear"] == pytest.approx([1e-3 * (1 - (steps - 1) / (2 * steps)), 1e-3 / (2 * steps)])
    cosine = lambda step: 1e-3 * 0.5 * (1 + math.cos(math.pi * step / (2 * steps)))
    assert last["cosine"] == pytest.approx([cosine(steps - 1), cosine(2 * steps - 1)])


def test_a_run_saved_before_the_new_settings_resumes_as_it_trained():
    as_trained = {"lr_scheduler": "linear", "min_steps": 0, "step_surprise": False, "rendering": "plain"}
    config_now = TrainConfig(labels="x", output="run", model="m", **as_trained)
    saved = json.loads(json.dumps(config_now.to_dict()))
    for name in ("lr_scheduler", "train_on_last_step_only", "min_steps", "step_surprise", "rendering"):
        del saved[name]
    assert config_now.changed_settings(saved) == []
    assert TrainConfig(labels="x", output="run", model="m", **(as_trained | {"lr_scheduler": "cosine"})).changed_settings(saved) == ["lr_scheduler"]
    # today's defaults differ from what such a run trained with: named, so a resume is refused rather than mixed
    assert TrainConfig(labels="x", output="run", model="m").changed_settings(saved) == ["lr_scheduler", "min_steps", "rendering", "step_surprise"]


def test_text_that_is_not_unicode_is_a_bad_row_named_before_a_model_loads(tmp_path):
    for field, row in (("prompt", {"prompt": "What is 1 + \ud800?", "completions": ["1 + 1 = 2."], "labels": [True]}),
                       ("completions", {"prompt": "What is 1 + 1?", "completions": ["1 + 1 = \ud800."], "labels": [True]})):  # fmt: skip
        data = tmp_path / f"{field}.jsonl"
        data.write_text(json.dumps(row) + "\n")  # JSON carries the lone surrogate as \ud800
        with pytest.raises(LabelsError, match=f"row 0: {field}: .*not valid Unicode"):
            read_training_rows(str(data))


def test_a_problem_from_trl_data_and_from_our_job_is_one_problem_to_the_split(tmp_path):
    from labeler.ids import stable_id
    from labeler.prm.data import split_by_problem
    from tests.synthetic_labels import labels_row, write_labels

    problems = [f"What is {i} + {i}?" for i in range(20)]
    # a job of ours on id-less problems names each by stable_id(problem), as the presets do
    job = write_labels(tmp_path / "job", [labels_row(stable_id(p), f"s{i}", p, ["Sum.", "Done."], [1.0, 1.0], [True, True]) for i, p in enumerate(problems)])
    # TRL's scripts keep the dataset's text as it is, spaces around it included; the presets strip it
    trl = write_jsonl(tmp_path / "trl.jsonl", [{"prompt": f" {p}\n", "completions": ["Add.", "Done."], "labels": [True, False]} for p in problems])
    ours, theirs = read_training_rows(str(job)), read_training_rows(str(trl))
    assert {r.problem_id for r in ours} == {r.problem_id for r in theirs}
    train_set, validation = split_by_problem(ours + theirs, 0.2, seed=0)
    assert validation and not {r.problem.strip() for r in train_set} & {r.problem.strip() for r in validation}
