"""`labeler eval`: ProcessBench and PRM800K metrics, by hand on small cases and on the real ProcessBench."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labeler.cli import main
from labeler.evaluation.metrics import first_error_metrics, first_predicted_error, rating_is_positive, roc_auc, step_metrics
from tests.conftest import shared_data, write_jsonl
from tests.synthetic_labels import labels_row, write_labels


def test_first_error_metrics_by_hand():
    # (human first error, predicted first error)
    pairs = [(-1, -1), (-1, 1), (2, 2), (0, 0), (3, -1), (1, 2)]
    metrics = first_error_metrics(pairs)
    # erroneous rows: (2,2) right, (0,0) right, (3,-1) wrong, (1,2) wrong -> 2/4; correct rows: 1 of 2 predicted -1
    assert (metrics.erroneous, metrics.correct) == (4, 2)
    assert metrics.erroneous_accuracy == pytest.approx(0.5)
    assert metrics.correct_accuracy == pytest.approx(0.5)
    assert metrics.f1 == pytest.approx(0.5)

    lopsided = first_error_metrics([(-1, -1), (-1, -1), (-1, -1), (1, 1), (1, 0), (2, -1)])
    # erroneous 1/3, correct 3/3: F1 = 2 * (1/3) * 1 / (1/3 + 1) = 0.5
    assert lopsided.f1 == pytest.approx(0.5)

    trivial = first_error_metrics([(-1, -1), (4, -1), (0, -1)])
    assert (trivial.erroneous_accuracy, trivial.correct_accuracy, trivial.f1) == (0.0, 1.0, 0.0)
    assert first_error_metrics([(2, 2)]).f1 is None  # no correct rows: F1 undefined, not 0


def test_first_predicted_error_is_unknown_after_a_step_without_a_prediction():
    # missing is never a value: a step with no prediction before the first predicted error (any step, for -1)
    assert first_predicted_error([True, None, False, False]) is None
    assert first_predicted_error([True, None]) is None
    assert first_predicted_error([True, False, None]) == 1  # after the first error: not needed
    assert first_predicted_error([True, True]) == -1
    # asked for: a step without a prediction reads as predicted right
    assert first_predicted_error([True, None, False, False], missing="as-correct") == 2
    assert first_predicted_error([True, None], missing="as-correct") == -1


def test_eval_counts_rows_without_a_prediction_apart(tmp_path, capsys):
    reference = write_jsonl(tmp_path / "tiny.jsonl", processbench_rows())
    labels = write_labels(
        tmp_path / "job",
        [
            labels_row("pb-0", "s0", "P0", ["a", "b", "c"], [1.0, None, None], [True, None, None]),  # -1 unknown: step 2 unlabelled
            labels_row("pb-1", "s1", "P1", ["a", "b", "c"], [1.0, None, 0.0], [True, None, False]),  # unknown: step 2 before the error
            labels_row("pb-2", "s2", "P2", ["a", "b"], [0.75, 0.0], [True, False]),  # 1 for 0, wrong
            labels_row("pb-3", "s3", "P3", ["a", "b"], [1.0, 1.0], [True, True]),  # -1, right
        ],
    )
    (subset,) = eval_json(capsys, "--labels", str(labels), "--reference", str(reference))["subsets"]
    assert (subset["matched"], subset["scored"], subset["no_prediction"]) == (4, 2, 2)
    assert subset["no_prediction_by_reason"] == {"unlabelled step": 2}
    assert [(row["problem_id"], row["step"], row["reason"]) for row in subset["no_prediction_rows"]] == [
        ("pb-0", 1, "unlabelled step"),
        ("pb-1", 1, "unlabelled step"),
    ]
    assert subset["missing"] == "exclude"
    # only pb-2 (wrong) and pb-3 (right) are in the figures
    assert (subset["erroneous"], subset["correct"]) == (1, 1)
    assert (subset["erroneous_accuracy"], subset["correct_accuracy"]) == (0.0, 1.0)

    # asked for: missing steps read as predicted right, as before (pb-0 predicts -1, pb-1 predicts 2)
    (asked,) = eval_json(capsys, "--labels", str(labels), "--reference", str(reference), "--missing", "as-correct")["subsets"]
    assert (asked["scored"], asked["no_prediction"], asked["missing"]) == (4, 2, "as-correct")
    assert (asked["erroneous"], asked["correct"], asked["erroneous_accuracy"], asked["correct_accuracy"]) == (2, 2, 0.0, 1.0)

    assert main(["eval", "--labels", str(labels), "--reference", str(reference)]) == 0
    out = capsys.readouterr().out
    header = out.splitlines()[0].split()
    assert header[:3] == ["subset", "format", "matched"] and "scored" in header
    assert "no prediction: 2 rows (2 unlabelled step), left out of the metrics" in out
    # one numbering: the text names the step the JSON names (from 0), not one more
    assert "(pb-0): step 1, unlabelled step (rows and steps from 0" in out, out


def test_eval_of_scores_cut_at_max_length_counts_them_apart(tmp_path, capsys):
    reference = write_jsonl(tmp_path / "tiny.jsonl", processbench_rows())
    scores = write_jsonl(
        tmp_path / "scores.jsonl",
        [
            {"problem_id": "pb-0", "solution_id": "s0", "step_scores": [0.9, 0.8, None]},  # cut: -1 unknown
            {"problem_id": "pb-1", "solution_id": "s1", "step_scores": [0.9, 0.2, None]},  # error at 1 before the cut: known
            {"problem_id": "pb-3", "solution_id": "s3", "step_scores": [0.9, 0.9]},
        ],
    )
    (subset,) = eval_json(capsys, "--scores", str(scores), "--reference", str(reference))["subsets"]
    assert (subset["matched"], subset["scored"], subset["no_prediction"]) == (3, 2, 1)
    assert subset["no_prediction_by_reason"] == {"step scores cut at max_length": 1}
    assert (subset["erroneous"], subset["correct"], subset["f1"]) == (1, 1, 1.0)


def test_roc_auc_by_hand():
    # positives 0.9, 0.4; negatives 0.5, 0.1: pairs (0.9>0.5, 0.9>0.1, 0.4<0.5, 0.4>0.1) -> 3/4
    assert roc_auc([0.9, 0.5, 0.4, 0.1], [True, False, True, False]) == pytest.approx(0.75)
    assert roc_auc([0.5, 0.5], [True, False]) == pytest.approx(0.5)  # a tie counts half
    assert roc_auc([0.3, 0.7], [True, True]) is None


def test_step_metrics_and_neutral_ratings():
    assert [rating_is_positive(0, mode) for mode in ("positive", "negative", "exclude")] == [True, False, None]
    human = [True, True, False, False]
    predicted = [True, False, False, True]
    metrics = step_metrics(human, predicted)
    assert metrics.accuracy == pytest.approx(0.5)
    assert (metrics.error_precision, metrics.error_recall, metrics.error_f1) == (pytest.approx(0.5), pytest.approx(0.5), pytest.approx(0.5))


def processbench_rows():
    return [
        {"id": "pb-0", "problem": "P0", "steps": ["a", "b", "c"], "label": -1, "final_answer_correct": True},
        {"id": "pb-1", "problem": "P1", "steps": ["a", "b", "c"], "label": 1, "final_answer_correct": False},
        {"id": "pb-2", "problem": "P2", "steps": ["a", "b"], "label": 0, "final_answer_correct": False},
        {"id": "pb-3", "problem": "P3", "steps": ["a", "b"], "label": -1, "final_answer_correct": True},
    ]


def eval_json(capsys, *args) -> dict:
    assert main(["eval", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_eval_of_labels_against_a_small_processbench_file(tmp_path, capsys):
    reference = write_jsonl(tmp_path / "tiny.jsonl", processbench_rows())
    labels = write_labels(
        tmp_path / "job",
        [
            labels_row("pb-0", "s0", "P0", ["a", "b", "c"], [1.0, 0.5, 0.25], [True, True, True]),  # -1, right
            labels_row("pb-1", "s1", "P1", ["a", "b", "c"], [1.0, 0.0, 0.0], [True, False, False]),  # 1, right
            labels_row("pb-2", "s2", "P2", ["a", "b"], [0.75, 0.0], [True, False]),  # 1 for 0, wrong
            labels_row("pb-3", "s3", "P3", ["a", "b"], [0.0, 0.0], [False, False]),  # 0 for -1, wrong
        ],
    )
    report = eval_json(capsys, "--labels", str(labels), "--reference", str(reference))
    (subset,) = report["subsets"]
    assert subset["subset"] == "tiny" and subset["format"] == "processbench" and subset["matched"] == 4
    assert (subset["erroneous_accuracy"], subset["correct_accuracy"], subset["f1"]) == (0.5, 0.5, 0.5)

    # With a threshold on soft labels: pb-0's 0.25 and 0.5 steps become errors at 0.6.
    report = eval_json(capsys, "--labels", str(labels), "--reference", str(reference), "--threshold", "0.6")
    (subset,) = report["subsets"]
    assert (subset["erroneous_accuracy"], subset["correct_accuracy"]) == (0.5, 0.0) and subset["f1"] == 0.0


def test_eval_of_prm_scores_counts_unmatched_and_misaligned_rows(tmp_path, capsys):
    reference = write_jsonl(tmp_path / "tiny.jsonl", processbench_rows())
    scores = write_jsonl(
        tmp_path / "scores.jsonl",
        [
            {"problem_id": "pb-0", "solution_id": "s0", "step_scores": [0.9, 0.8, 0.7]},
            {"problem_id": "pb-1", "solution_id": "s1", "step_scores": [0.9, 0.2, 0.1]},
            {"problem_id": "pb-2", "solution_id": "s2", "step_scores": [0.9, 0.9, 0.9]},  # 3 steps for 2: not compared
        ],
    )
    report = eval_json(capsys, "--scores", str(scores), "--reference", str(reference))
    (subset,) = report["subsets"]
    assert report["threshold"] == 0.5
    assert (subset["matched"], subset["unmatched"], subset["step_count_mismatch"]) == (2, 1, 1)
    assert (subset["erroneous_accuracy"], subset["correct_accuracy"], subset["f1"]) == (1.0, 1.0, 1.0)
    table = main(["eval", "--scores", str(scores), "--reference", str(reference)])
    out = capsys.readouterr().out
    assert table == 0 and out.splitlines()[0].split()[:3] == ["subset", "format", "matched"] and "not compared" in out


def test_eval_on_prm800k_ratings(tmp_path, capsys):
    def step(text, rating):
        return {"completions": [{"text": text, "rating": rating}], "chosen_completion": 0, "human_completion": None}

    rows = [
        {"question": {"problem": "Q1", "ground_truth_answer": "1"}, "label": {"steps": [step("s1", 1), step("s2", 0), step("s3", -1)]}},
        {"question": {"problem": "Q2", "ground_truth_answer": "2"}, "label": {"steps": [step("t1", 1), step("t2", 1)]}},
    ]
    reference = write_jsonl(tmp_path / "prm800k.jsonl", rows)
    from labeler.ids import stable_id

    labels = write_labels(
        tmp_path / "job",
        [
            labels_row(stable_id("Q1"), "a", "Q1", ["s1", "s2", "s3"], [1.0, 0.0, 0.0], [True, False, False]),
            labels_row(stable_id("Q2"), "b", "Q2", ["t1", "t2"], [1.0, 1.0], [True, True]),
        ],
    )
    excluded = eval_json(capsys, "--labels", str(labels), "--reference", str(reference))["subsets"][0]
    # neutral s2 left out: steps s1 (+,+), s3 (-,-), t1, t2 (+,+): all agree; human first errors 2 and -1, predicted 1 and -1
    assert excluded["format"] == "prm800k" and excluded["step_steps"] == 4 and excluded["step_accuracy"] == 1.0
    assert (excluded["erroneous_accuracy"], excluded["correct_accuracy"]) == (0.0, 1.0)
    negative = eval_json(capsys, "--labels", str(labels), "--reference", str(reference), "--neutral", "negative")["subsets"][0]
    assert negative["step_steps"] == 5 and negative["step_accuracy"] == 1.0 and negative["f1"] == 1.0
    positive = eval_json(capsys, "--labels", str(labels), "--reference", str(reference), "--neutral", "positive")["subsets"][0]
    assert positive["step_accuracy"] == pytest.approx(4 / 5)


def labels_from_processbench(path, first_error_of) -> list[dict]:
    """A labels row per ProcessBench row, hard labels negative from `first_error_of(row)` on."""
    rows = []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        first_error = first_error_of(row)
        hard = [first_error < 0 or i < first_error for i in range(len(row["steps"]))]
        rows.append(labels_row(row["id"], f"{row['id']}-s", row["problem"], row["steps"], [float(h) for h in hard], hard))
    return rows


def test_processbench_trivial_predictor_gives_the_hand_figures(tmp_path, capsys):
    files = [shared_data("processbench/gsm8k.jsonl"), shared_data("processbench/math.jsonl")]
    job = tmp_path / "all-correct"
    write_labels(job, [row for path in files for row in labels_from_processbench(path, lambda row: -1)], shard_size=500)
    report = eval_json(capsys, "--labels", str(job), "--reference", str(files[0]), "--reference", str(files[1]))
    for path, subset in zip(files, report["subsets"]):
        labels = [json.loads(line)["label"] for line in path.read_text().splitlines()]
        assert subset["subset"] == path.stem and subset["matched"] == len(labels)
        assert subset["erroneous"] == sum(label >= 0 for label in labels) > 0
        assert subset["correct"] == sum(label == -1 for label in labels) > 0
        assert (subset["erroneous_accuracy"], subset["correct_accuracy"], subset["f1"]) == (0.0, 1.0, 0.0)
    assert report["average_f1"] == 0.0

    # The human labels themselves score 100% everywhere.
    human = tmp_path / "human"
    write_labels(human, [row for path in files for row in labels_from_processbench(path, lambda row: row["label"])], shard_size=500)
    report = eval_json(capsys, "--labels", str(human), "--reference", str(files[0]), "--reference", str(files[1]))
    assert [s["f1"] for s in report["subsets"]] == [1.0, 1.0]


def test_eval_bad_usage_exits_2(tmp_path, capsys):
    reference = write_jsonl(tmp_path / "tiny.jsonl", processbench_rows())
    assert main(["eval", "--labels", str(tmp_path / "missing"), "--reference", str(reference)]) == 2
    assert capsys.readouterr().err.startswith("labeler eval: error:")
    not_reference = write_jsonl(tmp_path / "other.jsonl", [{"question": "x"}])
    labels = write_labels(tmp_path / "job", [labels_row("pb-0", "s0", "P0", ["a"], [1.0], [True])])
    assert main(["eval", "--labels", str(labels), "--reference", str(not_reference)]) == 2
    assert "--reference-format" in capsys.readouterr().err


def test_eval_sets_several_sources_side_by_side(tmp_path, capsys):
    reference = write_jsonl(tmp_path / "tiny.jsonl", [row | {"answer": "7"} for row in processbench_rows()])
    # human labels: the reference itself, imported, but only its first three rows
    partial = write_jsonl(tmp_path / "partial.jsonl", [row | {"answer": "7"} for row in processbench_rows()[:3]])
    assert main(["import", "--preset", "processbench", "--input", str(partial), "--output", str(tmp_path / "human"), "--quiet"]) == 0
    mc = write_labels(
        tmp_path / "mc",
        [
            labels_row("pb-0", "s0", "P0", ["a", "b", "c"], [1.0, 0.5, 0.25], [True, True, True]),  # -1, right
            labels_row("pb-1", "s1", "P1", ["a", "b", "c"], [1.0, 0.0, 0.0], [True, False, False]),  # 1, right
            labels_row("pb-2", "s2", "P2", ["a", "b"], [0.75, 0.0], [True, False]),  # 1 for 0, wrong
            labels_row("pb-3", "s3", "P3", ["a", "b"], [0.0, 0.0], [False, False]),  # 0 for -1, wrong
        ],
    )
    scores = write_jsonl(tmp_path / "scores.jsonl", [{"problem_id": f"pb-{i}", "solution_id": f"s{i}", "step_scores": [0.9] * n} for i, n in enumerate([3, 3, 2, 2])])
    capsys.readouterr()
    args = ["--labels", f"mc={mc}", "--labels", str(tmp_path / "human"), "--scores", f"prm={scores}", "--reference", str(reference)]
    report = eval_json(capsys, *args)
    by_name = {source["name"]: source for source in report["sources"]}
    assert list(by_name) == ["mc", "human", "prm"] and report["common"] is False
    assert [by_name[name]["label_source"] for name in by_name] == ["monte-carlo", "human", "PRM scores"]
    assert [by_name[name]["kind"] for name in by_name] == ["labels", "labels", "scores"] and by_name["prm"]["threshold"] == 0.5
    (mc_subset,), (human_subset,), (prm_subset,) = (by_name[name]["subsets"] for name in by_name)
    assert (mc_subset["matched"], mc_subset["f1"]) == (4, 0.5)
    assert (human_subset["matched"], human_subset["unmatched"], human_subset["erroneous_accuracy"], human_subset["correct_accuracy"]) == (3, 1, 1.0, 1.0)
    assert (prm_subset["erroneous_accuracy"], prm_subset["correct_accuracy"], prm_subset["f1"]) == (0.0, 1.0, 0.0)  # all correct

    # --common: every source on the three rows they all match (pb-3, which only mc and prm label, left out)
    common = {s["name"]: s["subsets"][0] for s in eval_json(capsys, *args, "--common")["sources"]}
    assert {name: s["matched"] for name, s in common.items()} == {"mc": 3, "human": 3, "prm": 3}
    assert common["mc"]["not_matched_by_every_source"] == 1
    assert (common["mc"]["erroneous_accuracy"], common["mc"]["correct_accuracy"]) == (0.5, 1.0)  # pb-3, its wrong one, is out

    assert main(["eval", *args]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:5] == ["source", "label", "source", "subset", "format"]
    assert [line.split()[0] for line in table[1:4]] == ["mc", "human", "prm"]
    assert any("--common compares them" in line for line in table)


def test_eval_sources_need_distinct_names(tmp_path, capsys):
    reference = write_jsonl(tmp_path / "tiny.jsonl", processbench_rows())
    labels = write_labels(tmp_path / "job", [labels_row("pb-0", "s0", "P0", ["a", "b", "c"], [1.0, 1.0, 1.0], [True, True, True])])
    other = write_labels(tmp_path / "other" / "job", [labels_row("pb-0", "s0", "P0", ["a", "b", "c"], [1.0, 1.0, 1.0], [True, True, True])])
    assert main(["eval", "--labels", str(labels), "--labels", str(other), "--reference", str(reference)]) == 2
    assert "two sources are named 'job': name them, as NAME=PATH" in capsys.readouterr().err
    assert main(["eval", "--reference", str(reference)]) == 2
    assert "give --labels DIR or --scores FILE or --prm SPEC or --judgments DIR" in capsys.readouterr().err


def test_eval_on_prm800k_counts_steps_without_a_prediction(tmp_path, capsys):
    def step(text, rating):
        return {"completions": [{"text": text, "rating": rating}], "chosen_completion": 0, "human_completion": None}

    rows = [
        {"question": {"problem": "Q1", "ground_truth_answer": "1"}, "label": {"steps": [step("s1", 1), step("s2", 0), step("s3", -1)]}},
        {"question": {"problem": "Q2", "ground_truth_answer": "2"}, "label": {"steps": [step("t1", 1), step("t2", 1)]}},
    ]
    reference = write_jsonl(tmp_path / "prm800k.jsonl", rows)
    from labeler.ids import stable_id

    labels = write_labels(
        tmp_path / "job",
        [
            labels_row(stable_id("Q1"), "a", "Q1", ["s1", "s2", "s3"], [1.0, 1.0, None], [True, True, None]),  # s3 unlabelled
            labels_row(stable_id("Q2"), "b", "Q2", ["t1", "t2"], [1.0, 1.0], [True, True]),
        ],
    )
    subset = eval_json(capsys, "--labels", str(labels), "--reference", str(reference))["subsets"][0]
    # Q1's first error is unknown (s3 has no label): left out; Q2 predicted -1, right
    assert (subset["scored"], subset["no_prediction"], subset["correct_accuracy"], subset["erroneous"]) == (1, 1, 1.0, 0)
    # steps: s2 is neutral (excluded by the human side), s3 has no prediction: counted apart, not a step of the metrics
    assert (subset["step_steps"], subset["step_no_prediction"], subset["step_accuracy"]) == (3, 1, 1.0)
    asked = eval_json(capsys, "--labels", str(labels), "--reference", str(reference), "--missing", "as-correct")["subsets"][0]
    # s3 read as predicted right against its -1 rating
    assert (asked["scored"], asked["erroneous"], asked["erroneous_accuracy"]) == (2, 1, 0.0)
    assert (asked["step_steps"], asked["step_no_prediction"], asked["step_accuracy"]) == (4, 1, 0.75)


def test_eval_common_leaves_out_rows_some_source_cannot_predict(tmp_path, capsys):
    reference = write_jsonl(tmp_path / "tiny.jsonl", processbench_rows())
    mc = write_labels(
        tmp_path / "mc",
        [
            labels_row("pb-0", "s0", "P0", ["a", "b", "c"], [1.0, None, 1.0], [True, None, True]),  # no prediction
            labels_row("pb-1", "s1", "P1", ["a", "b", "c"], [1.0, 0.0, 0.0], [True, False, False]),
            labels_row("pb-2", "s2", "P2", ["a", "b"], [0.0, 0.0], [False, False]),
            labels_row("pb-3", "s3", "P3", ["a", "b"], [1.0, 1.0], [True, True]),
        ],
    )
    scored = [{"problem_id": f"pb-{i}", "solution_id": f"s{i}", "step_scores": [0.9] * n} for i, n in enumerate([3, 3, 2, 2])]
    scores = write_jsonl(tmp_path / "scores.jsonl", scored)
    args = ["--labels", f"mc={mc}", "--scores", f"prm={scores}", "--reference", str(reference)]
    report = eval_json(capsys, *args)
    by_name = {source["name"]: source["subsets"][0] for source in report["sources"]}
    assert (by_name["mc"]["scored"], by_name["mc"]["no_prediction"], by_name["prm"]["scored"]) == (3, 1, 4)
    common = {source["name"]: source["subsets"][0] for source in eval_json(capsys, *args, "--common")["sources"]}
    assert {name: s["scored"] for name, s in common.items()} == {"mc": 3, "prm": 3}
    assert common["prm"]["not_predicted_by_every_source"] == 1 and common["prm"]["not_matched_by_every_source"] == 0
    assert main(["eval", *args, "--common"]) == 0
    assert "left out (--common), without a prediction from every source: 1 tiny" in capsys.readouterr().out


ROW = st.lists(st.sampled_from([True, False, None]), min_size=1, max_size=8).flatmap(
    lambda steps: st.tuples(st.just(steps), st.integers(-1, len(steps) - 1))
)


@settings(max_examples=200, deadline=None)
@given(st.lists(ROW, min_size=1, max_size=6))
def test_a_row_is_scored_only_when_its_first_predicted_error_is_known(rows):
    """Through eval's own path (human_agreement.subset_result): a row counts in the metrics exactly when its first
    predicted error is known, the rest are counted apart; asked for, unpredicted steps read as right."""
    from labeler.evaluation.human_agreement import Prediction, subset_result
    from labeler.evaluation.references import ReferenceSet, ReferenceSolution

    texts = lambda steps: tuple(f"step {i}" for i in range(len(steps)))  # noqa: E731
    reference = ReferenceSet(
        "random", "processbench", [ReferenceSolution(f"p{i}", texts(steps), human) for i, (steps, human) in enumerate(rows)], 0
    )
    predictions = [
        Prediction(f"p{i}", f"s{i}", texts(steps), len(steps), tuple(steps), tuple(None if ok is None else float(ok) for ok in steps))
        for i, (steps, _) in enumerate(rows)
    ]
    for steps, _ in rows:
        first, first_false = first_predicted_error(steps), next((i for i, ok in enumerate(steps) if ok is False), -1)
        before = steps if first_false < 0 else steps[:first_false]
        assert (first is None) == (None in before) and first in (None, first_false)
    known = [(human, first_predicted_error(steps)) for steps, human in rows if first_predicted_error(steps) is not None]
    result = subset_result(reference, predictions)
    assert (result["matched"], result["scored"], result["no_prediction"]) == (len(rows), len(known), len(rows) - len(known))
    assert result["erroneous"] + result["correct"] == len(known)
    assert {k: result[k] for k in first_error_metrics(known).to_dict()} == first_error_metrics(known).to_dict()
    as_correct = subset_result(reference, predictions, missing="as-correct")
    assert as_correct["scored"] == as_correct["erroneous"] + as_correct["correct"] == len(rows)


def test_average_f1_is_none_when_a_subset_has_no_f1(tmp_path, capsys):
    """A subset without an F1 (every row unpredicted) does not vanish from the average: the average is unknown."""
    a = write_jsonl(tmp_path / "gsm8k.jsonl", processbench_rows()[:2])
    b = write_jsonl(tmp_path / "math.jsonl", [dict(row, id=f"pm-{i}") for i, row in enumerate(processbench_rows()[:2])])
    labels = write_labels(
        tmp_path / "job",
        [
            labels_row("pb-0", "s0", "P0", ["a", "b", "c"], [1.0] * 3, [True] * 3),
            labels_row("pb-1", "s1", "P1", ["a", "b", "c"], [1.0, 0.0, 0.0], [True, False, False]),
            labels_row("pm-0", "t0", "P0", ["a", "b", "c"], [None] * 3, [None] * 3),
            labels_row("pm-1", "t1", "P1", ["a", "b", "c"], [None] * 3, [None] * 3),
        ],
    )
    args = ["--labels", str(labels), "--reference", str(a), "--reference", str(b)]
    report = eval_json(capsys, *args)
    assert [s["f1"] for s in report["subsets"]] == [1.0, None]
    assert (report["average_f1"], report["average_f1_subsets"], report["subsets_without_f1"]) == (None, 0, ["math"])
    assert main(["eval", *args]) == 0
    assert "average F1: n/a (no F1 for math; 0 of 2 subsets averaged)" in capsys.readouterr().out
    # with every subset known, the count says what was averaged
    report = eval_json(capsys, "--labels", str(labels), "--reference", str(a))
    assert (report["average_f1"], report["average_f1_subsets"], report["subsets_without_f1"]) == (1.0, 1, [])


def test_eval_gives_every_scorer_its_best_threshold_beside_the_one_it_was_given(tmp_path, capsys):
    """Scores that rank right (0.96, 0.95) above wrong (0.9) steps get F1 0 at 0.5 and 1.0 at their best
    threshold; a solution with a step past the scorer's length is left out of that sweep and counted."""
    reference = write_jsonl(tmp_path / "tiny.jsonl", processbench_rows())
    scores = write_jsonl(
        tmp_path / "scores.jsonl",
        [
            {"problem_id": "pb-0", "solution_id": "s0", "step_scores": [0.99, 0.98, 0.97]},
            {"problem_id": "pb-1", "solution_id": "s1", "step_scores": [0.96, 0.9, 0.1]},
            {"problem_id": "pb-2", "solution_id": "s2", "step_scores": [0.9, 0.99]},
            {"problem_id": "pb-3", "solution_id": "s3", "step_scores": [0.95, None]},
        ],
    )
    (subset,) = eval_json(capsys, "--scores", str(scores), "--reference", str(reference), "--missing", "as-correct")["subsets"]
    assert subset["f1"] == 0.0 and subset["f1_at_best_threshold"] == 1.0 and 0.9 < subset["best_threshold"] <= 0.96
    assert (subset["best_threshold_rows"], subset["best_threshold_unscored"]) == (4, 0)  # the unscored step read as right
    (subset,) = eval_json(capsys, "--scores", str(scores), "--reference", str(reference))["subsets"]
    assert (subset["best_threshold_rows"], subset["best_threshold_unscored"]) == (3, 1)  # left out, and counted
    assert main(["eval", "--scores", str(scores), "--reference", str(reference)]) == 0
    out = capsys.readouterr().out
    assert "F1 at best t*" in out and "optimistic" in out and "1 left out" in out and "F1 is over" not in out  # the same 3 rows


def test_the_best_threshold_line_says_when_its_rows_are_not_f1s(tmp_path, capsys):
    """A score missing after the first error at the given threshold leaves a row out of F1 but not out of the
    sweep (every step up to the reference's first error is scored): the table says so; and a sweep with no row
    at all still says why."""
    reference = write_jsonl(tmp_path / "tiny.jsonl", processbench_rows()[:2])
    scores = write_jsonl(tmp_path / "scores.jsonl", [
        {"problem_id": "pb-0", "solution_id": "s0", "step_scores": [0.9, 0.8, 0.7]},
        {"problem_id": "pb-1", "solution_id": "s1", "step_scores": [0.9, 0.8, None]},
    ])  # fmt: skip
    assert main(["eval", "--scores", str(scores), "--reference", str(reference)]) == 0
    out = capsys.readouterr().out
    assert "over 2 rows" in out and "F1 is over 1 rows" in out
    unscored = write_jsonl(tmp_path / "none.jsonl", [
        {"problem_id": "pb-0", "solution_id": "s0", "step_scores": [None, None, None]},
        {"problem_id": "pb-1", "solution_id": "s1", "step_scores": [None, None, None]},
    ])  # fmt: skip
    assert main(["eval", "--scores", str(unscored), "--reference", str(reference)]) == 0
    out = capsys.readouterr().out
    assert "2 left out" in out and "n/a (no erroneous and correct solution" in out


def test_labels_and_judgments_get_no_best_threshold(tmp_path, capsys):
    """A labels source's scores are soft labels and a judge's are 1/0 up to the step it names: no sweep over them
    (a judge that names an early step leaves the later ones unscored, and would be scored on other rows)."""
    reference = write_jsonl(tmp_path / "tiny.jsonl", processbench_rows())
    rows = [labels_row(f"pb-{i}", f"s{i}", f"P{i}", row["steps"], [1.0] * len(row["steps"]), [True] * len(row["steps"]))
            for i, row in enumerate(processbench_rows())]  # fmt: skip
    labels = write_labels(tmp_path / "labels", rows)
    (subset,) = eval_json(capsys, "--labels", str(labels), "--reference", str(reference))["subsets"]
    assert "f1_at_best_threshold" not in subset and subset["f1"] is not None


def test_the_best_threshold_sweep_agrees_with_trying_every_threshold():
    import random

    from labeler.evaluation.metrics import best_first_error_threshold

    rng = random.Random(0)
    for _ in range(200):
        solutions = []
        for _ in range(rng.randint(2, 8)):
            steps = [round(rng.random(), 2) for _ in range(rng.randint(1, 4))]
            solutions.append((rng.choice([-1, *range(len(steps))]), steps))
        best = best_first_error_threshold(solutions)
        if best is None:
            assert all(label >= 0 for label, _ in solutions) or all(label < 0 for label, _ in solutions)
            continue
        pairs = lambda t: [(label, next((i for i, p in enumerate(row) if p < t), -1)) for label, row in solutions]  # noqa: E731
        brute = max(first_error_metrics(pairs(t / 200)).f1 for t in range(0, 202))
        assert best[1] == pytest.approx(brute) and first_error_metrics(pairs(best[0])).f1 == pytest.approx(best[1])


def _scores_file(tmp_path):
    return write_jsonl(
        tmp_path / "scores.jsonl",
        [
            {"problem_id": "pb-0", "solution_id": "s0", "step_scores": [0.9, 0.8, 0.7]},
            {"problem_id": "pb-1", "solution_id": "s1", "step_scores": [0.9, 0.2, 0.1]},
        ],
    )


def test_the_text_report_names_its_threshold_and_where_it_came_from(tmp_path, capsys):
    """Issue 53, item 15: the text report did not name its threshold; the JSON says where it came from too."""
    reference = write_jsonl(tmp_path / "tiny.jsonl", processbench_rows())
    scores = _scores_file(tmp_path)
    assert main(["eval", "--scores", str(scores), "--reference", str(reference)]) == 0
    assert "threshold: 0.5 (the default for scores; --threshold sets another)" in capsys.readouterr().out
    assert main(["eval", "--scores", str(scores), "--reference", str(reference), "--threshold", "0.3"]) == 0
    assert "threshold: 0.3 (--threshold)" in capsys.readouterr().out
    assert eval_json(capsys, "--scores", str(scores), "--reference", str(reference))["threshold_from"] == "default"
    labels = write_labels(tmp_path / "job", [labels_row("pb-0", "s0", "P0", ["a", "b", "c"], [1.0, 0.5, 0.25], [True, True, True])])
    assert main(["eval", "--labels", str(labels), "--reference", str(reference)]) == 0
    assert "threshold: none (hard labels; --threshold reads soft labels instead)" in capsys.readouterr().out
    assert main(["eval", "--labels", f"mc={labels}", "--scores", f"prm={scores}", "--reference", str(reference)]) == 0
    out = capsys.readouterr().out
    assert "threshold (mc): none (hard labels" in out and "threshold (prm): 0.5 (the default for scores" in out


def test_a_prm_checkpoint_threshold_is_named_as_chosen_on_its_validation_split(tmp_path, capsys, monkeypatch):
    from labeler.cli import common
    from labeler.cli import eval as eval_cli

    reference = write_jsonl(tmp_path / "tiny.jsonl", processbench_rows())
    monkeypatch.setattr(eval_cli, "stored_threshold", lambda spec: 0.37)
    monkeypatch.setattr(common, "prm_scorer", lambda *args, **kwargs: ConstantScorer(0.9))
    assert main(["eval", "--prm", "ours=unused", "--reference", str(reference), "--quiet", "--device", "cpu"]) == 0
    assert "threshold: 0.37 (chosen on the PRM's validation split by `labeler train`; --threshold sets another)" in capsys.readouterr().out


class ConstantScorer:
    """A step scorer for the eval command's own logic (progress, threshold): every step the same score."""

    name = "constant"

    def __init__(self, score: float, calls: list | None = None):
        self.score, self.calls = score, calls if calls is not None else []

    def step_scores(self, solutions):
        self.calls.append(len(solutions))
        return [[self.score] * len(s.steps) for s in solutions]

    def close(self):
        pass


def test_eval_with_a_prm_shows_its_scoring_progress_on_stderr(tmp_path, capsys, monkeypatch):
    """Issue 53, item 15: 400 rows scored for over a minute with no line; now a line per chunk of solutions scored."""
    from labeler.cli import common

    rows = [{"id": f"pb-{i}", "problem": f"P{i}", "steps": ["a", "b"], "label": -1, "final_answer_correct": True} for i in range(40)]
    reference = write_jsonl(tmp_path / "many.jsonl", rows)
    calls: list[int] = []
    monkeypatch.setattr(common, "prm_scorer", lambda *args, **kwargs: ConstantScorer(0.9, calls))
    assert main(["eval", "--prm", "unused", "--reference", str(reference), "--batch-size", "2", "--device", "cpu"]) == 0
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "reference solutions scored" in line]
    assert len(lines) == len(calls) > 1 and sum(calls) == 40, (calls, err)
    assert "40/40 reference solutions scored" in lines[-1] and "ETA" in lines[0]


def test_ctrl_c_in_eval_says_nothing_was_saved(tmp_path, capsys, monkeypatch):
    """Issue 53, item 15: it said 'rerun the same command to resume', and eval saves nothing to resume from."""
    from labeler.evaluation import human_agreement

    reference = write_jsonl(tmp_path / "tiny.jsonl", processbench_rows())

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(human_agreement, "evaluate", interrupted)
    assert main(["eval", "--scores", str(_scores_file(tmp_path)), "--reference", str(reference)]) == 130
    err = capsys.readouterr().err
    assert "resume" not in err and "labeler eval: interrupted; nothing was saved" in err
