"""Beam search logic on a scripted generator and a scorer that reads its score from the step text
(test doubles for the logic only; tests/test_bon_search_engine.py runs the real engine and PRM)."""

import re

import pytest

from labeler.checking.checker import AnswerChecker
from labeler.decoding.beam_search import (
    ANSWER,
    CUT,
    ENDED,
    OPEN,
    STEP_LIMIT,
    SearchProblem,
    SearchSettings,
    beam_search,
    check_answers,
)
from labeler.labeling.generation import Completion, GenerationResult, SamplingSettings

SEP = "\n\n"


class StepScript:
    """Proposal r of a prefix with k steps is "k.r v=V" + separator, V from `values(k, r, prefix)`;
    `ending(k, r, prefix)` may instead return (text, finish_reason) for a proposal that ends."""

    def __init__(self, values, ending=lambda k, r, prefix: None, tokens=lambda k, r: 3 + r):
        self.values, self.ending, self.tokens = values, ending, tokens
        self.calls = []

    def generate(self, requests, sampling):
        self.calls.append([(r.assistant_prefix, r.n, r.seed) for r in requests])
        self.prompts = getattr(self, "prompts", []) + [((r.user_message, r.assistant_prefix), r.seed) for r in requests]
        results = []
        for request in requests:
            k = request.assistant_prefix.count(SEP)
            completions = []
            for r in range(request.n):
                ended = self.ending(k, r, request.assistant_prefix)
                text, finish = ended if ended else (f"{k}.{r} v={self.values(k, r, request.assistant_prefix)}{SEP}", "stop")
                completions.append(Completion(text, self.tokens(k, r), finish, sampling.max_new_tokens))
            results.append(GenerationResult(tuple(completions)))
        return results


class TextScorer:
    """A step's score is the number after "v=" in it (0.95 for a step without one)."""

    name = "text-scorer"

    def __init__(self):
        self.calls = []

    def step_scores(self, solutions):
        self.calls.append(len(solutions))
        return [[float(re.search(r"v=([\d.]+)", step).group(1)) if "v=" in step else 0.95 for step in s.steps] for s in solutions]


def settings(**overrides) -> SearchSettings:
    values = {"beams": 2, "proposals": 3, "max_steps": 4, "separator": SEP, "aggregate": "last", "seed": 7}
    values.update(overrides)
    sampling = SamplingSettings(max_new_tokens=16, stop=(values["separator"],), answer_marker="The answer is")
    return SearchSettings(**values, sampling=sampling)


PROBLEM = SearchProblem("p", "What is 2 + 2?", "4")


def test_the_first_step_samples_b_times_k_and_keeps_the_top_b():
    values = {(0, r): v for r, v in enumerate([0.1, 0.9, 0.3, 0.8, 0.2, 0.5])}
    script = StepScript(lambda k, r, prefix: values.get((k, r), 0.5), ending=lambda k, r, prefix: ("The answer is: 4\n", "stop") if k == 1 else None)
    [search] = beam_search([PROBLEM], script, TextScorer(), settings())
    assert script.calls[0] == [("", 6, script.calls[0][0][2])]  # one request, B x K = 6 proposals
    first = search.rounds[0]
    assert [entry["score"] for entry in first] == [0.1, 0.9, 0.3, 0.8, 0.2, 0.5]
    assert [entry["kept"] for entry in first] == [False, True, False, True, False, False]
    # round two expands exactly the two kept beams, K proposals each, their steps cut at the separator
    assert sorted(prefix for prefix, n, _ in script.calls[1]) == ["0.1 v=0.9" + SEP, "0.3 v=0.8" + SEP]
    assert all(n == 3 for _, n, _ in script.calls[1])
    assert search.chosen.status == ANSWER and search.chosen.steps == ("0.1 v=0.9", "The answer is: 4")


def test_kept_beams_are_the_top_b_of_new_steps_and_of_beams_that_ended():
    # depth 1: the first kept beam's proposal 0 ends with an answer scored 0.95; the search goes on
    # from the other kept beams until every kept beam has ended
    def ending(k, r, prefix):
        if k == 1 and r == 0 and prefix.startswith("0.1"):
            return ("The answer is: 4\n", "stop")
        if k == 2:
            return ("The answer is: 5\n", "stop") if r == 0 else ("So we stop", "stop")
        return None

    values = lambda k, r, prefix: {0: [0.2, 0.9, 0.8, 0.1, 0.1, 0.1], 1: [0.5, 0.6, 0.7]}[k][r] if k < 2 else 0.5
    [search] = beam_search([PROBLEM], StepScript(values, ending), TextScorer(), settings())
    second = search.rounds[1]
    ranked = sorted((e for e in second if "dropped" not in e), key=lambda e: -e["score"])
    assert [e["kept"] for e in ranked] == [True, True] + [False] * (len(ranked) - 2)
    assert ranked[0]["status"] == ANSWER and ranked[0]["score"] == 0.95
    # round three: the answered beam is carried and competes; the open one is expanded
    third = search.rounds[2]
    assert third[0]["carried"] and third[0]["status"] == ANSWER and third[0]["kept"]
    assert {e["status"] for e in third[1:]} == {ANSWER, ENDED}
    assert search.done and search.chosen.steps[-1] == "The answer is: 4"
    assert all(beam.status != OPEN for beam in search.kept)


def test_step_limit_cut_steps_tokens_and_the_answer_check():
    script = StepScript(lambda k, r, prefix: 0.5 + r / 10, ending=lambda k, r, prefix: ("1.0 v=0.99 and on and on", "length") if r == 2 else None)
    [search] = beam_search([PROBLEM], script, TextScorer(), settings(max_steps=2))
    assert len(search.rounds) == 2
    assert {beam.status for beam in search.kept} <= {STEP_LIMIT, CUT}
    # the first step keeps the best open proposal (r = 5, 1.0) and the cut one (r = 2, 0.99), which
    # is not expanded: one beam grows at the second step
    assert [entry["kept"] for entry in search.rounds[0]] == [False, False, True, False, False, True]
    assert search.rounds[0][2]["status"] == CUT and search.rounds[1][0]["carried"]
    # every proposal's tokens count, kept or not: 3+4+...+8 at the first step, 3+4+5 at the second
    proposals = [entry for entry in search.rounds[0] + search.rounds[1] if not entry.get("carried")]
    assert search.generated_tokens == sum(entry["tokens"] for entry in proposals) == 33 + 12
    assert search.requests == 2 and search.proposals == 9
    with AnswerChecker() as checker:
        check_answers([search], checker)
    assert not search.correct  # a beam stopped by the step limit or its budget states no answer


def test_seeds_follow_the_prefix_not_the_batch():
    values = lambda k, r, prefix: 0.5 + r / 10
    one = StepScript(values)
    beam_search([PROBLEM], one, TextScorer(), settings(max_steps=2))
    two = StepScript(values)
    other = SearchProblem("q", "What is 3 + 3?", "6")
    beam_search([other, PROBLEM], two, TextScorer(), settings(max_steps=2))
    alone = dict(one.prompts)
    together = two.prompts
    shared = [(prompt, seed) for prompt, seed in together if prompt in alone]
    assert len(shared) == len(alone) and all(alone[prompt] == seed for prompt, seed in shared)
    assert len({seed for _, seed in together}) == len(together)  # distinct prompts, distinct seeds
    assert len(two.calls) == 2  # both problems' beams share each round's generate call


def test_blank_steps_are_dropped_duplicates_kept_once_and_an_empty_ending_closes_the_parent():
    def ending(k, r, prefix):
        if k == 0:
            return (SEP, "stop") if r == 0 else ("same v=0.5" + SEP, "stop")
        return ("", "stop")  # the model ends its turn right after its first step

    [search] = beam_search([PROBLEM], StepScript(lambda k, r, prefix: 0.5, ending), TextScorer(), settings(beams=2, proposals=2))
    first = search.rounds[0]
    assert [entry.get("dropped") for entry in first] == ["blank step", None, "duplicate", "duplicate"]
    assert [entry["kept"] for entry in first] == [False, True, False, False]
    assert search.chosen.steps == ("same v=0.5",) and search.chosen.status == ENDED and search.chosen.score == 0.5


@pytest.mark.parametrize("aggregate, first_step", [("last", "0.0 v=0.6"), ("min", "0.1 v=0.9"), ("product", "0.1 v=0.9"), ("mean", "0.1 v=0.9")])
def test_the_aggregate_decides_the_ranking(aggregate, first_step):
    # line A: 0.6, 0.7, answer 0.85; line B: 0.9, 0.65, answer 0.8. last prefers A, min (0.6 < 0.65),
    # product (0.357 < 0.468) and mean (0.717 < 0.783) prefer B
    def values(k, r, prefix):
        return [0.6, 0.9][r] if k == 0 else (0.7 if "v=0.6" in prefix else 0.65)

    def ending(k, r, prefix):
        return (f"The answer is: 4 v={0.85 if 'v=0.6' in prefix else 0.8}\n", "stop") if k == 2 else None

    [search] = beam_search([PROBLEM], StepScript(values, ending), TextScorer(), settings(beams=2, proposals=1, aggregate=aggregate))
    assert search.chosen.steps[0] == first_step and search.chosen.status == ANSWER


def test_the_summary_says_an_unscored_chosen_beam_had_no_scored_finished_beam_beside_it():
    """The search chooses among finished beams first: an unscored chosen beam means none of the finished ones was
    scored, not none of all the problem's beams."""
    from labeler.decoding.comparison import format_summary

    results = {
        "settings": {"beams": 2, "proposals": 2, "max_steps": 4, "aggregate": "min"}, "prm": {"name": "prm"},
        "accuracy": 0.5, "correct": 1, "problems": 2, "tokens_per_problem": 10.0, "finished_by": {"stop": 2},
        "counted_wrong_unchecked": {}, "chosen_unscored": 1, "best_of_n": None,
    }
    summary = format_summary(results)
    assert "chosen beams the PRM could not fully score (none of their problem's finished beams was scored" in summary


def test_beams_whose_min_agrees_to_six_decimals_are_ranked_by_their_newest_step():
    """Children of one beam share its min, up to the noise of scoring the prefix again (7th digit): the newest step
    decides, not that noise."""
    def values(k, r, prefix):
        return 0.5 if k == 0 else [0.6, 0.9][r]

    class NoisyScorer(TextScorer):  # the first step scored again moves in the 7th digit, against the better child
        def step_scores(self, solutions):
            scores = super().step_scores(solutions)
            return [[s[0] + (3e-7 if len(s) > 1 and s[1] == 0.6 else 0.0), *s[1:]] for s in scores]

    def ending(k, r, prefix):
        return ("The answer is: 4\n", "stop") if k == 2 else None

    [search] = beam_search([PROBLEM], StepScript(values, ending), NoisyScorer(), settings(beams=1, proposals=2, max_steps=3, aggregate="min"))
    second = [e for e in search.rounds[1] if not e.get("carried")]
    assert [e["kept"] for e in second] == [False, True]  # 0.9 kept over 0.6, though its min is 3e-7 lower
    assert search.chosen.steps[1].startswith("1.1 v=0.9")


def test_search_ranks_by_min_unless_told():
    """min by default (as best-of-N selects): in the world, last ranked beams to 0.393 and min to 0.637."""
    import dataclasses

    from labeler.decoding.config import SearchConfig

    assert {f.name: f.default for f in dataclasses.fields(SearchConfig)}["aggregate"] == "min"
