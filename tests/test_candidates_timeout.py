"""A candidate whose final check timed out is unchecked in best-of-N (labeler/decoding/candidates.py), whatever
hard label its labels row carries: the rollouts table's verdict says the check gave none."""

from labeler.checking.checker import AnswerChecker
from labeler.checking.verdicts import CheckResult, Verdict
from labeler.decoding.candidates import read_candidates
from tests.conftest import write_jsonl
from tests.fakes import ScriptedGenerator
from tests.test_job import PROBLEMS, config, run


class FirstCheckTimesOut:
    """The checker, but the first check of every batch times out."""

    def __init__(self, inner):
        self.inner = inner

    def check_many(self, pairs, questions=None):
        results = self.inner.check_many(pairs, questions)
        return [CheckResult(Verdict.TIMEOUT, r.extracted) if i == 0 else r for i, r in enumerate(results)]

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_a_timed_out_final_check_is_an_unchecked_candidate(tmp_path):
    rows = [{"problem": p, "answer": a} for p, a in list(PROBLEMS.items())[:2]]
    generator = ScriptedGenerator(PROBLEMS, sampled_solution="First we add.\n\nThe answer is: {answer}")
    output = tmp_path / "out"
    settings = dict(strategy="final-answer", final_step="check", solutions_per_problem=2, write_rollouts=True, max_timeout_share=1.0)
    with AnswerChecker(timeout_s=5) as checker:
        run(config(write_jsonl(tmp_path / "p.jsonl", rows), output, **settings), FirstCheckTimesOut(checker), generator)
    candidates = read_candidates(str(output))
    timed_out = [c for c in candidates.candidates if c.unchecked_reason is not None]
    assert len(timed_out) == 2 and not any(c.correct or c.answer for c in timed_out)
    assert candidates.unchecked == {"the answer check timed out": 2}
    assert all(c.correct and c.answer is not None for c in candidates.candidates if c.unchecked_reason is None)
