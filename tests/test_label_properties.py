"""Property tests of the step labels (issue 23): for random mixes of rollout outcomes (correct, incorrect,
unparseable, cut by the budget, ended still thinking, timed out) and each strategy, the labels agree with
their counts, nothing cut or timed out counts as a wrong answer unless asked (--truncated incorrect), and
first_error is the first hard 0 behind labelled steps (null behind an unlabelled one).

A planned generator draws, for rollout r of prefix k, the outcome the example planned for it (whatever the
strategy asks for, in whatever rounds), and a scripted checker gives the verdict its text names: the labels
can be computed from the plan alone and compared with what each strategy wrote.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from labeler.checking import CheckResult, Verdict
from labeler.inputs.traces import THINK_CLOSE
from labeler.labeling import prompts
from labeler.labeling.generation import Completion, GenerationResult, SamplingSettings
from labeler.labeling.rollouts import prefix_seed
from labeler.labeling.strategies import StrategySettings, label
from labeler.labeling.tables import Provenance, labels_table
from labeler.records import Solution
from schemas import validate_labels
from schemas.tables import first_error

PROBLEM, ANSWER, SEED = "What is 20 + 22?", "42", 3
CHECKED = ("correct", "incorrect", "unparseable")  # outcomes whose answer the checker reads and decides
OUTCOMES = (*CHECKED, "truncated", "timeout")
THINKING_OUTCOMES = (*OUTCOMES, "thinking")  # from inside a trace's thinking a rollout may also end still thinking
TEXT = {"correct": "ANSWER-C", "incorrect": "ANSWER-I", "unparseable": "ANSWER-U", "timeout": "ANSWER-T"}
VERDICT_OF = {"C": Verdict.CORRECT, "I": Verdict.INCORRECT, "U": Verdict.UNPARSEABLE, "T": Verdict.TIMEOUT}


class ScriptedChecker:
    """The verdict the text names ("ANSWER-C", "FINAL-T", ...); a cut completion ("CUT"), checked as it stands
    under --truncated incorrect, is wrong."""

    def __init__(self):
        self.checked: list[str] = []

    def check_many(self, pairs, questions=None):
        self.checked += [text for text, _ in pairs]
        return [CheckResult(verdict_of(text), "42") for text, _ in pairs]


def verdict_of(text: str) -> Verdict:
    for tag in ("FINAL-", "ANSWER-"):
        if tag in text:
            return VERDICT_OF[text[text.index(tag) + len(tag)]]
    return Verdict.INCORRECT  # a cut completion checked as it stands


class PlannedGenerator:
    """Rollout r of prefix k is plan[k][r], whatever the batch or round it is drawn in."""

    model_name = "planned"

    def __init__(self, solution: Solution, plan: list[list[str]]):
        self.plan = plan
        self.steps = {prompts.assistant_prefix(solution.steps[: k + 1], solution.thinking_steps): k for k in range(len(solution.steps))}
        self.seeds = [prefix_seed(SEED, solution, k) for k in range(len(solution.steps))]
        self.solution = solution

    def generate(self, requests, sampling: SamplingSettings):
        results = []
        for request in requests:
            k = self.steps[request.assistant_prefix]
            assert request.thinking == self.solution.thinks_at(k)
            completions = []
            for offset in range(request.n):
                outcome = self.plan[k][request.seed - self.seeds[k] + offset]
                if outcome == "truncated":
                    text, finish = "CUT mid-sentence", "length"
                elif outcome == "thinking":  # it even states the right answer, but has not closed its thinking
                    text, finish = "Hmm. ANSWER-C? Wait.", "stop"
                else:
                    text, finish = TEXT[outcome], "stop"
                    if request.thinking:
                        text = f"Done.\n{THINK_CLOSE}\n\n{text}"
                completions.append(Completion(text, tokens=3, finish_reason=finish, budget=sampling.max_new_tokens))
            results.append(GenerationResult(tuple(completions)))
        return results


@st.composite
def examples(draw):
    steps = draw(st.integers(2, 5))
    rollouts = draw(st.integers(1, 6))
    thinking_steps = draw(st.sampled_from([0, 0, steps - 1, max(1, steps - 2)]))
    plan = [
        draw(st.lists(st.sampled_from(THINKING_OUTCOMES if k < thinking_steps else OUTCOMES), min_size=rollouts, max_size=rollouts))
        for k in range(steps)
    ]
    final = draw(st.sampled_from(["C", "I", "T"]))
    texts = [f"Step {k}." for k in range(steps - 1)] + [f"FINAL-{final}. The answer is: 42"]
    solution = Solution("p", "s", PROBLEM, ANSWER, tuple(texts), "trace" if thinking_steps else "test", 0, thinking_steps=thinking_steps)
    return solution, plan, final, draw(st.sampled_from(["excluded", "incorrect"])), draw(st.sampled_from(["check", "rollouts"]))


def expected_counts(outcomes: list[str], policy: str) -> dict:
    """The counts of a prefix from the outcomes of its rollouts, by the rules the labels promise."""
    seen = Counter(outcomes)
    cut = seen["truncated"] + seen["thinking"]
    counted = sum(seen[o] for o in CHECKED) + (cut if policy == "incorrect" else 0)
    return {"n_correct": seen["correct"], "n_rollouts": counted, "n_truncated": cut, "n_timeouts": seen["timeout"]}


def labelled(strategy: str, solution: Solution, plan, policy: str, final_step: str, min_counted: int = 1):
    checker = ScriptedChecker()
    sampling = SamplingSettings(max_new_tokens=16)
    config = StrategySettings(
        rollouts=len(plan[0]), sampling=sampling, seed=SEED, truncated=policy, final_step=final_step, round_size=2,
        min_counted_rollouts=min_counted,
    )  # fmt: skip
    outcome = label(strategy, [solution], PlannedGenerator(solution, plan), checker, config)
    table = labels_table(outcome.labelled, Provenance("u", "m", strategy, SEED, "h"))
    validate_labels(table)  # soft = n_correct / n_rollouts, hard = any correct, first_error = first hard 0
    [row] = table.to_pylist()
    return row, outcome.rollouts, checker


def step_counts(row: dict, i: int) -> dict:
    return {key: row[key][i] for key in ("n_correct", "n_rollouts", "n_truncated", "n_timeouts")}


def check_common(row: dict, rollouts, checker: ScriptedChecker, solution: Solution, plan, policy: str) -> None:
    hard = row["hard_labels"]
    assert row["first_error"] == first_error(hard)
    for i, method in enumerate(row["label_method"]):
        if method in ("rollouts", "final_answer", "early_stop"):
            assert hard[i] == (row["n_correct"][i] > 0)
            if method != "early_stop":
                assert row["soft_labels"][i] == row["n_correct"][i] / row["n_rollouts"][i]
        if method == "unlabelled":
            assert hard[i] is None and row["soft_labels"][i] is None and row["unlabelled_reason"][i]
    # nothing cut or timed out is a wrong answer, unless --truncated incorrect asks for cut ones
    for record in rollouts:
        if record.finish_reason == "final_answer_check":
            continue
        outcome = plan[record.step_index][record.rollout_index]
        if outcome == "timeout":
            assert record.verdict == "timeout"
        elif outcome == "thinking":
            assert record.verdict == "truncated"
        elif outcome == "truncated":  # checked as it stands under --truncated incorrect, unless it was still thinking
            thinking = solution.thinks_at(record.step_index)
            assert record.verdict == ("incorrect" if policy == "incorrect" and not thinking else "truncated")
        else:
            assert record.verdict == outcome
    assert not any("Wait." in text for text in checker.checked)  # a rollout still thinking is never checked
    wrong = {"incorrect", "unparseable"} | ({"truncated", "thinking"} if policy == "incorrect" else set())
    for i, method in enumerate(row["label_method"]):
        if hard[i] is False and method in ("rollouts", "early_stop"):  # a measured wrong step drew a rollout that counts as wrong
            assert any(plan[i][r.rollout_index] in wrong for r in rollouts if r.step_index == i)


def sampled_of(counts: dict, policy: str) -> int:
    return counts["n_rollouts"] + counts["n_timeouts"] + (counts["n_truncated"] if policy == "excluded" else 0)


def timeouts_decide(counts: dict, policy: str) -> bool:
    """No correct rollout, and timed-out checks are most of the rollouts sampled: not known to be wrong."""
    return counts["n_correct"] == 0 and 2 * counts["n_timeouts"] > sampled_of(counts, policy)


def final_checked(solution: Solution, final_step: str) -> bool:
    return final_step == "check"


def check_final(row: dict, solution: Solution, final: str, final_step: str) -> None:
    last = len(solution.steps) - 1
    if not final_checked(solution, final_step):
        return
    if final == "T":  # a timed-out final check: unknown, never hard 0
        assert row["label_method"][last] == "unlabelled" and row["n_timeouts"][last] == 1 and row["hard_labels"][last] is None
        assert (row["trajectory_verdict"], row["trajectory_label"]) == ("timeout", None)
    else:
        assert row["label_method"][last] == "final_answer" and row["hard_labels"][last] == (final == "C")
        assert step_counts(row, last) == {"n_correct": int(final == "C"), "n_rollouts": 1, "n_truncated": 0, "n_timeouts": 0}


@settings(max_examples=80, deadline=None)
@given(examples())
def test_exhaustive_labels_are_the_counts_of_the_planned_outcomes(example):
    solution, plan, final, policy, final_step = example
    row, rollouts, checker = labelled("exhaustive", solution, plan, policy, final_step)
    check_common(row, rollouts, checker, solution, plan, policy)
    check_final(row, solution, final, final_step)
    sampled = len(solution.steps) - (1 if final_checked(solution, final_step) else 0)
    for k in range(sampled):
        expected = expected_counts(plan[k], policy)
        assert step_counts(row, k) == expected
        assert row["label_method"][k] == ("rollouts" if expected["n_rollouts"] and not timeouts_decide(expected, policy) else "unlabelled")


@settings(max_examples=60, deadline=None)
@given(examples())
def test_first_error_and_adaptive_measure_what_exhaustive_measures(example):
    solution, plan, final, policy, final_step = example
    exhaustive, _, _ = labelled("exhaustive", solution, plan, policy, final_step)
    for strategy in ("first-error", "adaptive", "posterior"):
        row, rollouts, checker = labelled(strategy, solution, plan, policy, final_step)
        check_common(row, rollouts, checker, solution, plan, policy)
        check_final(row, solution, final, final_step)
        for k, method in enumerate(row["label_method"]):
            drawn = sorted(r.rollout_index for r in rollouts if r.step_index == k and r.finish_reason != "final_answer_check")
            if method == "rollouts" or (method == "unlabelled" and drawn and len(drawn) == len(plan[k])):
                assert step_counts(row, k) == step_counts(exhaustive, k)  # the very rollouts exhaustive drew
            elif method == "early_stop":  # adaptive stopped early: the counts of the rollouts it drew
                assert drawn == list(range(len(drawn))) and step_counts(row, k) == expected_counts([plan[k][r] for r in drawn], policy)


@settings(max_examples=40, deadline=None)
@given(examples())
def test_final_answer_labels_only_the_last_step_by_its_check(example):
    solution, plan, final, policy, _ = example
    row, rollouts, checker = labelled("final-answer", solution, plan, policy, "check")
    check_common(row, rollouts, checker, solution, plan, policy)
    check_final(row, solution, final, "check")
    assert all(method == "unlabelled" for method in row["label_method"][:-1])


@settings(max_examples=60, deadline=None)
@given(examples(), st.integers(1, 5))
def test_a_step_is_hard_0_only_when_enough_of_its_rollouts_counted(example, min_counted):
    """A step with no correct rollout is hard 0 only when at least --min-counted-rollouts of its rollouts were
    counted and timed-out checks are not the most of them; else it is unlabelled with the reason, and no
    strategy infers a label from it."""
    solution, plan, _, policy, final_step = example
    for strategy in ("exhaustive", "first-error", "adaptive"):
        row, _, _ = labelled(strategy, solution, plan, policy, final_step, min_counted)
        measured_negative = [
            i for i, (hard, method) in enumerate(zip(row["hard_labels"], row["label_method"]))
            if hard is False and method in ("rollouts", "early_stop")
        ]  # fmt: skip
        for i in measured_negative:
            counts = step_counts(row, i)
            assert counts["n_rollouts"] >= min_counted and not timeouts_decide(counts, policy)
        if row["first_error"] is not None and row["first_error"] >= 0 and row["label_method"][row["first_error"]] != "final_answer":
            assert row["first_error"] in measured_negative  # a hard 0 inferred only after a measured one
        for i, method in enumerate(row["label_method"]):
            counts = step_counts(row, i)
            few = counts["n_rollouts"] < min_counted or timeouts_decide(counts, policy)
            if method == "unlabelled" and counts["n_correct"] == 0 and counts["n_rollouts"] and few:
                assert f"{counts['n_rollouts']} of {sampled_of(counts, policy)} rollouts counted" in row["unlabelled_reason"][i]


def test_a_step_most_of_whose_checks_timed_out_is_not_hard_0_nor_its_later_steps():
    steps = ("Step 0.", "Step 1.", "Step 2.", "Step 3.", "FINAL-C. The answer is: 42")
    solution = Solution("p", "s", PROBLEM, ANSWER, steps, "test", 0)
    plan = [["correct"] * 8, ["incorrect"] + ["timeout"] * 7, ["correct"] * 8, ["correct"] * 8, ["correct"] * 8]
    for strategy in ("exhaustive", "first-error"):
        row, _, _ = labelled(strategy, solution, plan, "excluded", "check")
        assert row["hard_labels"][1] is None and row["label_method"][1] == "unlabelled", strategy
        reason = row["unlabelled_reason"][1]
        assert reason.startswith("1 of 8 rollouts counted, none correct: 7 whose answer check timed out"), reason
        assert False not in row["hard_labels"] and row["first_error"] is None  # not known: step 1 is unlabelled
