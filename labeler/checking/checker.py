"""Answer checker: did a completion reach the reference answer?

The front end, ``AnswerChecker``. Three layers, cheapest first:

1. Extraction (``extraction``, in-process): the completion's final answer; the last-number
   fallback only for plain-number references unless told otherwise.
2. Fast path (``normalisation``, ``forms``, ``comparison``, in-process, no sympy): normalised
   strings, exact numbers, percentages, units and count nouns, multiple-choice letters, and the
   shapes of answers (tuples and sets, named components, functions, inequalities and intervals),
   with the question when it is given (``question``, ``quantities``). GSM8K-style answers never
   leave this layer.
3. Symbolic path (``symbolic``, in the worker processes of ``pool``): math-verify's LaTeX grammar
   and sympy, under a hard deadline per call, with nothing ever ``eval``-ed. Its verdicts are
   cached here; timeouts are not.

Every verdict comes with the rule that decided it (``CheckResult.rule``); ``explain`` also gives
the extracted answers and the normal forms compared. A slow input is a ``timeout`` verdict. A
checker that cannot check (its worker pool cannot start, refuses to serve or fails its self-test)
raises ``CheckerUnavailable`` instead of answering: its verdicts would be wrong labels.
"""

from __future__ import annotations

import logging
import math
import os
import re
import threading
from dataclasses import dataclass
from typing import Hashable, Sequence

from labeler.checking import numeric
from labeler.checking.comparison import Decision, compare
from labeler.checking.extraction import MAX_ANSWER_CHARS, _extract_reference, extract_answer, extract_answer_traced
from labeler.checking.normalisation import _is_plain_number_reference, _Norm, _normalise
from labeler.checking.pool import _Pool
from labeler.checking.question import Question, read_question
from labeler.checking.verdicts import CheckerUnavailable, CheckResult, Explanation, Verdict

__all__ = [
    "AnswerChecker", "CHECKER_VERSION", "CheckResult", "CheckerUnavailable", "Explanation", "Reading", "Verdict", "extract_answer",
    "read_answers", "states_answer",
]  # fmt: skip

logger = logging.getLogger(__name__)

# The checker's behaviour, as a job records it (labeler/labeling/engine_record.py): bump it with any
# change that can turn a verdict (extraction, normalisation, the symbolic layer), so that a job
# resumed on a changed checker is told that its old and new units were checked differently.
# 7: a long decimal or zeros before an integer are read as numbers again (6 had them over-long, unparseable); a set
#    element unequal in value to every element of the other side is incorrect in-process; a tuple's component known
#    wrong by value decides only when no pending component comes before it (6 let it decide in any place)
# 6: constants whose values clearly differ, power towers and huge factorials against a readable value, and integers of
#    hundreds of digits are incorrect in-process (they were symbolic verdicts, timeouts or unparseable; issue 25)
# 5: a leading phrase's number stays the answer when it names the quantity asked and the main clause's does not, or the
#    asking words are the phrase's; money or a percent last is another quantity than the one asked (review of 4)
# 4: a number in a circumstance that opens a closing sentence is not its answer ("After 3 days, she has 42 apples."; issue 23)
# 3: prose sentences, units asked on every path, bases, exact decimals, labelled values ("Total: $1,250"), digit groups
#    against one number (red team 1)
# 2: shapes of answers (issue 12)
CHECKER_VERSION = 7


def _default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover
        return max(1, os.cpu_count() or 1)


class AnswerChecker:
    """Compares completions with reference answers. Thread-safe.

    ``check_many`` returns one verdict per pair, in order, or raises: ``TypeError``/``ValueError``
    naming the first pair that is not a (str, str) pair, ``CheckerUnavailable`` when the symbolic
    worker pool cannot check.

    ``timeout_s``: hard limit of one symbolic comparison (the worker is killed past it); a finite
    number of seconds > 0.
    ``workers``: worker processes for symbolic work (default: all cores), all started by ``start``
    (which a job calls before it loads its model), else on first need.
    ``last_number``: "auto" uses the last-number fallback only when the reference is a plain
    number (word problems); True/False force it.
    ``memory_limit_mb``: address-space limit of each worker (a runaway big-number computation
    fails there instead of swapping the host).
    ``soft_timeout``: also interrupt a slow comparison inside the worker at 80% of the timeout
    (cheaper than a kill); with False every overrun is a kill.

    Programs using it must guard their entry point with ``if __name__ == "__main__":`` like any
    spawn/forkserver multiprocessing user (the workers re-import the main module).
    """

    CACHE_SIZE = 65536

    def __init__(
        self,
        timeout_s: float = 5.0,
        workers: int | None = None,
        *,
        last_number: bool | str = "auto",
        memory_limit_mb: int | None = 4096,
        soft_timeout: bool = True,
    ):
        self.timeout_s = positive_seconds(timeout_s)
        self.workers = workers if workers is not None else _default_workers()
        self.last_number = last_number
        self.memory_limit_bytes = memory_limit_mb * 1024 * 1024 if memory_limit_mb else None
        self.soft_timeout = soft_timeout
        self._pool: _Pool | None = None
        self._lock = threading.Lock()  # the pool: one batch at a time
        # symbolic verdicts by (pred variants, ref variants); timeouts are not cached
        self._cache = _VerdictCache(self.CACHE_SIZE)
        # in-process decisions by (extracted answer, reference answer, question): compare() is pure
        self._decisions = _VerdictCache(self.CACHE_SIZE)

    # -- public API ---------------------------------------------------------------------------

    def describe(self) -> dict:
        """What decides this checker's verdicts (its version and settings), for a job's engine record."""
        return {"checker_version": CHECKER_VERSION, "checker_timeout": self.timeout_s, "checker_last_number": self.last_number}

    def states_answer(self, text: str, reference: str, question: str | None = None) -> bool:
        """Whether this checker finds an answer in `text` to compare with `reference` (its own
        `last_number`): what the final-step gate asks (module ``states_answer``)."""
        return states_answer(text, reference, question, last_number=self.last_number)

    def start(self) -> None:
        """Start the symbolic worker pool now, all its workers, and prove it (its self-test), so that a job's checker
        starts before its model loads rather than at its first checks, beside a generating engine. Raises
        CheckerUnavailable as that check would."""
        self._run_symbolic([], start_all=True)

    def check(self, prediction: str, reference: str, question: str | None = None) -> CheckResult:
        return self.check_many([(prediction, reference)], None if question is None else [question])[0]

    def check_many(self, pairs: Sequence[tuple[str, str]], questions: Sequence[str | None] | None = None) -> list[CheckResult]:
        """One result per (prediction, reference) pair, in order. `questions`, one per pair (or
        None), are the problems asked: a question says whether a list is ordered, in which order
        it names components, and which quantity a count noun must name."""
        pairs = _validated(pairs, questions)
        results: list[CheckResult | None] = [None] * len(pairs)
        symbolic: dict[tuple, list[tuple[int, str | None, str]]] = {}
        for i, pair in enumerate(pairs):
            outcome = self._decide(*pair)
            if outcome.task is None:
                results[i] = CheckResult(outcome.verdict, outcome.extracted, outcome.rule)
                continue
            cached = self._cache.get(outcome.task)
            if cached is not None:
                results[i] = CheckResult(cached, outcome.extracted, outcome.rule)
            else:
                symbolic.setdefault(outcome.task, []).append((i, outcome.extracted, outcome.rule))
        if symbolic:
            keys = list(symbolic)
            verdicts = self._run_symbolic(keys)
            for key, verdict in zip(keys, verdicts):
                if verdict is not Verdict.TIMEOUT:
                    self._cache.put(key, verdict)
                for i, extracted, rule in symbolic[key]:
                    results[i] = CheckResult(verdict, extracted, rule)
        return [r if r is not None else CheckResult(Verdict.UNPARSEABLE, None, "no verdict") for r in results]

    def explain(self, prediction: str, reference: str, question: str | None = None) -> Explanation:
        """The verdict with its reasons: the answers extracted (and by which rule), what the
        question says, the rule that decided, the normal forms compared, the symbolic task if any."""
        _validated([(prediction, reference)], [question])
        o = self._decide(prediction, reference, question)
        verdict = o.verdict
        if o.task is not None:
            verdict = self._cache.get(o.task) or self._run_symbolic([o.task])[0]
        d = o.decision
        q = read_question(question).describe() if question else None
        return Explanation(
            verdict=verdict,
            rule=o.rule,
            prediction_answer=o.extracted,
            extraction_rule=o.extraction_rule,
            reference_answer=o.reference,
            prediction_form=d.pred_form if d else "",
            reference_form=d.ref_form if d else "",
            question=q,
            symbolic_task=o.task,
            notes=tuple(d.notes) if d else (),
        )

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None

    def __enter__(self) -> "AnswerChecker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):  # pragma: no cover - best effort
        try:
            if self._pool is not None:
                self._pool.close()
        except Exception:
            pass

    # -- internals ----------------------------------------------------------------------------

    def _run_symbolic(self, tasks: list[tuple], start_all: bool = False) -> list[Verdict]:
        with self._lock:
            try:
                if self._pool is None:
                    self._pool = _Pool(self.workers, self.timeout_s, self.memory_limit_bytes, self.soft_timeout)
                return self._pool.run(tasks, start_all)
            except BaseException as exc:
                # A pool that failed mid-batch is in an unknown state: the next call starts a fresh
                # one, which must prove itself again.
                if self._pool is not None:
                    self._pool.close()
                    self._pool = None
                if isinstance(exc, Exception) and not isinstance(exc, CheckerUnavailable):
                    raise CheckerUnavailable(f"answer checker: the worker pool failed: {exc!r}") from exc
                raise

    def _decide(self, prediction: str, reference: str, question: str | None = None) -> "_Outcome":
        """The in-process layers: a verdict, or the symbolic task that decides it."""
        try:
            return self._fast(prediction, reference, question)
        except Exception:  # an input the in-process layers cannot handle is unparseable
            logger.debug("answer checker: fast path failed", exc_info=True)
            return _Outcome(Verdict.UNPARSEABLE, "the in-process layers failed on this input", None, "", None)

    def _fast(self, prediction: str, reference: str, question: str | None = None) -> "_Outcome":
        r = read_answers(prediction, reference, question, last_number=self.last_number)
        extracted, how, ref = r.answer, r.how, r.reference
        if r.missing is not None:
            return _Outcome(Verdict.UNPARSEABLE, r.missing, extracted, how, ref)
        if r.over_long and extracted.strip() == ref.strip():
            return _Outcome(Verdict.CORRECT, "over-long answer: exact match only", extracted, how, ref)
        digits = _significant_digits(extracted)
        if digits > 300 and numeric.value(ref) is not None:
            # an integer of hundreds of significant digits is beyond every value numeric reads (below 1e250)
            return _Outcome(Verdict.INCORRECT, f"an integer of {digits} digits: far from the reference's value", extracted, how, ref)
        if r.over_long:
            # Not an answer (a model rambling inside \boxed{}): only an exact match counts.
            return _Outcome(Verdict.UNPARSEABLE, "over-long answer: exact match only", extracted, how, ref)
        verdict, rule, d, task = self._decided(extracted, ref, question, r)
        return _Outcome(verdict, rule, extracted, how, ref, d, task)

    def _decided(self, extracted: str, ref: str, question: str | None, r: "Reading") -> tuple:
        """(verdict, rule, decision, task) of an extracted answer against a reference: a pure function of the
        two answers and the question, memoised (the rollouts of one prefix repeat a handful of answers)."""
        key = (extracted, ref, question)
        decided = self._decisions.get(key)
        if decided is not None:
            return decided
        pn, rn = r.answer_form, r.reference_form
        d = compare(pn, rn, r.question)
        too_long = len(pn.spaced) > MAX_ANSWER_CHARS
        if d.verdict is not None and not (too_long and d.stands_for is not None):
            decided = (d.verdict, d.rule, d, None)
        elif too_long:  # also where a value decided what stands for a symbolic task this answer never reaches
            decided = (Verdict.UNPARSEABLE, "answer too long for the symbolic layer", d, None)
        elif len(rn.spaced) > MAX_ANSWER_CHARS:
            decided = (Verdict.INCORRECT, "reference too long for the symbolic layer", d, None)
        else:
            decided = (None, d.rule, d, d.task)
        self._decisions.put(key, decided)
        return decided


_BARE_INTEGER = re.compile(r"-?[0-9]+")  # ASCII digits: other zeros are not lstrip("0")-ed


def _significant_digits(text: str) -> int:
    """The significant digits of a bare integer ("-000123": 3); 0 for anything else."""
    text = text.strip()
    return len(text.lstrip("-").lstrip("0")) if _BARE_INTEGER.fullmatch(text) else 0


@dataclass(frozen=True, slots=True)
class Reading:
    """What the checker reads off a prediction and its reference before comparing them."""

    reference: str | None  # the reference's answer
    answer: str | None  # the prediction's answer, as extracted
    how: str  # the extraction rule that found it (or why none)
    missing: str | None = None  # why there is nothing to compare ("no answer in the prediction"); None: there is
    over_long: bool = False  # the answer is too long to be one: only an exact match counts
    question: Question | None = None
    answer_form: _Norm | None = None  # normal forms, when both are there and of a normal length
    reference_form: _Norm | None = None


def read_answers(prediction: str, reference: str, question: str | None = None, *, last_number: bool | str = "auto") -> Reading:
    """The answers the checker compares: the reference's, and the prediction's as read for that
    reference (the last-number fallback for a plain-number reference under "auto", a word for a
    word reference, the clause that names the quantity the question asks)."""
    ref = _extract_reference(reference)
    if ref is None:
        return Reading(None, None, "", "no reference answer")
    rn = _normalise(ref)
    use_last = _is_plain_number_reference(rn) if last_number == "auto" else bool(last_number)
    q: Question | None = read_question(question) if question else None
    extracted, how = extract_answer_traced(
        prediction, last_number=use_last, expect_word=rn.text.isalpha() and len(rn.text) > 1, asked=q.quantity if q else None
    )
    if extracted is None:
        return Reading(ref, None, how, "no answer in the prediction", question=q)
    if len(extracted) > 4 * MAX_ANSWER_CHARS or len(ref) > 4 * MAX_ANSWER_CHARS:
        return Reading(ref, extracted, how, over_long=True, question=q)
    pn = _normalise(extracted)
    if not pn.text:
        return Reading(ref, extracted, how, "empty answer after normalisation", question=q)
    return Reading(ref, extracted, how, question=q, answer_form=pn, reference_form=rn)


def states_answer(text: str, reference: str, question: str | None = None, *, last_number: bool | str = "auto") -> bool:
    """Whether `text` states an answer the checker compares with `reference`: exactly when its
    check (AnswerChecker with the same `last_number`) is not unparseable for want of an answer.
    The final-step gate of the strategies asks this, so a last step it sends to be checked is never
    labelled 0 for stating nothing, and one it rolls out could not have been checked."""
    try:
        return read_answers(text, reference, question, last_number=last_number).missing is None
    except Exception:  # the checker's in-process layers failed on it: its check would be unparseable too
        logger.debug("answer checker: reading the answers failed", exc_info=True)
        return False


@dataclass(frozen=True, slots=True)
class _Outcome:
    """What the in-process layers found: a verdict, or (verdict None) the symbolic task to run."""

    verdict: Verdict | None
    rule: str
    extracted: str | None
    extraction_rule: str
    reference: str | None
    decision: Decision | None = None
    task: tuple | None = None


def positive_seconds(value) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"checker timeout must be a finite number of seconds > 0, got {value!r}")
    return seconds


def _validated(pairs, questions=None) -> list[tuple[str, str, str | None]]:
    """The pairs as (prediction, reference, question) triples, or TypeError/ValueError naming the
    first bad one: a verdict for a malformed pair would be a label for an input nobody meant."""
    if isinstance(pairs, (str, bytes)) or not hasattr(pairs, "__iter__"):
        raise TypeError(f"answer checker: check_many needs a sequence of (prediction, reference) pairs, got {type(pairs).__name__}")
    pairs = list(pairs)
    for i, pair in enumerate(pairs):
        if not isinstance(pair, (tuple, list)):
            raise TypeError(f"answer checker: pair {i} is a {type(pair).__name__}, not a (prediction, reference) pair")
        if len(pair) != 2:
            raise ValueError(f"answer checker: pair {i} has {len(pair)} items, not 2 (prediction, reference)")
        for name, value in zip(("prediction", "reference"), pair):
            if not isinstance(value, str):
                raise TypeError(f"answer checker: pair {i}: the {name} must be a str, got {type(value).__name__}")
    if questions is None:
        return [(p, r, None) for p, r in pairs]
    if isinstance(questions, (str, bytes)) or not hasattr(questions, "__iter__"):
        raise TypeError(f"answer checker: questions must be a sequence of str or None, one per pair, got {type(questions).__name__}")
    questions = list(questions)
    if len(questions) != len(pairs):
        raise ValueError(f"answer checker: {len(questions)} questions for {len(pairs)} pairs")
    for i, q in enumerate(questions):
        if q is not None and not isinstance(q, str):
            raise TypeError(f"answer checker: question {i} must be a str or None, got {type(q).__name__}")
    return [(p, r, q) for (p, r), q in zip(pairs, questions)]


class _VerdictCache:
    """Bounded map of verdicts (or decisions), every read and write under its own lock (not the pool's:
    a cache hit must not wait for another thread's batch of symbolic checks)."""

    def __init__(self, max_size: int):
        self.max_size = max_size
        self._lock = threading.Lock()
        self._entries: dict[Hashable, Verdict] = {}

    def get(self, key: Hashable):
        with self._lock:
            return self._entries.get(key)

    def put(self, key: Hashable, verdict) -> None:
        with self._lock:
            if len(self._entries) >= self.max_size:
                self._entries.clear()
            self._entries[key] = verdict
