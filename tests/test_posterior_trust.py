"""Posterior's labels against exhaustive's where they could part (issue 53, items 1 and 2): a rollout that retraced the
solution is evidence for the prefixes it reached, under the doubt rule a probe is under, never proof; a problem is
"sure" (its probes may stop negative early) only from counted rollouts."""

import random
import re

import pytest

from labeler.checking.checker import AnswerChecker
from labeler.labeling.generation import Completion, GenerationResult, SamplingSettings
from labeler.labeling.prompts import STEP_SEPARATOR, assistant_prefix
from labeler.labeling.rollouts import prefix_seed
from labeler.labeling.strategies import StrategySettings, label
from labeler.labeling.tables import Provenance, labels_table
from labeler.records import Solution
from schemas import validate_labels
from schemas.tables import LABEL_METHODS, first_error

PROBLEM, ANSWER, SEED = "What is 20 + 22?", "42", 5


@pytest.fixture(scope="module")
def checker():
    with AnswerChecker() as checker:
        yield checker


def settings(**overrides) -> StrategySettings:
    return StrategySettings(**{"rollouts": 8, "sampling": SamplingSettings(max_new_tokens=16), "seed": SEED, **overrides})


def hard(item):
    return [s.n_correct > 0 if s.measured else s.inferred_hard for s in item.steps]


def first_errors(outcome):
    return [first_error(hard(item)) for item in outcome.labelled]


def _completions(texts, sampling, finish="stop"):
    return GenerationResult(tuple(Completion(text, len(text.split()), finish, sampling.max_new_tokens) for text in texts))


class _Retracers:
    """The issue's case. Rollouts of the solution's prefix 0 whose rollout index is in `retracers` write steps 1..`to`
    word for word, then the answer `retracers` gives them (right or wrong); every other rollout of a right prefix answers
    right without writing a step, and every rollout of a prefix holding WRONG answers wrong."""

    model_name = "retracers"

    def __init__(self, solution: Solution, retracers: dict[int, str], to: int, seed: int = SEED):
        self.solution, self.retracers, self.to = solution, retracers, to
        self.first = prefix_seed(seed, solution, 0)  # rollout r of prefix 0 has seed first + r

    def generate(self, requests, sampling):
        results = []
        for request in requests:
            done = request.assistant_prefix.count(STEP_SEPARATOR)  # the prefix holds steps 0..done-1
            texts = []
            for r in range(request.n):
                if "WRONG" in request.assistant_prefix:
                    texts.append("So it is 41.\n\nThe answer is: 41")
                elif done == 1 and request.seed + r - self.first in self.retracers:
                    written = "".join(step + STEP_SEPARATOR for step in self.solution.steps[1 : self.to + 1])
                    texts.append(written + f"The answer is: {self.retracers[request.seed + r - self.first]}")
                else:
                    texts.append(f"Continuing.\n\nThe answer is: {ANSWER}")
            results.append(_completions(texts, sampling))
        return results


def _seven_steps_wrong_at_2() -> Solution:
    steps = [f"Step {i + 1} works on it." + (" WRONG" if i == 2 else "") for i in range(7)]
    steps[-1] += " The answer is: 41"
    return Solution("p", "seven", PROBLEM, ANSWER, tuple(steps), "test", 0)


@pytest.mark.parametrize("round_size", [1, 2, 4])
def test_a_lucky_rollout_that_retraced_the_wrong_step_does_not_move_the_first_error(round_size, checker):
    """7 steps, step 2 wrong; of prefix 0's 8 rollouts, its first retraces steps 1-4 and answers right. Exhaustive-8: first
    error 2 (prefix 2 reaches the answer 0 times in 8). Posterior put it at 5, calling the wrong step positive."""
    one = _seven_steps_wrong_at_2()
    generator = _Retracers(one, {0: ANSWER}, to=4)
    exhaustive = label("exhaustive", [one], generator, checker, settings())
    posterior = label("posterior", [one], generator, checker, settings(round_size=round_size))
    assert first_errors(exhaustive) == [2]
    assert first_errors(posterior)[0] in (2, None)
    assert hard(posterior.labelled[0])[2] is not True  # the wrong step is never positive


def test_failed_retraces_count_against_the_prefixes_they_reached(checker):
    """Three of prefix 0's rollouts retrace steps 1-4: one answers right, two wrong. The prefixes they reached have 1 of 3
    correct: in doubt, as a probe with 1 of 3 would be, so the search probes them (it read the one right one as proof)."""
    one = _seven_steps_wrong_at_2()
    generator = _Retracers(one, {0: ANSWER, 1: "41", 2: "41"}, to=4)
    exhaustive = label("exhaustive", [one], generator, checker, settings())
    posterior = label("posterior", [one], generator, checker, settings(round_size=4))
    assert first_errors(posterior) == first_errors(exhaustive) == [2]


def test_retraced_steps_have_their_own_label_method_hard_only(checker):
    """Two of prefix 0's first rollouts retrace steps 1 and 2 of a right solution and answer right: enough evidence, both
    at least half right, so those prefixes are positive without a probe, as `retraced` (hard label, soft null, no counts
    of their own: the retracing rollouts are in the rollouts table under the prefix they were drawn from)."""
    steps = [f"Step {i + 1} works on it." for i in range(6)]
    steps[-1] += f" The answer is: {ANSWER}"
    one = Solution("p", "right", PROBLEM, ANSWER, tuple(steps), "test", 0)
    posterior = label("posterior", [one], _Retracers(one, {0: ANSWER, 1: ANSWER}, to=2), checker, settings())
    item = posterior.labelled[0]
    assert "retraced" in LABEL_METHODS
    assert [s.measured_by for s in item.steps[1:3]] == ["retraced", "retraced"]
    assert all(s.n_rollouts == 0 and s.n_correct == 0 and s.inferred_hard is True for s in item.steps[1:3])
    assert posterior.written_through == 2
    table = labels_table(posterior.labelled, Provenance("u", "m", "posterior", SEED, "h"))
    validate_labels(table)
    row = table.to_pylist()[0]
    assert row["label_method"][1:3] == ["retraced", "retraced"] and row["soft_labels"][1:3] == [None, None]
    assert row["hard_labels"] == [True] * 6 and row["first_error"] == -1


def test_retraced_steps_read_back_as_written(checker, tmp_path):
    """The readers take the new method as it is: a shard of schema 1.7 with retraced steps reads back with them."""
    import pyarrow.parquet as pq

    from labeler.store.reader import read_labelled_rows
    from schemas.tables import SCHEMA_VERSION

    steps = [f"Step {i + 1} works on it." for i in range(6)]
    steps[-1] += f" The answer is: {ANSWER}"
    one = Solution("p", "right", PROBLEM, ANSWER, tuple(steps), "test", 0)
    posterior = label("posterior", [one], _Retracers(one, {0: ANSWER, 1: ANSWER}, to=2), checker, settings())
    pq.write_table(labels_table(posterior.labelled, Provenance("u", "m", "posterior", SEED, "h")), tmp_path / "part.parquet")
    (row,) = read_labelled_rows(tmp_path / "part.parquet", corrections=False)
    assert SCHEMA_VERSION == "1.7"
    assert row.label_method[1:3] == ("retraced", "retraced") and row.soft_labels[1:3] == (None, None)
    assert row.hard_labels[1:3] == (True, True) and row.n_rollouts[1:3] == (0, 0) and row.first_error == -1


class _RetracingRates:
    """Rollouts that retrace their solution and then behave as rollouts of the prefix they reached: a rollout of a prefix
    writes each next step word for word with chance `retrace` (up to the last but one), then reaches the answer with the
    rate its last step states ("P=0.8"), seeded like vLLM (seed + r)."""

    model_name = "retracing-rates"

    def __init__(self, solutions, retrace=0.5):
        self.steps = {s.problem: s.steps for s in solutions}
        self.retrace = retrace

    def generate(self, requests, sampling):
        results = []
        for request in requests:
            problem = request.user_message.split("\n\n")[0]
            steps, answer = self.steps[problem], re.search(r"ANS(\d+)", problem).group(1)
            done = request.assistant_prefix.count(STEP_SEPARATOR)
            texts = []
            for r in range(request.n):
                rng = random.Random(request.seed + r)
                reached = done
                while reached < len(steps) - 1 and rng.random() < self.retrace:
                    reached += 1
                rate = float(re.findall(r"P=([0-9.]+)", steps[reached - 1])[-1])
                final = answer if rng.random() < rate else str(int(answer) + 1)
                texts.append("".join(step + STEP_SEPARATOR for step in steps[done:reached]) + f"The answer is: {final}")
            results.append(_completions(texts, sampling))
        return results


def _rated_solutions(count=100, seed=0):
    rng = random.Random(seed)
    solutions = []
    for k in range(count):
        steps = rng.randint(8, 30)
        wrong_at = rng.randrange(steps)
        texts = tuple(f"Step {i + 1} of {k} P={0.8 if i < wrong_at else 0.02}" for i in range(steps))
        solutions.append(Solution(f"p{k}", f"s{k}", f"Problem {k} ANS{100 + k}", str(100 + k), texts, "t", k))
    return solutions


def test_reading_retraced_rollouts_agrees_with_exhaustive_at_least_as_often_as_not_reading_them(checker, monkeypatch):
    """The issue's simulation: 100 solutions whose retracing rollouts behave like rollouts of the prefix they reach.
    Reading them through agreed with exhaustive-8's first error less often than not reading them (79 against 91), and
    called positive, as written through, steps exhaustive measured 0 of 8."""
    from labeler.labeling.strategies import posterior as posterior_module

    solutions = _rated_solutions()
    common = settings(final_step="rollouts", seed=1)
    exhaustive = label("exhaustive", solutions, _RetracingRates(solutions), checker, common)
    reading = label("posterior", solutions, _RetracingRates(solutions), checker, common)
    monkeypatch.setattr(posterior_module, "written_through", lambda solution, step, text, last: step)  # reading off
    not_reading = label("posterior", solutions, _RetracingRates(solutions), checker, common)
    truth = first_errors(exhaustive)
    agree = {name: sum(a == b for a, b in zip(first_errors(outcome), truth)) for name, outcome in
             [("reading", reading), ("not reading", not_reading)]}  # fmt: skip
    assert agree["reading"] >= agree["not reading"], agree
    assert reading.written_through > 0  # it still reads where the evidence is there
    against = [
        (a.solution.solution_id, i) for a, b in zip(exhaustive.labelled, reading.labelled) for i, (x, y) in enumerate(zip(a.steps, b.steps))
        if y.measured_by == "retraced" and x.n_correct == 0
    ]  # fmt: skip
    assert len(against) * 20 <= reading.written_through, (len(against), reading.written_through)


class _HardAndEasy:
    """Rollouts of a prefix reach the answer: always from an easy right prefix; never from a WRONG one; from a HARD one only
    at rollout 7 (exhaustive-8 finds that one success, a probe that stops before it does not); from a LUCKY one only at
    rollout 0; every rollout of a prefix whose last step holds CUT is cut by its token budget (nothing counted)."""

    model_name = "hard-and-easy"

    def __init__(self, solutions, seed):
        self.first = {  # (problem, prefix) -> the seed of its rollout 0
            (s.problem, assistant_prefix(s.steps[: i + 1])): prefix_seed(seed, s, i) for s in solutions for i in range(len(s.steps))
        }

    def generate(self, requests, sampling):
        results = []
        for request in requests:
            problem = request.user_message.split("\n\n")[0]
            answer = re.search(r"ANS(\d+)", problem).group(1)
            prefix = request.assistant_prefix
            if "CUT" in prefix[: -len(STEP_SEPARATOR)].split(STEP_SEPARATOR)[-1]:
                results.append(_completions(["Let me think about this for a long"] * request.n, sampling, finish="length"))
                continue
            first = self.first[problem, prefix]
            texts = []
            for r in range(request.n):
                index = request.seed + r - first
                right = "WRONG" not in prefix and (
                    index == 7 if "HARD" in prefix else index == 0 if "LUCKY" in prefix else True
                )  # fmt: skip
                texts.append(f"The answer is: {answer if right else int(answer) + 1}")
            results.append(_completions(texts, sampling))
        return results


def _problems_one_in_eight_hard(first_of_the_hard: str):
    """64 problems: easy ones (one solution each, many wrong from their first step, so the unit's prior is U-shaped
    early) and one in eight hard, with two right solutions: one whose prefixes are HARD (exhaustive-8: 1 of 8 each), and
    one whose first step is `first_of_the_hard` ("CUT": no rollout counted; "LUCKY": 1 of 8, the first), its others HARD."""
    rng = random.Random(0)
    solutions = []
    for k in range(64):
        shapes = [("HARD", -1), (first_of_the_hard, -1)] if k % 8 == 0 else [("easy", rng.choice([-1, 0, rng.randrange(6)]))]
        for j, (kind, wrong_at) in enumerate(shapes):
            words = [kind if kind not in ("CUT", "LUCKY") or i == 0 else "HARD" for i in range(rng.randint(6, 14))]
            texts = [f"Step {i + 1} of {k}.{j} {word}" + (" WRONG" if i == wrong_at else "") for i, word in enumerate(words)]
            solutions.append(Solution(f"p{k}", f"s{k}.{j}", f"Problem ANS{100 + k}", str(100 + k), tuple(texts), "t", k))
    return solutions


def _wrongly_stopped(exhaustive, posterior):
    """Steps posterior stopped early as negative where exhaustive-8 found a correct rollout."""
    return [
        (a.solution.solution_id, i)
        for a, b in zip(exhaustive.labelled, posterior.labelled)
        for i, (x, y) in enumerate(zip(a.steps, b.steps))
        if y.measured_by == "early_stop" and y.n_correct == 0 and x.n_correct > 0
    ]  # fmt: skip


@pytest.mark.parametrize("first_of_the_hard, round_size", [("HARD", 2), ("CUT", 2), ("CUT", 1), ("LUCKY", 1)])
def test_only_counted_rollouts_make_a_problem_sure(first_of_the_hard, round_size, checker):
    """A hard problem's prefix whose rollouts were all cut has 0 of 0 correct: it made its problem "sure", and the
    problem's HARD prefixes stopped negative after 0 of 6 under the unit's U-shaped prior, where exhaustive-8 finds a
    success. Under --round-size 1 a single lucky rollout (1 of 1) did the same. Neither is evidence of a sure completer.
    (HARD, 2: the same problems with no such prefix, which stopped no right prefix before either.)"""
    solutions = _problems_one_in_eight_hard(first_of_the_hard)
    common = settings(final_step="rollouts", round_size=round_size, stop_risk=0.05, seed=1)
    exhaustive = label("exhaustive", solutions, _HardAndEasy(solutions, 1), checker, common)
    posterior = label("posterior", solutions, _HardAndEasy(solutions, 1), checker, common)
    assert first_errors(posterior) == first_errors(exhaustive)
    assert not _wrongly_stopped(exhaustive, posterior)
    stopped = sum(s.measured_by == "early_stop" and s.n_correct == 0 for item in posterior.labelled for s in item.steps)
    assert stopped > 10  # the easy problems' wrong prefixes still stop early


def test_the_chance_that_a_prefixs_own_rollouts_all_fail_given_counts_of_others():
    """Under a uniform prior, 0 of 0 leaves 1/(N+1) for N fresh failures; 1 right of 2 is not settled at N=8 and 0.05
    (0.0545), 2 of 2 is (B(3, 9) / B(3, 1) = 6/990)."""
    from labeler.labeling.beta_binomial import UNIFORM, BetaPrior

    assert UNIFORM.chance_all_fail(0, 0, 8) == pytest.approx(1 / 9)
    assert UNIFORM.chance_all_fail(1, 2, 8) == pytest.approx(6 / 110)
    assert UNIFORM.chance_all_fail(2, 2, 8) == pytest.approx(6 / 990)
    assert UNIFORM.chance_all_fail(1, 2, 0) == 1.0
    prior = BetaPrior(0.3, 2.0)  # no successes seen: the complement of chance_of_success
    assert prior.chance_all_fail(0, 3, 5) == pytest.approx(1 - prior.chance_of_success(3, 5))


def test_a_posterior_output_of_an_older_schema_is_not_resumed_under_the_new_retrace_rule():
    """1.7 changed only which steps posterior passes on retracing rollouts: an output of 1.6 (or 1.5) of another strategy
    resumes under 1.7; a posterior one is refused, saying why (its committed units keep labels the new rule does not
    write), since resuming would mix both rules in one table; rows rewritten by consensus likewise keep their version."""
    from labeler.judging.consensus import _relabelled
    from labeler.store.manifest import ConfigMismatchError, check_same_schema
    from schemas.tables import SCHEMA_VERSION

    for version in ("1.5", "1.6"):
        exhaustive = {"schema_version": version, "config": {"strategy": "exhaustive"}}
        assert version in check_same_schema(exhaustive, "out")[0] and exhaustive["schema_version"] == SCHEMA_VERSION
        with pytest.raises(ConfigMismatchError, match=rf"schema {version}.*posterior.*retrac.*--overwrite"):
            check_same_schema({"schema_version": version, "config": {"strategy": "posterior"}}, "out")
        assert _relabelled({"schema_version": version, "strategy": "exhaustive"}, "consensus")["schema_version"] == SCHEMA_VERSION
        assert _relabelled({"schema_version": version, "strategy": "posterior"}, "consensus")["schema_version"] == version
