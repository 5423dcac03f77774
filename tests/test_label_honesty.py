"""No silent wrong labels: cut rollouts, adaptive's stopping rule, final steps that state no answer,
prefixes beyond the context (issue 10). Logic only, on the deterministic test double; the engine's
side (finish_reason "length" and the shrunk budget) is tested in test_vllm_generator.py."""

import pytest

from labeler.checking.checker import AnswerChecker
from labeler.labeling.generation import SamplingSettings
from labeler.labeling.monte_carlo import soft_label
from labeler.labeling.planning import assign_row_keys
from labeler.labeling.solution_sampling import sample_solutions
from labeler.labeling.strategies import StrategySettings, label
from labeler.labeling.tables import Provenance, labels_table, rollouts_table
from labeler.records import Solution, SourceRow
from schemas import validate_labels, validate_rollouts
from tests.fakes import CUT_HERE_MARKER, CUT_MARKER, LONG_MARKER, PONDER_MARKER, SLOW_MARKER, WRONG_MARKER, ScriptedGenerator, SlowChecker

PROBLEM, ANSWER = "What is 20 + 22?", "42"


def solution(*steps: str, sid: str = "s", complete: bool = True) -> Solution:
    return Solution("p", sid, PROBLEM, ANSWER, tuple(steps), "test", 0, complete=complete)


@pytest.fixture(scope="module")
def checker():
    with AnswerChecker() as checker:
        yield checker


def trace(*thinking: str, response: str = "The answer is: 42", sid: str = "t") -> Solution:
    return Solution("p", sid, PROBLEM, ANSWER, (*thinking, response), "trace", 0, thinking_steps=len(thinking))


def run(strategy, solutions, checker, miss_every=None, generator=None, **overrides):
    settings = StrategySettings(**{"rollouts": 8, "sampling": SamplingSettings(max_new_tokens=16), "seed": 5, **overrides})
    generator = generator or ScriptedGenerator({PROBLEM: ANSWER}, miss_every=miss_every)
    outcome = label(strategy, solutions, generator, checker, settings)
    labels = labels_table(outcome.labelled, Provenance("u", "m", strategy, 5, "h"))
    validate_labels(labels)  # the data contract holds in every case below
    problem_ids = {item.solution.solution_id: "p" for item in outcome.labelled}
    validate_rollouts(rollouts_table(outcome.rollouts, problem_ids))
    return outcome, labels.to_pylist()


def test_cut_rollouts_are_truncated_not_wrong(checker):
    outcome, rows = run("exhaustive", [solution(f"First {CUT_MARKER}.", "The answer is 42.")], checker)
    row = rows[0]
    # 8 rollouts from step 0, the 4 of even seed cut: soft = 4 correct / 4 finished, not 4 / 8
    assert (row["n_rollouts"][0], row["n_truncated"][0], row["n_correct"][0], row["soft_labels"][0]) == (4, 4, 4, 1.0)
    cut = [r for r in outcome.rollouts if r.step_index == 0 and r.finish_reason == "length"]
    assert len(cut) == 4 and {r.verdict for r in cut} == {"truncated"} and all(r.extracted_answer is None for r in cut)
    assert all(r.token_budget == 16 for r in outcome.rollouts if r.step_index == 0)


def test_truncated_incorrect_keeps_math_shepherds_count(checker):
    _, rows = run("exhaustive", [solution(f"First {CUT_MARKER}.", "The answer is 42.")], checker, truncated="incorrect")
    row = rows[0]
    assert (row["n_rollouts"][0], row["n_truncated"][0], row["n_correct"][0], row["soft_labels"][0]) == (8, 4, 4, 0.5)


def test_a_step_whose_rollouts_were_all_cut_is_unlabelled_with_the_reason(checker):
    _, rows = run("exhaustive", [solution("First.", f"Second {CUT_MARKER}!.", "The answer is 42.")], checker)
    row = rows[0]
    assert row["label_method"] == ["rollouts", "unlabelled", "final_answer"]
    assert row["soft_labels"][1] is None and row["hard_labels"][1] is None and row["n_truncated"][1] == 8
    assert "cut by the token budget" in row["unlabelled_reason"][1]
    assert row["unlabelled_reason"][0] is None and row["unlabelled_reason"][2] is None


@pytest.mark.parametrize("strategy", ["first-error", "adaptive", "posterior"])
def test_round_based_strategies_survive_a_prefix_with_every_rollout_cut(strategy, checker):
    steps = ("One.", f"Two {CUT_MARKER}!.", "Three.", "Four.", "The answer is 42.")
    outcome, rows = run(strategy, [solution(*steps)], checker)
    row = rows[0]
    assert row["label_method"][1] == "unlabelled" and "cut" in row["unlabelled_reason"][1]
    assert False not in row["hard_labels"]  # no step was called wrong for want of a finished rollout


def test_first_error_steps_over_a_prefix_with_no_verdict_and_still_finds_the_first_error(checker):
    steps = ("One.", f"Two {CUT_HERE_MARKER}", "Three.", f"Four {WRONG_MARKER}.", "Five.", "The answer is 41.")
    _, rows = run("first-error", [solution(*steps)], checker)
    row = rows[0]
    # the steps' labels find step 3; the unlabelled step 1 before it may be the first error: first_error is not known
    assert row["hard_labels"] == [True, None, True, False, False, False] and row["first_error"] is None
    assert row["label_method"][1] == "unlabelled" and "cut" in row["unlabelled_reason"][1]
    _, exhaustive = run("exhaustive", [solution(*steps)], checker)
    assert exhaustive[0]["hard_labels"][3] is False and exhaustive[0]["first_error"] is None


def test_adaptive_writes_soft_labels_only_where_a_prefix_reached_n(checker):
    solutions = [solution("One.", "Two.", f"Three {WRONG_MARKER}.", "The answer is 41.", sid="a"), solution("Uno.", "The answer is 42.", sid="b")]
    _, adaptive = run("adaptive", solutions, checker, miss_every=3, ci_width=0.05)
    _, exhaustive = run("exhaustive", solutions, checker, miss_every=3)
    for a, e in zip(adaptive, exhaustive):
        for i, method in enumerate(a["label_method"]):
            if method == "early_stop":  # stopped at its first correct rollout: 1 of 2 is not an estimate of p
                assert a["soft_labels"][i] is None and a["hard_labels"][i] == (a["n_correct"][i] > 0) and a["n_rollouts"][i] < 8
            elif method == "rollouts":  # reached N: the very completions exhaustive drew
                assert a["soft_labels"][i] == e["soft_labels"][i] and a["n_rollouts"][i] == 8
    methods = [m for row in adaptive for m in row["label_method"]]
    assert "early_stop" in methods and "rollouts" in methods  # both cases happened


def test_a_final_step_that_states_no_answer_is_rolled_out(checker):
    outcome, rows = run("exhaustive", [solution("One.", "So $x^2$ is the next thing to find")], checker)
    assert rows[0]["label_method"] == ["rollouts", "rollouts"] and rows[0]["n_rollouts"] == [8, 8]


def test_a_solution_known_to_stop_early_has_its_last_step_rolled_out(checker):
    # a PRM800K trajectory that ends at an error: its last step computes something, it is no final answer
    outcome, rows = run("exhaustive", [solution("One.", "So x = 25.", complete=False)], checker)
    assert rows[0]["label_method"] == ["rollouts", "rollouts"]
    _, checked = run("exhaustive", [solution("One.", "So x = 25.")], checker)
    assert checked[0]["label_method"] == ["rollouts", "final_answer"]


@pytest.mark.parametrize("strategy", ["exhaustive", "first-error", "adaptive", "posterior"])
def test_steps_beyond_the_context_are_unlabelled_and_earlier_steps_keep_their_labels(strategy, checker):
    steps = ("One.", "Two.", f"Three {LONG_MARKER}.", f"Four {LONG_MARKER}.", "The answer is 42.")
    outcome, rows = run(strategy, [solution(*steps)], checker, final_step="rollouts")
    assert not outcome.failed
    row = rows[0]
    assert row["hard_labels"][:2] == [True, True]
    assert row["label_method"][2:] == ["unlabelled"] * 3 and all(row["unlabelled_reason"][2:])
    assert any("does not fit the model's context" in reason for reason in row["unlabelled_reason"][2:])


def test_a_sampled_solution_cut_by_its_budget_is_marked_and_its_last_step_rolled_out(checker):
    source = SourceRow(0, "p", PROBLEM, ANSWER, None, "test")
    planned = assign_row_keys([source])
    generator = ScriptedGenerator({PROBLEM: ANSWER}, sampled_solution=f"First.\n\nThen {CUT_MARKER} on and on")
    solutions, rejected, rejected_tokens = sample_solutions(planned, generator, per_problem=2, sampling=SamplingSettings(), seed=0, split_rule="auto")
    assert len(solutions) == 2 and not rejected and rejected_tokens == 0
    assert all(s.sampling_truncated and not s.complete and s.sampling_tokens > 0 for s in solutions)
    outcome = label("exhaustive", solutions[:1], generator, checker, StrategySettings(rollouts=2, sampling=SamplingSettings(), seed=0))
    row = labels_table(outcome.labelled, Provenance("u", "m", "exhaustive", 0, "h")).to_pylist()[0]
    assert row["solution_truncated"] and row["solution_tokens"] == solutions[0].sampling_tokens
    assert row["label_method"][-1] != "final_answer"
    assert row["generated_tokens"] == row["solution_tokens"] + sum(r.tokens for r in outcome.rollouts)


def test_soft_label_of_an_early_stop_is_none():
    from labeler.records import StepCounts

    assert soft_label(StepCounts(n_correct=1, n_rollouts=2, measured_by="early_stop")) is None
    assert soft_label(StepCounts(n_correct=1, n_rollouts=2)) == 0.5


class TimingOutChecker:
    """A checker double whose first `sick_calls` calls time out on every pair (a checker gone sick), then heals."""

    def __init__(self, checker, sick_calls: int):
        self.checker, self.sick_calls, self.calls = checker, sick_calls, 0

    def check_many(self, pairs, questions=None):
        from labeler.checking import CheckResult, Verdict

        self.calls += 1
        if self.calls <= self.sick_calls:
            return [CheckResult(Verdict.TIMEOUT, None) for _ in pairs]
        return self.checker.check_many(pairs, questions)


def run_unit(tmp_path, checker, **overrides):
    import pyarrow.parquet as pq

    from labeler.labeling.config import LabelConfig
    from labeler.labeling.job import run_job
    from tests.conftest import write_jsonl
    from workers.local_executor import LocalExecutor

    rows = [{"id": f"r{i}", "problem": PROBLEM, "answer": ANSWER, "steps": ["One.", "Two.", "The answer is 42."]} for i in range(3)]
    data = write_jsonl(tmp_path / "in.jsonl", rows)
    config = LabelConfig(input=str(data), output=str(tmp_path / "out"), model="scripted", rollouts=4, shard_size=8, **overrides)
    run_job(config, executor=LocalExecutor(lambda: ScriptedGenerator({PROBLEM: ANSWER}, miss_every=None), checker), model_info={"name": "s"}, progress_enabled=False)
    out = tmp_path / "out"
    labels = pq.read_table(out / "labels").to_pylist() if (out / "labels").exists() and any((out / "labels").iterdir()) else []
    rejected = [r for r in pq.read_table(out / "rejected").to_pylist() if r["stage"] == "generation"]
    return labels, rejected


def test_a_timeout_is_retried_once_and_a_healed_checker_labels_as_usual(tmp_path, checker):
    labels, rejected = run_unit(tmp_path, TimingOutChecker(checker, sick_calls=1))
    assert len(labels) == 3 and not rejected
    assert all(row["hard_labels"] == [True, True, True] for row in labels)  # no timeout was written as a wrong answer


def test_a_unit_whose_checks_keep_timing_out_easy_ones_too_stops_the_job_unlabelled_and_unrejected(tmp_path, checker):
    """A checker that times out on every answer, easy ones too, is sick: no label and no rejection from it."""
    import pyarrow.parquet as pq

    from labeler.labeling.checker_watch import CheckerSickError

    with pytest.raises(CheckerSickError, match=r"timed out on \d+ of \d+ answers.*--max-timeout-share.*easy answers"):
        run_unit(tmp_path, TimingOutChecker(checker, sick_calls=10**6))
    assert not (tmp_path / "out" / "labels").exists() or not any((tmp_path / "out" / "labels").iterdir())
    assert pq.read_table(tmp_path / "out" / "rejected").num_rows == 0


def test_a_few_timeouts_in_a_big_unit_stay_timeouts():
    from labeler.labeling.checker_watch import TimeoutWatch

    assert TimeoutWatch(checked=1000, timeouts=7).verdict(0.0) is None  # under the minimum count
    assert TimeoutWatch(checked=1000, timeouts=40).verdict(0.05) is None
    assert "60 of 1000" in TimeoutWatch(checked=1000, timeouts=60).verdict(0.05)


class QuestionRecordingChecker:
    """Passes every check through, keeping the questions it was given."""

    def __init__(self, checker):
        self.checker, self.questions = checker, []

    def check_many(self, pairs, questions=None):
        self.questions.append(questions)
        return self.checker.check_many(pairs, questions)


def test_labeling_checks_each_answer_with_its_question(tmp_path, checker):
    """The question decides what a count noun means: '30 boxes' is not the 30 pencils asked for."""
    import pyarrow.parquet as pq

    from labeler.labeling.config import LabelConfig
    from labeler.labeling.job import run_job
    from tests.conftest import write_jsonl
    from workers.local_executor import LocalExecutor

    problem = "Tom buys 3 boxes of 10 pencils each. How many pencils does he have?"
    rows = [{"id": "p", "problem": problem, "answer": "30", "steps": ["Each box has 10 pencils.", "So 3 boxes.", "The answer is: 30 boxes"]}]
    config = LabelConfig(input=str(write_jsonl(tmp_path / "in.jsonl", rows)), output=str(tmp_path / "out"), model="scripted", rollouts=2)
    recording = QuestionRecordingChecker(checker)
    run_job(config, executor=LocalExecutor(lambda: ScriptedGenerator({problem: "30"}, miss_every=None), recording), model_info={"name": "s"}, progress_enabled=False)
    [labels] = pq.read_table(tmp_path / "out" / "labels").to_pylist()
    assert labels["label_method"] == ["rollouts", "rollouts", "final_answer"]
    assert labels["hard_labels"] == [True, True, False]  # without the question, "30 boxes" would pass for 30
    assert recording.questions and all(qs is not None and set(qs) == {problem} for qs in recording.questions)


# --- rollouts from inside a trace's thinking (issue 23) ------------------------------------------


@pytest.mark.parametrize("strategy", ["exhaustive", "first-error", "adaptive", "posterior"])
def test_a_rollout_that_ends_still_thinking_is_truncated_not_judged(strategy, checker):
    """From inside the thinking, "The answer is 41? Wait, let me recheck." and no </think>: the rollout has not
    answered yet. It is truncated, never checked: 41 must not become a verdict."""
    outcome, rows = run(strategy, [trace("First.", f"Then {PONDER_MARKER}.", "Done thinking.")], checker)
    row = rows[0]
    assert row["label_method"][1:3] == ["unlabelled", "unlabelled"] and row["n_truncated"][1:3] == [8, 8]
    assert all("inside the thinking" in reason for reason in row["unlabelled_reason"][1:3])
    assert False not in row["hard_labels"] and row["first_error"] is None  # unlabelled steps: "no error" is not known
    pondered = [r for r in outcome.rollouts if r.step_index in (1, 2)]
    assert len(pondered) == 16 and {r.verdict for r in pondered} == {"truncated"} and all(r.extracted_answer is None for r in pondered)
    assert {r.finish_reason for r in pondered} == {"stop"}  # not cut by the budget: it stopped while still thinking
    closed = [r for r in outcome.rollouts if r.step_index == 0]
    assert {r.verdict for r in closed} == {"correct"}  # a rollout that closed its thinking is judged by its response


def test_truncated_incorrect_counts_a_rollout_that_ends_still_thinking_as_wrong_without_checking_it(checker):
    outcome, rows = run("exhaustive", [trace("First.", f"Then {PONDER_MARKER}.")], checker, truncated="incorrect")
    row = rows[0]
    assert (row["n_rollouts"][1], row["n_truncated"][1], row["n_correct"][1], row["hard_labels"][1]) == (8, 8, 0, False)
    assert {r.verdict for r in outcome.rollouts if r.step_index == 1} == {"truncated"}


def test_the_same_texts_as_a_plain_solution_keep_todays_labels(checker):
    """A plain solution is no trace: its rollouts are judged as they stand, as before."""
    _, rows = run("exhaustive", [solution("First.", f"Then {PONDER_MARKER}.", "The answer is: 42")], checker)
    assert rows[0]["label_method"] == ["rollouts", "rollouts", "final_answer"] and rows[0]["n_truncated"] == [0, 0, 0]


class RecordingGenerator(ScriptedGenerator):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.requests = []

    def generate(self, requests, sampling):
        self.requests += list(requests)
        return super().generate(requests, sampling)


def test_requests_from_inside_the_thinking_say_so(checker):
    """The generator lets the answer marker end a rollout only in its response: it must know which prefixes think."""
    generator = RecordingGenerator({PROBLEM: ANSWER}, miss_every=None)
    solutions = [trace("First.", "Second."), solution("First.", "Second.", "The answer is: 42", sid="plain")]
    run("exhaustive", solutions, checker, generator=generator, final_step="rollouts")
    thinking = {(r.assistant_prefix.count("\n\n"), "<think>" in r.assistant_prefix): r.thinking for r in generator.requests}
    assert thinking == {(1, True): True, (2, True): True, (3, True): False, (1, False): False, (2, False): False, (3, False): False}


# --- answer checks that time out (issue 23) -----------------------------------------------------


def test_a_rollout_whose_check_times_out_is_left_out_of_the_label(checker):
    outcome, rows = run("exhaustive", [solution(f"First {SLOW_MARKER}.", "The answer is 42.")], SlowChecker(checker))
    row = rows[0]
    # 8 rollouts from step 0, the 4 of even seed time out: soft = 4 correct / 4 checked, not 4 / 8
    assert (row["n_rollouts"][0], row["n_timeouts"][0], row["n_correct"][0], row["soft_labels"][0]) == (4, 4, 4, 1.0)
    timed_out = [r for r in outcome.rollouts if r.step_index == 0 and r.verdict == "timeout"]
    assert len(timed_out) == 4 and row["n_timeouts"] == [4, 0]


@pytest.mark.parametrize("strategy", ["exhaustive", "first-error", "adaptive", "posterior"])
def test_a_step_whose_checks_all_time_out_is_unlabelled_with_the_reason(strategy, checker):
    _, rows = run(strategy, [solution("First.", f"Second {SLOW_MARKER}!.", "Third.", "The answer is 42.")], SlowChecker(checker))
    row = rows[0]
    assert row["label_method"][1] == "unlabelled" and row["n_timeouts"][1] == 8 and row["n_rollouts"][1] == 0
    assert "timed out" in row["unlabelled_reason"][1]
    assert False not in row["hard_labels"]  # no step was called wrong for a check that never finished


@pytest.mark.parametrize("strategy", ["exhaustive", "first-error", "adaptive", "posterior", "final-answer"])
def test_a_timed_out_final_check_leaves_the_last_step_unlabelled_never_wrong(strategy, checker):
    _, rows = run(strategy, [solution("First.", f"The answer is 42. ({SLOW_MARKER})")], SlowChecker(checker))
    row = rows[0]
    assert row["label_method"][-1] == "unlabelled" and row["hard_labels"][-1] is None and row["n_timeouts"][-1] == 1
    assert "timed out" in row["unlabelled_reason"][-1]
    assert (row["trajectory_verdict"], row["trajectory_label"]) == ("timeout", None)  # the same verdict, the same unknown


def test_the_manifest_counts_the_timed_out_rollouts_the_labels_count(tmp_path, checker):
    import json

    import pyarrow.parquet as pq

    from labeler.labeling.config import LabelConfig
    from labeler.labeling.job import run_job
    from tests.conftest import write_jsonl
    from workers.local_executor import LocalExecutor

    rows = [{"id": f"r{i}", "problem": PROBLEM, "answer": ANSWER, "steps": [f"One {SLOW_MARKER}.", "The answer is 42."]} for i in range(2)]
    data = write_jsonl(tmp_path / "in.jsonl", rows)
    config = LabelConfig(input=str(data), output=str(tmp_path / "out"), model="scripted", rollouts=4, max_timeout_share=1.0)
    generator = ScriptedGenerator({PROBLEM: ANSWER}, miss_every=None)
    run_job(config, executor=LocalExecutor(lambda: generator, SlowChecker(checker)), model_info={"name": "s"}, progress_enabled=False)
    labels = pq.read_table(tmp_path / "out" / "labels").to_pylist()
    rollouts = pq.read_table(tmp_path / "out" / "rollouts").to_pylist()
    totals = json.loads((tmp_path / "out" / "manifest.json").read_text())["totals"]
    timed_out = sum(sum(row["n_timeouts"]) for row in labels)
    assert timed_out == 4 and totals["timed_out_rollouts"] == timed_out == sum(r["verdict"] == "timeout" for r in rollouts)
    assert totals["rollouts"] == len(rollouts)  # every rollout drawn, timed out or not
