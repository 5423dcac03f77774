"""Long reasoning traces on the deterministic test double: first-error search finds a late first
error with few probes and far fewer tokens than exhaustive, and prefixes beyond the context are
unlabelled with their reason."""

import random

import pytest

from labeler.checking.checker import AnswerChecker
from labeler.labeling.generation import SamplingSettings
from schemas.tables import first_error
from labeler.labeling.strategies import StrategySettings, label
from labeler.labeling.tables import Provenance, labels_table
from labeler.records import Solution
from schemas import validate_labels
from tests.fakes import LONG_MARKER, WRONG_MARKER, ScriptedGenerator

PROBLEM, ANSWER = "What is 20 + 22?", "42"


def trace(steps: int, wrong_at: int = -1, huge_from: int | None = None, sid: str = "t") -> Solution:
    """A trace of `steps - 1` thinking chunks and a response; the thinking goes wrong at `wrong_at`
    (the response then states a wrong answer); from `huge_from` on, prefixes exceed the context."""
    thinking = []
    for i in range(steps - 1):
        text = f"Thought {i}: still on track."
        if i == wrong_at:
            text += f" {WRONG_MARKER}"
        if huge_from is not None and i == huge_from:
            text += f" {LONG_MARKER}"
        thinking.append(text)
    response = f"The answer is: {41 if wrong_at >= 0 else ANSWER}"
    return Solution("p", sid, PROBLEM, ANSWER, (*thinking, response), "trace", 0, thinking_steps=steps - 1)


@pytest.fixture(scope="module")
def checker():
    with AnswerChecker() as checker:
        yield checker


def run(strategy, solutions, checker, miss_every=None):
    generator = ScriptedGenerator({PROBLEM: ANSWER}, miss_every=miss_every)
    settings = StrategySettings(rollouts=8, sampling=SamplingSettings(max_new_tokens=16), seed=5)
    outcome = label(strategy, solutions, generator, checker, settings)
    validate_labels(labels_table(outcome.labelled, Provenance("u", "m", strategy, 5, "h")))
    return outcome


def hard(item):
    return [s.n_correct > 0 if s.measured else s.inferred_hard for s in item.steps]


@pytest.mark.parametrize("miss_every", [None, 3])
def test_a_first_error_at_step_150_of_200(miss_every, checker):
    solution = trace(200, wrong_at=150)
    exhaustive = run("exhaustive", [solution], checker, miss_every)
    search = run("first-error", [solution], checker, miss_every)
    item = search.labelled[0]
    assert first_error(hard(item)) == first_error(hard(exhaustive.labelled[0])) == 150
    # 199 thinking prefixes to search (the response states its answer and is checked): galloping
    # 0, 1, 3, 7, 15, 31, 63, 127 (all positive; 255 is past the end), then bisecting [128, 199):
    # 163 -, 145 +, 154 -, 150 -, 148 +, 149 + -> the first error is 150. 14 probes against 199.
    probed = sorted(i for i, step in enumerate(item.steps) if step.measured_by == "rollouts")
    assert probed == [0, 1, 3, 7, 15, 31, 63, 127, 145, 148, 149, 150, 154, 163]
    assert (search.probes, exhaustive.probes) == (14, 199)
    assert item.steps[-1].measured_by == "final_answer" and hard(item)[-1] is False
    assert all(step.measured_by == "inferred" for i, step in enumerate(item.steps[:150]) if i not in probed)
    tokens, exhaustive_tokens = item.generated_tokens, exhaustive.labelled[0].generated_tokens
    assert exhaustive_tokens >= 10 * tokens  # 199 prefixes sampled against 14


def test_first_error_spends_at_least_4x_fewer_tokens_on_traces_of_30_to_200_steps(checker):
    rng = random.Random(15)
    solutions = []
    for n in range(12):
        steps = rng.randint(30, 200)
        wrong_at = -1 if n % 4 == 0 else rng.randrange(steps - 1)
        solutions.append(trace(steps, wrong_at, sid=f"t{n}"))
    exhaustive = run("exhaustive", solutions, checker, miss_every=3)
    search = run("first-error", solutions, checker, miss_every=3)
    agree = [first_error(hard(a)) == first_error(hard(b)) for a, b in zip(search.labelled, exhaustive.labelled)]
    assert all(agree)  # the double's labels are monotone: the search lands on exhaustive's first error
    tokens = lambda outcome: sum(item.generated_tokens for item in outcome.labelled)
    assert tokens(exhaustive) >= 4 * tokens(search)


def test_prefixes_beyond_the_context_are_unlabelled_with_the_reason(checker):
    """From step 180 on the prefix does not fit: with no error before it the search stops there."""
    solution = trace(200, huge_from=180)
    for strategy in ("exhaustive", "first-error"):
        item = run(strategy, [solution], checker).labelled[0]
        assert all(hard(item)[:180]) and first_error(hard(item)) is None  # no error before 180; none after: not known
        beyond = item.steps[180:199]
        assert all(step.measured_by == "unlabelled" and "context" in step.unlabelled_reason for step in beyond), strategy
        assert item.steps[-1].measured_by == "final_answer"  # the response's stated answer is still checked


def test_an_error_before_the_context_limit_is_still_found(checker):
    item = run("first-error", [trace(200, wrong_at=120, huge_from=180)], checker).labelled[0]
    assert first_error(hard(item)) == 120
