"""The checker on the visible evaluation sets (bench/checker_eval/*.jsonl): on every set it is
right more often than naive Math-Verify, `verify(parse(gold), parse(prediction))`, and calls no
more wrong answers correct. Naive Math-Verify's verdicts are the ones bench/checker.py
--record-naive stored (running it here would take a minute); the figures are in the README."""

from __future__ import annotations

import pytest

from bench.checker_eval import sets
from labeler.checking.checker import AnswerChecker, Verdict


@pytest.fixture(scope="module")
def outcomes():
    naive = sets.load_naive()
    out = {}
    with AnswerChecker(timeout_s=5.0, workers=2) as checker:
        for name in sets.set_names():
            rows = sets.load_set(name)
            questions, _ = sets.questions_for(rows)
            results = checker.check_many([(r["prediction"], r["gold"]) for r in rows], questions)
            out[name] = (rows, [res.verdict is Verdict.CORRECT for res in results], [naive.get(r["id"]) for r in rows])
    return out


def counts(rows, verdicts):
    right = sum(v == r["expected"] for r, v in zip(rows, verdicts))
    fp = sum(v and not r["expected"] for r, v in zip(rows, verdicts))
    return right, fp


@pytest.mark.parametrize("name", sets.set_names())
def test_the_checker_beats_naive_math_verify_on_every_set(outcomes, name):
    rows, ours, naive = outcomes[name]
    assert None not in naive, "rows without a recorded naive Math-Verify verdict: run bench/checker.py --record-naive"
    (ours_right, ours_fp), (naive_right, naive_fp) = counts(rows, ours), counts(rows, naive)
    assert ours_right > naive_right, (name, ours_right, naive_right)
    assert ours_fp <= naive_fp, (name, ours_fp, naive_fp)


def test_the_sets_are_labelled_and_sourced():
    rows = [r for name in sets.set_names() for r in sets.load_set(name)]
    assert len(rows) >= 500
    assert len({r["id"] for r in rows}) == len(rows)
    assert all(r["source"].strip() and r["reason"].strip() for r in rows)
    assert not any("processbench" in r["source"].lower() for r in rows)
    assert sets.HELD_OUT in sets.set_names() and len(sets.set_names()) >= 2
