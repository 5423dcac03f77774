"""Strategies on a deterministic test-double generator whose correct prefixes are known."""

import math
from dataclasses import replace

import pytest

from labeler.checking.checker import AnswerChecker
from labeler.labeling.generation import SamplingSettings
from schemas.tables import first_error
from labeler.records import Solution
from labeler.labeling.strategies import StrategySettings, label
from labeler.labeling.tables import Provenance, labels_table
from schemas import validate_labels
from tests.fakes import WRONG_MARKER, ScriptedGenerator

PROBLEM, ANSWER = "What is 20 + 22?", "42"


def solution(steps: int, wrong_at: int = -1, sid: str | None = None, words: str = "works on it") -> Solution:
    """A k-step solution; from step `wrong_at` on, the prefix is wrong (and so is its final answer)."""
    texts = [f"Step {i + 1} {words}." + (f" {WRONG_MARKER}" if i == wrong_at else "") for i in range(steps)]
    final = "41" if 0 <= wrong_at else ANSWER
    texts[-1] += f" The answer is: {final}"
    return Solution("p", sid or f"k{steps}-w{wrong_at}", PROBLEM, ANSWER, tuple(texts), "test", 0)


@pytest.fixture(scope="module")
def checker():
    with AnswerChecker() as checker:
        yield checker


def settings(**overrides) -> StrategySettings:
    return StrategySettings(**{"rollouts": 8, "sampling": SamplingSettings(max_new_tokens=16), "seed": 5, **overrides})


def run(strategy, solutions, checker, miss_every=None, **overrides):
    generator = ScriptedGenerator({PROBLEM: ANSWER}, miss_every=miss_every)
    outcome = label(strategy, solutions, generator, checker, settings(**overrides))
    validate_labels(labels_table(outcome.labelled, Provenance("u", "m", strategy, 5, "h")))  # the contract holds
    return outcome, generator


def hard(item):
    return [s.n_correct > 0 if s.measured else s.inferred_hard for s in item.steps]


CASES = [(1, -1), (1, 0), (2, 0), (2, 1), (5, 2), (8, 0), (8, 7), (40, -1), (40, 0), (40, 17), (40, 39)]


@pytest.mark.parametrize("final_step", ["check", "rollouts"])
@pytest.mark.parametrize("steps, wrong_at", CASES)
def test_first_error_search_finds_the_first_wrong_step(steps, wrong_at, final_step, checker):
    """Solutions of 1 to 40 steps, all-correct (-1), all-wrong (0) and wrong from a later step."""
    outcome, generator = run("first-error", [solution(steps, wrong_at)], checker, final_step=final_step)
    item = outcome.labelled[0]
    assert first_error(hard(item)) == wrong_at
    labels = hard(item)
    assert all(labels[:wrong_at]) if wrong_at >= 0 else all(labels)
    if wrong_at >= 0:
        assert labels[wrong_at] is False and item.steps[wrong_at].measured  # the first error is always measured
        assert all(label is False for label in labels[wrong_at:])  # convention: negative after it
    searched = steps - 1 if final_step == "check" else steps
    assert outcome.probes <= 2 * math.ceil(math.log2(searched + 1)) + 1  # galloping, then bisection
    if wrong_at == 0 and searched:
        assert outcome.probes == 1  # the first probe is prefix 0
    assert all(calls == 1 for calls in generator.calls)  # one probe per round for one solution
    measured = [s for s in item.steps if s.measured_by == "rollouts"]
    assert all(s.n_rollouts == 8 for s in measured)
    assert all(s.n_rollouts == 0 for s in item.steps if s.measured_by == "inferred")


def test_unlabelled_convention_after_the_first_error(checker):
    outcome, _ = run("first-error", [solution(10, 3)], checker, after_first_error="unlabelled", final_step="rollouts")
    labels = hard(outcome.labelled[0])
    assert labels[:3] == [True, True, True] and labels[3] is False
    assert all(label is None or step.measured for label, step in zip(labels[4:], outcome.labelled[0].steps[4:]))


def test_first_error_batches_all_solutions_round_by_round(checker):
    solutions = [solution(40, w, sid=f"s{w}") for w in (0, 5, 17, 30, 39)] + [solution(40, -1, sid="ok")]
    outcome, generator = run("first-error", solutions, checker)
    assert [first_error(hard(item)) for item in outcome.labelled] == [0, 5, 17, 30, 39, -1]
    assert len(generator.calls) <= 2 * math.ceil(math.log2(40)) + 1  # rounds, not probes
    # every solution is probed in the first round's one call, at prefix s1; that prefix is the
    # same text in all but s0 (whose first step is wrong), so six probes are two requests
    assert generator.calls[0] == 2 and outcome.requests < outcome.probes
    assert outcome.probes < 6 * 39 / 3


@pytest.mark.parametrize("miss_every", [None, 3, 2])
def test_first_error_agrees_with_exhaustive_and_shares_its_rollouts(miss_every, checker):
    solutions = [solution(k, w, sid=f"s{k}-{w}") for k, w in [(6, 2), (9, -1), (12, 11), (3, 0), (15, 7)]]
    exhaustive, ex_gen = run("exhaustive", solutions, checker, miss_every=miss_every)
    search, fe_gen = run("first-error", solutions, checker, miss_every=miss_every)
    assert [first_error(hard(i)) for i in search.labelled] == [first_error(hard(i)) for i in exhaustive.labelled]
    ex_texts = {(r.solution_id, r.step_index, r.rollout_index): (r.seed, r.text) for r in exhaustive.rollouts}
    for record in search.rollouts:
        assert ex_texts[(record.solution_id, record.step_index, record.rollout_index)] == (record.seed, record.text)
    assert sum(fe_gen.calls) < sum(ex_gen.calls)


def test_adaptive_stops_each_prefix_once_settled(checker):
    outcome, _ = run("adaptive", [solution(6, 3)], checker, miss_every=None, round_size=2, ci_width=0.5)
    steps = outcome.labelled[0].steps
    assert [s.n_rollouts for s in steps[:3]] == [2, 2, 2]  # a correct rollout in round one decides them
    assert [s.n_rollouts for s in steps[3:5]] == [4, 4]  # 0 of 4: Wilson interval 0.49 wide < 0.5
    assert (steps[5].measured_by, steps[5].n_rollouts) == ("final_answer", 1)
    narrow, _ = run("adaptive", [solution(6, 3)], checker, miss_every=None, round_size=2, ci_width=0.1)
    assert [s.n_rollouts for s in narrow.labelled[0].steps[3:5]] == [8, 8]  # never narrow enough: all N


def test_adaptive_does_not_stop_a_wrong_prefix_before_min_counted_rollouts(checker):
    """0 of 4 is settled by a 0.5-wide interval, but with --min-counted-rollouts 6 stopping there would leave
    the step unlabelled: adaptive samples on to 6 and labels it 0."""
    outcome, _ = run("adaptive", [solution(6, 3)], checker, round_size=2, ci_width=0.5, min_counted_rollouts=6)
    steps = outcome.labelled[0].steps[3:5]
    assert [s.n_rollouts for s in steps] == [6, 6] and [s.measured_by for s in steps] == ["early_stop", "early_stop"]
    assert [hard(outcome.labelled[0])[i] for i in (3, 4)] == [False, False]


def test_adaptive_draws_a_prefix_of_exhaustive_rollouts_and_keeps_hard_labels(checker):
    solutions = [solution(k, w, sid=f"s{k}-{w}") for k, w in [(6, 2), (9, -1), (12, 11), (3, 0)]]
    exhaustive, _ = run("exhaustive", solutions, checker, miss_every=2)
    adaptive, _ = run("adaptive", solutions, checker, miss_every=2)
    assert [hard(i) for i in adaptive.labelled] == [hard(i) for i in exhaustive.labelled]
    ex_texts = {(r.solution_id, r.step_index, r.rollout_index): r.text for r in exhaustive.rollouts}
    assert all(ex_texts[(r.solution_id, r.step_index, r.rollout_index)] == r.text for r in adaptive.rollouts)
    assert len(adaptive.rollouts) < len(exhaustive.rollouts)


def test_identical_prefixes_of_one_problem_are_rolled_out_once(checker):
    a = Solution("p", "a", PROBLEM, ANSWER, ("Same start.", "Same middle.", "Then a. The answer is: 42"), "test", 0)
    b = Solution("p", "b", PROBLEM, ANSWER, ("Same start.", "Same middle.", "Then b. The answer is: 42"), "test", 1)
    c = Solution("p", "c", PROBLEM, ANSWER, ("Other start.", "Same middle.", "The answer is: 42"), "test", 2)
    outcome, generator = run("exhaustive", [a, b, c], checker, miss_every=3)
    assert (outcome.probes, outcome.requests) == (6, 4) and generator.calls == [4]
    by_id = {item.solution.solution_id: item for item in outcome.labelled}
    for i in range(2):
        assert by_id["a"].steps[i].n_correct == by_id["b"].steps[i].n_correct
        assert by_id["a"].steps[i].n_rollouts == by_id["b"].steps[i].n_rollouts == 8
    assert by_id["b"].steps[0].tokens == 0 < by_id["a"].steps[0].tokens  # generated once, charged once


def test_final_answer_labels_only_the_last_step_by_its_answer_and_samples_nothing(checker):
    from dataclasses import replace

    right, wrong = solution(3, sid="right"), solution(3, wrong_at=1, sid="wrong")
    no_answer = replace(solution(2, sid="no-answer"), steps=("First we work on it.", "Then it stops here."))
    cut = replace(solution(2, sid="cut"), complete=False, sampling_truncated=True, sampling_tokens=16)
    outcome, generator = run("final-answer", [right, wrong, no_answer, cut], checker)
    assert generator.calls == [] and outcome.probes == 0  # no rollouts at all
    by_id = {item.solution.solution_id: item for item in outcome.labelled}
    assert [hard(by_id[s])[-1] for s in ("right", "wrong", "no-answer", "cut")] == [True, False, None, None]
    assert by_id["right"].steps[-1].measured_by == "final_answer" and by_id["right"].steps[-1].n_rollouts == 1
    assert all(step.measured_by == "unlabelled" and "not sampled" in step.unlabelled_reason for step in by_id["right"].steps[:-1])
    assert "no answer" in by_id["no-answer"].steps[-1].unlabelled_reason
    assert "token budget" in by_id["cut"].steps[-1].unlabelled_reason
    # the check is kept with the answer it extracted, for majority votes
    finals = {r.solution_id: r for r in outcome.rollouts}
    assert set(finals) == {"right", "wrong"} and finals["right"].extracted_answer == "42" and finals["wrong"].verdict == "incorrect"
    # --truncated incorrect checks a cut solution as it stands
    outcome, _ = run("final-answer", [cut], checker, truncated="incorrect")
    assert hard(outcome.labelled[0])[-1] is True


def test_final_answer_needs_the_final_step_checked():
    from labeler.labeling.config import LabelConfig

    with pytest.raises(ValueError, match="final-step check"):
        LabelConfig(output="out", model="m", input="in", strategy="final-answer", final_step="rollouts")


HALF_PROBLEM = "Solve 4x = 2 for x."
HALF_STEPS = ("We divide both sides by 4.", "Now we multiply both sides by 2 to get 4 on the right side.")
WINNER_PROBLEM = "Ann runs 100 m in 14 s and Evelyn in 13 s. Who wins?"
WINNER_STEPS = ("Evelyn's time is shorter.", "Comparing the times, the winner is Evelyn.")


def test_the_final_step_gate_asks_the_checker_whether_the_step_states_an_answer(checker):
    """A last step with no answer the checker finds for its reference is rolled out, not checked as wrong;
    one it finds an answer in (a word for a word reference) is checked (issue 23)."""
    half = Solution("p", "half", HALF_PROBLEM, "\\frac{1}{2}", HALF_STEPS, "test", 0)
    winner = Solution("q", "winner", WINNER_PROBLEM, "\\text{Evelyn}", WINNER_STEPS, "test", 1)
    generator = ScriptedGenerator({HALF_PROBLEM: "\\frac{1}{2}", WINNER_PROBLEM: "\\text{Evelyn}"}, miss_every=None)
    for strategy in ("exhaustive", "first-error", "adaptive"):
        outcome = label(strategy, [half, winner], generator, checker, settings(final_step="check"))
        by_id = {item.solution.solution_id: item for item in outcome.labelled}
        assert by_id["half"].steps[-1].measured_by in ("rollouts", "early_stop"), strategy  # "4 on the right side": no answer to 1/2
        assert by_id["winner"].steps[-1].measured_by == "final_answer" and by_id["winner"].steps[-1].n_correct == 1, strategy
    outcome = label("final-answer", [half, winner], generator, checker, settings(final_step="check"))
    by_id = {item.solution.solution_id: item for item in outcome.labelled}
    assert hard(by_id["half"])[-1] is None and "no answer" in by_id["half"].steps[-1].unlabelled_reason
    assert hard(by_id["winner"])[-1] is True



def test_the_final_step_gate_reads_with_the_checkers_own_settings():
    """A checker without the last-number fallback finds no answer in "She earns 5 * 8 = 40 dollars.": the gate
    asks that checker, so the step is rolled out (or, for final-answer, unlabelled with its reason), not checked
    as unparseable and labelled 0 (review of CHECKER_VERSION 4)."""
    problem = "She earns $5 an hour for 8 hours. How much does she earn?"
    steps = ("She works 8 hours at $5 an hour.", "She earns 5 * 8 = 40 dollars.")
    earns = Solution("p", "earns", problem, "40", steps, "test", 0)
    generator = ScriptedGenerator({problem: "40"}, miss_every=None)
    with AnswerChecker(last_number=False) as strict:
        assert not strict.states_answer(steps[-1], "40", problem)
        for strategy in ("exhaustive", "first-error", "adaptive"):
            item = label(strategy, [earns], generator, strict, settings(final_step="check")).labelled[0]
            assert item.steps[-1].measured_by in ("rollouts", "early_stop"), strategy
        item = label("final-answer", [earns], generator, strict, settings(final_step="check")).labelled[0]
        assert hard(item)[-1] is None and "no answer" in item.steps[-1].unlabelled_reason
    with AnswerChecker() as default:
        assert default.states_answer(steps[-1], "40", problem)
        item = label("exhaustive", [earns], generator, default, settings(final_step="check")).labelled[0]
        assert item.steps[-1].measured_by == "final_answer" and item.steps[-1].n_correct == 1

LAST_STEPS = [
    "Now we multiply both sides by 2 to get 4 on the right side.",
    "Comparing the times, the winner is Evelyn.",
    "After 3 days, she has 42 apples.",
    "So the answer is $\\frac{1}{2}$.",
    "The answer is: 42",
    "#### 7",
    "Thus $x = 2$.",
    "**14**",
    "Let us check our work.",
    "Plugging in, the expression equals 1 when x is 2.",
    "We get (3, 4) as the point.",
    "\\boxed{}",
    "",
]
REFERENCES = ["42", "\\frac{1}{2}", "\\text{Evelyn}", "(3, 4)", "x^2 + 1", "\\boxed{7}"]
QUESTIONS = [PROBLEM, WINNER_PROBLEM, "Lily picks 14 apples a day. How many apples does she have after 3 days?"]


def test_the_gate_checks_exactly_the_last_steps_whose_check_finds_an_answer(checker):
    """For every last step, reference and question: the gate sends the step to be checked exactly
    when its check reads an answer in it, so a checked last step is never unparseable for want of one."""
    from itertools import product

    from labeler.labeling.strategies import checks_final_step

    nothing_to_compare = {"no answer in the prediction", "empty answer after normalisation", "no reference answer"}
    cases = list(product(LAST_STEPS, REFERENCES, QUESTIONS))
    results = checker.check_many([(step, ref) for step, ref, _ in cases], [q for _, _, q in cases])
    disagree = []
    for (step, ref, question), result in zip(cases, results):
        gate = checks_final_step(Solution("p", "s", question, ref, ("First we set up.", step), "test", 0), "check")
        if gate != (result.rule not in nothing_to_compare):
            disagree.append((step, ref, question[:20], result.rule))
    assert disagree == []


class _CannotCompare:
    """A checker whose check of the last step's text comes back unparseable (math-verify could not parse it)."""

    def __init__(self, checker, text):
        self.checker, self.text = checker, text

    def check_many(self, pairs, questions=None):
        from labeler.checking import CheckResult, Verdict

        verdicts = list(self.checker.check_many(pairs, questions))
        unparseable = CheckResult(Verdict.UNPARSEABLE, "42", "math-verify could not parse the answer")
        return [unparseable if text == self.text else verdict for (text, _), verdict in zip(pairs, verdicts)]


@pytest.mark.parametrize("strategy", ["exhaustive", "first-error", "adaptive", "final-answer"])
def test_an_unparseable_final_check_is_unlabelled_with_its_reason_not_a_zero(checker, strategy):
    """The gate said the last step states an answer, but its check could not compare it: unknown, not wrong
    (review of CHECKER_VERSION 4). Rollouts that come back unparseable stay wrong rollouts (Math-Shepherd)."""
    sol = solution(3)
    outcome, _ = run(strategy, [sol], _CannotCompare(checker, sol.steps[-1]), final_step="check")
    last = outcome.labelled[0].steps[-1]
    assert last.measured_by == "unlabelled" and hard(outcome.labelled[0])[-1] is None
    assert last.unlabelled_reason.startswith("the stated answer could not be compared: ")
    assert "math-verify could not parse" in last.unlabelled_reason


def test_posterior_without_a_prior_yet_finds_first_errors_as_first_error_does_with_fewer_rollouts(checker):
    """Fewer distinct prefixes drawn twice than a prior needs: no negative probe stops early, so probes stop early
    only at a correct rollout."""
    solutions = [solution(k, w, sid=f"s{k}-{w}") for k, w in [(6, 2), (9, -1), (12, 11), (3, 0)]]
    exhaustive, _ = run("exhaustive", solutions, checker, miss_every=2)
    search, _ = run("first-error", solutions, checker, miss_every=2)
    doubt, _ = run("posterior", solutions, checker, miss_every=2)
    assert [first_error(hard(i)) for i in doubt.labelled] == [first_error(hard(i)) for i in exhaustive.labelled]
    assert all(s.n_rollouts == 8 for i in doubt.labelled for s in i.steps if s.measured and s.n_correct == 0 and s.measured_by != "final_answer")
    ex_texts = {(r.solution_id, r.step_index, r.rollout_index): r.text for r in exhaustive.rollouts}
    assert all(ex_texts[(r.solution_id, r.step_index, r.rollout_index)] == r.text for r in doubt.rollouts)  # exhaustive's draws
    assert len(doubt.rollouts) < len(search.rollouts)


def test_posterior_stops_negative_probes_early_once_the_batch_shows_rates_near_0_and_1(checker):
    """Right prefixes always succeed, wrong ones never: the prior fitted to the batch is U-shaped, and a prefix with
    0 of 2 is called negative without drawing to N; its soft label stays null (early_stop), its counts written."""
    solutions = [solution(k, w, sid=f"s{n}-{k}-{w}", words=f"works on it, way {n}") for n in range(4) for k, w in [(6, 2), (9, -1), (12, 11), (5, 0), (8, 4)]]
    exhaustive, _ = run("exhaustive", solutions, checker)
    doubt, _ = run("posterior", solutions, checker, round_size=2, stop_risk=0.05)
    assert [first_error(hard(i)) for i in doubt.labelled] == [first_error(hard(i)) for i in exhaustive.labelled]
    negatives = [s for i in doubt.labelled for s in i.steps if s.measured_by == "early_stop" and s.n_correct == 0]
    assert negatives and max(s.n_rollouts for s in negatives) < 8
    assert all(s.measured_by == "early_stop" for i in doubt.labelled for s in i.steps if s.measured and s.measured_by != "final_answer")
    table = labels_table(doubt.labelled, Provenance("u", "m", "posterior", 5, "h")).to_pylist()
    methods = [(m, soft) for row in table for m, soft in zip(row["label_method"], row["soft_labels"])]
    assert all(soft is None for m, soft in methods if m == "early_stop")
    assert len(doubt.rollouts) * 4 < len(exhaustive.rollouts)


def test_posterior_stops_no_probe_early_when_the_risk_it_may_take_is_tiny(checker):
    solutions = [solution(k, w, sid=f"s{n}-{k}-{w}") for n in range(4) for k, w in [(6, 2), (9, -1), (12, 11), (5, 0), (8, 4)]]
    careful, _ = run("posterior", solutions, checker, round_size=2, stop_risk=1e-9)
    assert all(s.n_rollouts == 8 for i in careful.labelled for s in i.steps if s.measured and s.n_correct == 0 and s.measured_by != "final_answer")


def test_posterior_drawn_one_rollout_a_round_does_not_fit_its_prior_from_single_draws(checker):
    """After a first round of one rollout each, every prefix has n = 1, which says nothing of how spread rates are:
    no prior may come of it (an arbitrary one called right prefixes wrong after one failed rollout)."""
    solutions = [solution(6, -1, sid=f"s{j}", words=f"way {j}") for j in range(20)]  # all right; rollouts miss one time in three
    exhaustive, _ = run("exhaustive", solutions, checker, miss_every=3, final_step="rollouts")
    doubt, _ = run("posterior", solutions, checker, miss_every=3, round_size=1, final_step="rollouts")
    assert [first_error(hard(i)) for i in doubt.labelled] == [first_error(hard(i)) for i in exhaustive.labelled]


class _RareSuccesses(ScriptedGenerator):
    """Prefixes holding HARD reach the answer only on seeds divisible by 8 (exhaustive-8 always finds one); others always."""

    def generate(self, requests, sampling):
        from labeler.labeling.generation import Completion, GenerationResult

        results = super().generate(requests, sampling)
        wrong = Completion("So it is 43.\n\nThe answer is: 43", 8, "stop")
        return [
            GenerationResult(tuple(c if (request.seed + r) % 8 == 0 else wrong for r, c in enumerate(result.completions)))
            if "HARD" in request.assistant_prefix and not result.error else result
            for request, result in zip(requests, results)
        ]


def test_posterior_counts_identical_prefixes_once_in_its_prior(checker):
    """Sixteen twin solutions are one request per prefix and one measurement: they do not make a prior by themselves
    (counted sixteen times, they made one that called four solutions' right prefixes wrong after 0 of 2)."""
    easy = tuple(f"Step {i + 1} easy." + (" The answer is: 42" if i == 5 else "") for i in range(6))
    twins = [Solution("p", f"twin{j}", PROBLEM, ANSWER, easy, "test", 0) for j in range(16)]
    hard_ones = [Solution("p", f"X{k}", PROBLEM, ANSWER, tuple(f"Step {i + 1} of X{k} HARD." + (" The answer is: 42" if i == 5 else "")
                                                                for i in range(6)), "test", 0) for k in range(4)]  # fmt: skip
    outcome = label("posterior", twins + hard_ones, _RareSuccesses({PROBLEM: ANSWER}, miss_every=None), checker, settings(final_step="rollouts"))
    assert [first_error(hard(i)) for i in outcome.labelled[16:]] == [-1] * 4  # exhaustive-8 finds a success at every prefix


class _RatedProblems:
    """Rollouts from a right prefix reach the answer with the rate its steps state ("P=0.1"), seeded like vLLM (seed + r);
    from a WRONG prefix never."""

    model_name = "rated"

    def generate(self, requests, sampling):
        import random
        import re

        from labeler.labeling.generation import Completion, GenerationResult

        results = []
        for request in requests:
            answer = re.search(r"ANS(\d+)", request.user_message).group(1)
            rate = 0.0 if "WRONG" in request.assistant_prefix else float(re.findall(r"P=([0-9.]+)", request.assistant_prefix)[-1])
            texts = [answer if random.Random(request.seed + r).random() < rate else str(int(answer) + 1) for r in range(request.n)]
            results.append(GenerationResult(tuple(Completion(f"The answer is: {t}", 5, "stop", sampling.max_new_tokens) for t in texts)))
        return results


def test_posterior_does_not_stop_a_hard_problems_probes_on_a_prior_its_easy_neighbours_made(checker):
    """Seven problems in eight easy (right prefixes always reach the answer), one hard (one rollout in ten): the unit's
    prior is U-shaped, and it called three hard problems' right first prefixes wrong after 0 of 2 (exhaustive-8 finds
    a success there). A probe now stops early only where its own problem showed the completer sure of it."""
    import random

    rng = random.Random(0)
    solutions = []
    for k in range(64):
        rate, steps = (0.1 if k % 8 == 0 else 1.0), rng.randint(6, 14)
        wrong_at = rng.choice([-1, rng.randrange(steps)])
        texts = tuple(f"Step {i + 1} of {k} P={rate}" + (" WRONG" if i == wrong_at else "") for i in range(steps))
        solutions.append(Solution(f"p{k}", f"s{k}", f"Problem ANS{100 + k}", str(100 + k), texts, "t", k))
    common = settings(final_step="rollouts", round_size=2, stop_risk=0.05, seed=1)
    exhaustive = label("exhaustive", solutions, _RatedProblems(), checker, common)
    doubt = label("posterior", solutions, _RatedProblems(), checker, common)
    search = label("first-error", solutions, _RatedProblems(), checker, common)
    wrongly_stopped = [
        (a.solution.solution_id, i) for a, b in zip(exhaustive.labelled, doubt.labelled) for i, (x, y) in enumerate(zip(a.steps, b.steps))
        if y.measured_by == "early_stop" and y.n_correct == 0 and x.n_correct > 0
    ]  # fmt: skip
    assert not wrongly_stopped
    assert [first_error(hard(i)) for i in doubt.labelled] == [first_error(hard(i)) for i in search.labelled]
    assert sum(s.measured_by == "early_stop" and s.n_correct == 0 for i in doubt.labelled for s in i.steps) > 30  # easy ones still stop


class _Retracing:
    """Rollouts that retrace their solution: from a prefix of at least `retrace_from` steps, they write the solution's
    next steps word for word up to its first WRONG one (or its last step), then the reference answer; from a shorter
    prefix they answer without writing a step; from a prefix holding WRONG or TRAP, a wrong answer (a TRAP step is
    written through by a retracing rollout all the same). `alter` writes each retraced step with words added."""

    model_name = "retracing"

    def __init__(self, solutions, retrace_from=1, alter=False):
        self.steps = {s.problem: s.steps for s in solutions}
        self.retrace_from, self.alter = retrace_from, alter

    def generate(self, requests, sampling):
        from labeler.labeling.generation import Completion, GenerationResult
        from labeler.labeling.prompts import STEP_SEPARATOR

        results = []
        for request in requests:
            steps = self.steps[request.user_message.split("\n\n")[0]]
            done = request.assistant_prefix.count(STEP_SEPARATOR)
            if WRONG_MARKER in request.assistant_prefix or "TRAP" in request.assistant_prefix:
                text = "So it is 41.\n\nThe answer is: 41"
            elif done >= self.retrace_from:
                ahead = []
                for step in steps[done:-1]:
                    if WRONG_MARKER in step:
                        break
                    ahead.append(step + (" Let me check that." if self.alter else ""))
                text = "".join(step + STEP_SEPARATOR for step in ahead) + f"The answer is: {ANSWER}"
            else:
                text = f"Continuing.\n\nThe answer is: {ANSWER}"
            results.append(GenerationResult(tuple(Completion(text, len(text.split()), "stop", sampling.max_new_tokens) for _ in range(request.n))))
        return results


def _own_problems(shapes):
    """Solutions of (steps, wrong_at), each of its own problem (the retracing double finds a solution by its problem)."""
    return [Solution(f"p{n}", f"s{n}", f"{PROBLEM} (number {n})", ANSWER, solution(k, w).steps, "test", n) for n, (k, w) in enumerate(shapes)]


SHAPES = [(12, -1), (12, 7), (30, 21), (6, 0), (9, 8), (40, 33)]


def test_posterior_reads_a_correct_rollout_that_wrote_the_next_steps_as_their_labels_too(checker):
    """A correct rollout of prefix i that wrote steps i+1..j word for word is a correct completion of those prefixes: the
    search does not probe them. First errors stay exhaustive's; the steps passed through are `retraced` (soft null)."""
    solutions = _own_problems(SHAPES)
    exhaustive = label("exhaustive", solutions, _Retracing(solutions), checker, settings())
    search = label("first-error", solutions, _Retracing(solutions), checker, settings())
    doubt = label("posterior", solutions, _Retracing(solutions), checker, settings())
    validate_labels(labels_table(doubt.labelled, Provenance("u", "m", "posterior", 5, "h")))
    assert [first_error(hard(i)) for i in doubt.labelled] == [first_error(hard(i)) for i in exhaustive.labelled]
    assert [first_error(hard(i)) for i in doubt.labelled] == [wrong_at for _, wrong_at in SHAPES]
    measured = [[i for i, s in enumerate(item.steps) if s.measured and s.measured_by != "final_answer"] for item in doubt.labelled]
    assert measured == [[0], [0, 7], [0, 21], [0], [0], [0, 33]]  # the first prefix, then the first error (a last one is checked)
    retraced = [s for item in doubt.labelled for s in item.steps if s.measured_by == "retraced"]
    assert retraced and all(s.n_rollouts == 0 and s.inferred_hard for s in retraced)
    assert len(doubt.rollouts) * 3 < len(search.rollouts)


def test_posterior_reads_nothing_from_rollouts_that_do_not_write_the_steps_word_for_word(checker):
    """Retraced steps with words added are other steps: the search probes as it would without them."""
    solutions = _own_problems(SHAPES)
    plain = label("posterior", solutions, _Retracing(solutions, retrace_from=10**6), checker, settings())
    altered = label("posterior", solutions, _Retracing(solutions, alter=True), checker, settings())
    measured = lambda outcome: [[i for i, s in enumerate(item.steps) if s.measured] for item in outcome.labelled]  # noqa: E731
    assert measured(altered) == measured(plain)
    assert len(measured(plain)[2]) > 4  # the 30-step one is searched


def test_posterior_does_not_read_past_a_prefix_its_own_rollouts_found_negative(checker):
    """Prefix 3 (TRAP) fails every rollout of its own, but the rollouts of prefix 2, probed after it, write through it
    and reach the answer: prefix 3 keeps its measured negative, and the first error is exhaustive's."""
    texts = list(solution(12).steps)
    texts[3] += " TRAP"
    solutions = [Solution("p", "trap", f"{PROBLEM} (number 0)", ANSWER, tuple(texts), "test", 0)]
    generator = _Retracing(solutions, retrace_from=3)
    exhaustive = label("exhaustive", solutions, generator, checker, settings())
    doubt = label("posterior", solutions, generator, checker, settings())
    assert first_error(hard(doubt.labelled[0])) == first_error(hard(exhaustive.labelled[0])) == 3
    assert doubt.labelled[0].steps[3].n_rollouts > 0 and doubt.labelled[0].steps[3].n_correct == 0
    assert hard(doubt.labelled[0]) == hard(exhaustive.labelled[0])  # after the first error negative, not read past it


def test_written_through_needs_each_step_whole_and_stops_at_a_thinking_trace_close():
    from labeler.labeling.strategies.posterior import written_through

    steps = ("First, 2 + 2 = 4.", "Then 4 * 3 = 12.", "Then 12 - 2 = 10.", "The answer is: 10")
    plain = Solution("p", "s", PROBLEM, "10", steps, "test", 0)
    assert written_through(plain, 0, "Then 4 * 3 = 12.\n\nThen 12 - 2 = 10.\n\nThe answer is: 10", 3) == 2
    assert written_through(plain, 0, "Then 4 * 3 = 12.\n\nThen 12 - 2 = 10.\n\nThe answer is: 10", 1) == 1  # at most `last`
    assert written_through(plain, 0, "Then 4 * 3 = 120.\n\nThe answer is: 120", 3) == 0  # a step that starts as the next one
    assert written_through(plain, 0, "Then 4 * 3 = 12. So\n\nThe answer is: 10", 3) == 0
    assert written_through(plain, 0, "Then 4 * 3 = 12.", 3) == 0  # no separator: the step may go on
    trace = Solution("p", "t", PROBLEM, "10", steps, "test", 0, thinking_steps=2)
    # prefixes 0 and 1 end inside the thinking, prefix 2 after it closed: a prefix that ends inside the thinking is not
    # the start of one after it, so nothing past the close is read
    assert written_through(trace, 0, "Then 4 * 3 = 12.\n\nThen 12 - 2 = 10.\n\n", 3) == 1
    assert written_through(trace, 1, "Then 12 - 2 = 10.\n\n", 3) == 1


def test_posterior_reads_past_a_probe_only_where_its_solution_id_names_one_solution(checker):
    """Rollout records name their solution by id: two solutions of one id (possible for callers other than a job, which
    keys rows uniquely) could lend each other's rollouts, so neither is read past its probes."""
    pair = [replace(s, solution_id="same") for s in _own_problems([(12, -1), (12, -1)])]
    plain = label("posterior", pair, _Retracing(pair, retrace_from=10**6), checker, settings())
    shared = label("posterior", pair, _Retracing(pair), checker, settings())
    measured = lambda outcome: [[i for i, s in enumerate(item.steps) if s.measured] for item in outcome.labelled]  # noqa: E731
    assert measured(shared) == measured(plain) and len(measured(plain)[0]) > 2


def test_a_posterior_batch_counts_the_steps_written_through_and_a_job_total_needs_every_unit_to_have_counted():
    from labeler.store.manifest import UNIT_COMMITTED, refresh_totals

    with AnswerChecker() as checker:
        solutions = _own_problems(SHAPES)
        doubt = label("posterior", solutions, _Retracing(solutions), checker, settings())
    # steps 1 up to the first error, or to the last sampled prefix (the last step is checked by its answer)
    assert doubt.written_through == 10 + 6 + 20 + 0 + 7 + 32
    units = lambda *stats: {"units": [{"state": UNIT_COMMITTED, "stats": stat} for stat in stats]}  # noqa: E731
    counted, old = {"prefix_requests": 3, "steps_written_through": 5}, {"prefix_requests": 2}
    for document, expected in [(units(counted, counted), 10), (units(counted, old), None), (units(counted, {"prefix_requests": 0}), 5)]:
        refresh_totals(document)
        assert document["totals"]["steps_written_through"] == expected


def test_a_doubted_positive_is_searched_before_then_passed():
    from labeler.labeling.strategies.first_error import _Search

    found = _Search(size=40)
    for step in (0, 1, 3):
        assert found.next_probe() == step
        found.observe(step, True)
    assert found.next_probe() == 7
    found.doubt(7)  # a positive most of whose rollouts failed: a prefix before it may be negative
    assert found.next_probe() == 5
    found.observe(5, False)
    assert found.next_probe() == 4
    found.observe(4, True)
    assert found.next_probe() is None and found.first_negative == 5

    passed = _Search(size=40)
    for step in (0, 1, 3):
        passed.observe(step, True)
    passed.doubt(7)
    for step in (5, 6):
        assert passed.next_probe() == step
        passed.observe(step, True)
    assert passed.next_probe() == 15  # none negative before 7: gallop on after it
    passed.observe(15, False)
    assert passed.next_probe() == 11 and passed.first_negative == 15


class _Noisy:
    """Rollouts reach the answer with the rate the prefix's last step states ("P=0.8"), seeded like vLLM (seed + r)."""

    model_name = "noisy"

    def generate(self, requests, sampling):
        import random
        import re

        from labeler.labeling.generation import Completion, GenerationResult

        results = []
        for request in requests:
            answer = re.search(r"ANS(\d+)", request.user_message).group(1)
            rate = float(re.findall(r"P=([0-9.]+)", request.assistant_prefix)[-1])
            texts = [answer if random.Random(request.seed + r).random() < rate else str(int(answer) + 1) for r in range(request.n)]
            results.append(GenerationResult(tuple(Completion(f"The answer is: {t}", 5, "stop", sampling.max_new_tokens) for t in texts)))
        return results


def test_posterior_looks_before_a_positive_most_of_whose_rollouts_failed_for_the_negative_a_search_steps_over(checker):
    """Right prefixes reach the answer 80% of the time, wrong ones 2%: exhaustive-8 calls a wrong prefix positive one
    time in seven, and a search that probes one past the first error steps over it (first-error agrees with exhaustive's
    first error on 86 of 100 long solutions). Such a lucky positive mostly shows itself by its failures."""
    import random

    rng = random.Random(0)
    solutions = []
    for k in range(100):
        steps = rng.randint(30, 80)
        wrong_at = rng.randrange(steps)
        texts = tuple(f"Step {i + 1} of {k} P={0.8 if i < wrong_at else 0.02}" for i in range(steps))
        solutions.append(Solution(f"p{k}", f"s{k}", f"Problem ANS{100 + k}", str(100 + k), texts, "t", k))
    common = settings(final_step="rollouts", seed=1)
    outcomes = {name: label(name, solutions, _Noisy(), checker, common) for name in ("exhaustive", "first-error", "posterior")}
    first_errors = {name: [first_error(hard(item)) for item in outcome.labelled] for name, outcome in outcomes.items()}
    agree = {name: sum(a == b for a, b in zip(errors, first_errors["exhaustive"])) for name, errors in first_errors.items()}
    assert agree["first-error"] == 86 and agree["posterior"] >= 93
    drawn = {name: sum(step.n_sampled for item in outcome.labelled for step in item.steps) for name, outcome in outcomes.items()}
    assert drawn["posterior"] * 2 < drawn["first-error"] and drawn["first-error"] * 6 < drawn["exhaustive"]


class _SignsOff:
    """Rollouts that retrace the solution through its step that boxes the answer, then sign off without one; past that
    step they only sign off."""

    model_name = "signs-off"

    def __init__(self, solution, boxed_at):
        self.steps, self.boxed_at = solution.steps, boxed_at

    def generate(self, requests, sampling):
        from labeler.labeling.generation import Completion, GenerationResult
        from labeler.labeling.prompts import STEP_SEPARATOR

        results = []
        for request in requests:
            done = request.assistant_prefix.count(STEP_SEPARATOR)
            text = "".join(step + STEP_SEPARATOR for step in self.steps[done : self.boxed_at + 1]) + "I hope this helps!"
            results.append(GenerationResult(tuple(Completion(text, 5, "stop", sampling.max_new_tokens) for _ in range(request.n))))
        return results


@pytest.mark.parametrize("final_step", ["check", "rollouts"])
def test_a_rollout_correct_by_an_answer_it_copied_from_the_solution_makes_no_longer_prefix_positive(final_step, checker):
    """A rollout correct only because a step it copied states the answer: after that step it wrote no answer, so the
    prefix through it reached nothing (exhaustive: 0 of 8). Posterior read it as positive (its first error moved)."""
    steps = [f"Step {i + 1} works on it." for i in range(8)] + [r"So the sum is $\boxed{42}$.", "Let me double-check: 20 + 22 = 42.",
                                                                f"The answer is: {ANSWER}"]  # fmt: skip
    boxed_at = 8 if final_step == "check" else len(steps) - 1
    one = Solution("p", "copied", PROBLEM, ANSWER, tuple(steps), "test", 0)
    exhaustive = label("exhaustive", [one], _SignsOff(one, boxed_at), checker, settings(final_step=final_step))
    doubt = label("posterior", [one], _SignsOff(one, boxed_at), checker, settings(final_step=final_step))
    assert hard(doubt.labelled[0])[:boxed_at + 1] == hard(exhaustive.labelled[0])[:boxed_at + 1]
    assert doubt.labelled[0].steps[boxed_at].measured_by != "inferred"
    assert doubt.written_through == boxed_at - 1  # steps 1 .. boxed_at-1: what came after each boxed the answer


class _FailsAt:
    """Retraces the solution from prefix 2 on, up to a step holding BOOM; a prefix holding BOOM gets an engine error."""

    model_name = "fails-at"

    def __init__(self, solution):
        self.steps = solution.steps

    def generate(self, requests, sampling):
        from labeler.labeling.generation import Completion, GenerationResult
        from labeler.labeling.prompts import STEP_SEPARATOR

        results = []
        for request in requests:
            if "BOOM" in request.assistant_prefix:
                results.append(GenerationResult((), error="engine error"))
                continue
            done = request.assistant_prefix.count(STEP_SEPARATOR)
            ahead = []
            for step in self.steps[done:-1] if done >= 2 else ():
                if "BOOM" in step:
                    break
                ahead.append(step)
            text = "".join(step + STEP_SEPARATOR for step in ahead) + f"The answer is: {ANSWER}"
            results.append(GenerationResult(tuple(Completion(text, 5, "stop", sampling.max_new_tokens) for _ in range(request.n))))
        return results


def test_the_steps_written_through_of_a_solution_the_engine_failed_are_not_counted(checker):
    texts = list(solution(12).steps)
    texts[6] += " BOOM"
    one = Solution("p", "boom", PROBLEM, ANSWER, tuple(texts), "test", 0)
    outcome = label("posterior", [one], _FailsAt(one), checker, settings())
    assert not outcome.labelled and len(outcome.failed) == 1
    assert outcome.written_through == 0
