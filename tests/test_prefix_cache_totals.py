"""The prefix-cache hit rate a job reports: vLLM's own counters around each rollout round, summed per unit, and a
job total only when every unit that sampled rollouts reported them (the real engine's figure: test_trace_engine)."""

from labeler.checking.checker import AnswerChecker
from labeler.labeling.generation import SamplingSettings
from labeler.labeling.strategies import StrategySettings, label
from labeler.store.manifest import _prefix_cache_hit_rate
from tests.fakes import ScriptedGenerator
from tests.test_strategies import ANSWER, PROBLEM, solution


class CountingGenerator(ScriptedGenerator):
    """Reports running totals as vLLM's generator does: each request looks up 10 prompt tokens and finds 7."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.queries = self.hits = 0

    def generate(self, requests, sampling):
        self.queries, self.hits = self.queries + 10 * len(requests), self.hits + 7 * len(requests)
        return super().generate(requests, sampling)

    def prefix_cache_counts(self):
        return self.queries, self.hits


def test_a_batch_sums_the_engines_counts_over_its_rounds_and_says_none_when_it_does_not_report():
    settings = StrategySettings(rollouts=4, sampling=SamplingSettings(max_new_tokens=16), seed=5)
    with AnswerChecker() as checker:
        counted = label("posterior", [solution(6, 2)], CountingGenerator({PROBLEM: ANSWER}), checker, settings)
        silent = label("posterior", [solution(6, 2)], ScriptedGenerator({PROBLEM: ANSWER}), checker, settings)
    assert counted.prefix_cache == (10 * counted.requests, 7 * counted.requests)
    assert silent.prefix_cache is None


def test_the_job_rate_needs_every_sampling_unit_to_have_reported():
    new = {"prefix_requests": 5, "prefix_cache_queries": 100, "prefix_cache_hits": 80}
    assert _prefix_cache_hit_rate([new, new | {"prefix_cache_queries": 300, "prefix_cache_hits": 100}]) == 0.45
    assert _prefix_cache_hit_rate([new, {"prefix_requests": 5}]) is None  # a unit from before the count
    assert _prefix_cache_hit_rate([new, {"prefix_requests": 0}]) == 0.8  # a unit that sampled nothing says nothing
    assert _prefix_cache_hit_rate([]) is None
