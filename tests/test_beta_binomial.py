"""The Beta-Binomial prior behind the posterior strategy: its predictive chance and its fit (property tests)."""

import math

from hypothesis import given
from hypothesis import strategies as st

from labeler.labeling.beta_binomial import UNIFORM, BetaPrior, fit_prior

priors = st.builds(BetaPrior, st.floats(0.05, 50), st.floats(0.05, 50))


@given(priors, st.integers(0, 30), st.integers(0, 30))
def test_the_chance_of_a_success_is_a_probability_that_falls_with_failures_and_grows_with_draws(prior, failures, more):
    chance = prior.chance_of_success(failures, more)
    assert 0.0 <= chance <= 1.0
    assert prior.chance_of_success(failures + 1, more) <= chance + 1e-12
    assert prior.chance_of_success(failures, more + 1) >= chance - 1e-12
    assert prior.chance_of_success(failures, 0) == 0.0


@given(st.integers(0, 30), st.integers(1, 30))
def test_under_the_uniform_prior_the_chance_is_the_rule_of_succession(failures, more):
    # E[(1 - p)^m | 0 of n, Beta(1, 1)] = (n + 1) / (n + m + 1)
    assert math.isclose(UNIFORM.chance_of_success(failures, more), more / (failures + more + 1), rel_tol=1e-9)


@given(priors, st.integers(1, 12))
def test_the_likelihood_of_every_outcome_of_n_draws_sums_to_one(prior, n):
    from collections import Counter

    total = sum(math.comb(n, c) * math.exp(prior.log_likelihood(Counter({(c, n): 1}))) for c in range(n + 1))
    assert math.isclose(total, 1.0, rel_tol=1e-9)


def test_the_fit_waits_for_enough_prefixes_drawn_twice_then_finds_rates_near_0_and_1():
    assert fit_prior([(0, 8)] * 5, minimum_prefixes=16) is None
    assert fit_prior([(1, 1)] * 40 + [(0, 1)] * 40, minimum_prefixes=16) is None  # single draws say nothing of the spread
    bimodal = fit_prior([(1, 1)] * 40 + [(0, 8)] * 20, minimum_prefixes=16)
    assert bimodal.a + bimodal.b < 1  # mass near both ends
    assert bimodal.chance_of_success(2, 6) < 0.05  # 0 of 2 there is a negative prefix
    middling = fit_prior([(4, 8)] * 60, minimum_prefixes=16)
    assert 0.45 <= middling.a / (middling.a + middling.b) <= 0.55 and middling.a + middling.b > 20
    assert middling.chance_of_success(2, 6) > 0.5  # 0 of 2 there says little
