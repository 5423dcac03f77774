"""`labeler bon` and `labeler search`: bad input is one line and exit code 2, before any engine or PRM
starts; a candidates job of other settings is refused. Inputs whose rows all carry solutions need no
sampling, so an engine that must never generate stands in for vLLM here (tests/test_bon_search_engine.py
runs the real one)."""

import json

import pytest

from labeler.cli import main
from labeler.prm.model import ProcessRewardModel
from tests.conftest import write_jsonl

GIVEN = [
    {"problem": "What is 2 + 2?", "answer": "4", "solution": "2 + 2 = 4.\n\nThe answer is: 4"},
    {"problem": "What is 2 + 2?", "answer": "4", "solution": "2 + 2 = 5.\n\nThe answer is: 5"},
    {"problem": "What is 3 + 3?", "answer": "6", "solution": "3 + 3 = 6.\n\nThe answer is: 6"},
]


class NeverGenerates:
    """Stands in for the engine where nothing is to be sampled; fails the test if asked to."""

    model_name, closed = "never", False

    def describe(self):
        return {"model": self.model_name, "model_revision": "none", "dtype": "float32", "max_model_len": 1024}

    def generate(self, requests, sampling):
        raise AssertionError(f"asked to generate {len(requests)} requests")

    def close(self):
        pass


@pytest.fixture
def engine_starts(monkeypatch):
    import workers.vllm_generator

    starts = []
    monkeypatch.setattr(workers.vllm_generator, "start_engine", lambda model, config: starts.append(model) or NeverGenerates())
    return starts


@pytest.fixture(scope="module")
def prm(tiny_model_dir, tmp_path_factory):
    path = tmp_path_factory.mktemp("prm") / "checkpoint"
    ProcessRewardModel.from_backbone(str(tiny_model_dir), max_length=128, target="soft", rendering="plain").save(path)  # 128 tokens: the long candidate is cut
    return str(path)


@pytest.fixture
def given(tmp_path):
    return write_jsonl(tmp_path / "given.jsonl", GIVEN)


def error_of(capsys, *args) -> str:
    assert main(list(args)) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    return lines[0]


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--candidates", "0"], "--candidates must be"),
        (["--subsets", "0"], "--subsets must be"),
        (["--prm-batch-size", "0"], "--prm-batch-size must be"),
        (["--temperature", "-1"], "--temperature must be"),
        (["--prm", "a", "--prm", "a"], "each PRM once"),
        (["--device", "cuda"], "no CUDA device"),
    ],
)
def test_bon_bad_settings_exit_2_before_anything_starts(flags, message, given, tmp_path, engine_starts, capsys):
    line = error_of(capsys, "bon", "--input", str(given), "--output", str(tmp_path / "out"), *flags)
    assert line.startswith("labeler bon: error:") and message in line
    assert engine_starts == [] and not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--beams", "0"], "--beams must be"),
        (["--proposals", "0"], "--proposals must be"),
        (["--max-steps", "0"], "--max-steps must be"),
        (["--step-separator", ""], "--step-separator must not be empty"),
        (["--step-separator", "\\x"], "--step-separator"),
        (["--candidates", "0"], "--candidates must be"),
    ],
)
def test_search_bad_settings_exit_2(flags, message, given, tmp_path, engine_starts, capsys):
    line = error_of(capsys, "search", "--input", str(given), "--output", str(tmp_path / "out"), "--prm", "p", *flags)
    assert message in line and engine_starts == []


def test_unknown_choices_and_missing_flags_are_usage_errors(given, tmp_path, capsys):
    for args in (["search", "--input", str(given), "--output", "o", "--prm", "p", "--aggregate", "median"], ["search", "--input", str(given), "--output", "o"]):
        with pytest.raises(SystemExit) as exit:
            main(args)
        assert exit.value.code == 2
    assert "--aggregate: invalid choice" in capsys.readouterr().err


def test_unreadable_or_empty_input_exits_2_before_an_engine_starts(tmp_path, engine_starts, capsys):
    for command in (["bon"], ["search", "--prm", "p"]):
        line = error_of(capsys, *command, "--input", str(tmp_path / "missing.jsonl"), "--output", str(tmp_path / "out"))
        assert "missing.jsonl" in line
        empty = tmp_path / "empty.jsonl"
        empty.write_text("\n")
        assert "no rows" in error_of(capsys, *command, "--input", str(empty), "--output", str(tmp_path / "out"))
    assert engine_starts == []


def test_given_candidates_need_no_sampling_and_another_pool_size_is_refused(given, prm, tmp_path, engine_starts, capsys):
    output = tmp_path / "out"
    args = ["bon", "--input", str(given), "--output", str(output), "--prm", prm, "--device", "cpu", "--quiet", "--json", "--prm-backend", "torch"]
    assert main(args) == 0
    results = json.loads(capsys.readouterr().out)
    assert results["candidates"] == 3 and results["candidates_correct"] == 2 and results["tokens_per_candidate"] is None
    assert results["n"] == [1, 2] and results["problems_capped"] == [0, 1]
    # 2 + 2: one of two right, 3 + 3: its only candidate right
    assert results["baselines"]["pass"] == pytest.approx([(0.5 + 1) / 2, 1.0])
    assert results["baselines"]["majority"] == pytest.approx([(0.5 + 1) / 2, (0.5 + 1) / 2])  # a tie of 4 and 5 earns 1/2
    # --candidates where every row carries a solution samples nothing: refused, naming the flag that samples
    line = error_of(capsys, *args, "--candidates", "8")
    assert "--candidates 8 samples nothing here" in line and "--sample-solutions" in line
    # --sample-solutions is another candidates job: refused, naming the setting
    line = error_of(capsys, *args, "--candidates", "8", "--sample-solutions")
    assert "sample_solutions" in line
    assert engine_starts == []  # nothing to sample: no model loaded
    assert main(["report", str(output), "--output", str(tmp_path / "report")]) == 0
    assert "Best-of-N" in (tmp_path / "report" / "index.html").read_text()


LONG_STEPS = "\n\n".join(f"Step {i}: we write the sum out once more, two and two, and count every unit of it slowly." for i in range(12))
UNMEASURED = [
    {"problem": "What is 2 + 2?", "answer": "4", "solution": LONG_STEPS + "\n\nThe answer is: 4"},  # past the PRM's 128 tokens
    {"problem": "What is 2 + 2?", "answer": "4", "solution": "2 + 2 = 5.\n\nThe answer is: 5"},
    {"problem": "What is 2 + 2?", "answer": "4", "solution": "I am not sure how to go on."},  # no answer to check
    {"problem": "What is 3 + 3?", "answer": "6", "solution": "3 + 3 = 6.\n\nThe answer is: 6"},
]


def test_bon_counts_candidates_not_fully_scored_and_answers_not_checked(prm, tmp_path, engine_starts, capsys):
    """The right candidate cut at the PRM's max length ranks below the two it scored (both wrong), so PRM selection
    of all three is wrong; the JSON and the table say how many candidates were not scored or checked and how much of
    each figure rests on them."""
    given = write_jsonl(tmp_path / "unmeasured.jsonl", UNMEASURED)
    args = ["bon", "--input", str(given), "--output", str(tmp_path / "out"), "--prm", prm, "--device", "cpu", "--quiet", "--prm-backend", "torch"]
    assert main([*args, "--json"]) == 0
    results = json.loads(capsys.readouterr().out)
    assert results["n"] == [1, 2, 3] and sum(results["candidates_unchecked"].values()) == 1
    [scored_by] = results["prms"]
    assert scored_by["candidates_unscored"] == 1
    assert scored_by["candidates_unscored_by_reason"] == {"past the PRM's length limit": 1}
    assert scored_by["no_scored_candidate"] == pytest.approx([1 / 6, 0, 0])  # 2 + 2 at N=1: the cut one alone
    for how, values in scored_by["selection"].items():
        assert values[-1] == pytest.approx(0.5), how  # 2 + 2: a wrong pick; 3 + 3: right
    # the candidate with no answer: a random pick draws it 1 time in 3 on 2 + 2; pass@3 always finds the right one
    assert results["counted_wrong_unchecked"]["random"] == pytest.approx([1 / 6] * 3)
    assert results["counted_wrong_unchecked"]["pass"][-1] == 0
    assert set(scored_by["counted_wrong_unchecked"]) == {"selection", "weighted_vote"}
    assert main(args) == 0
    table = capsys.readouterr().out
    assert "1 candidates not fully scored (past the PRM's length limit: 1), ranked last" in table and "problems with none scored" in table
    assert "candidates whose answer was not checked, counted wrong: 1 (the last step states no answer" in table
    # a vote's share is a lower bound (a right unchecked candidate would also vote), exact for the others
    assert "votes: a lower bound" in table and "could be higher by as much:" not in table
    assert results["counted_wrong_unchecked_bound"] == {
        "pass": "exact", "random": "exact", "majority": "lower bound", "selection": "exact", "weighted_vote": "lower bound"
    }
    assert main(["report", str(tmp_path / "out"), "--output", str(tmp_path / "report")]) == 0
    page = (tmp_path / "report" / "index.html").read_text()
    assert "1 candidates whose answer was not checked count as wrong" in page and "could not fully score 1 candidates" in page
