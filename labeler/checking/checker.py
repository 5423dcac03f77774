"""Answer checker: did a completion reach the reference answer?

The front end, ``AnswerChecker``. Three layers, cheapest first:

1. Extraction (``extraction``, in-process): the completion's final answer; the last-number
   fallback only for plain-number references unless told otherwise.
2. Fast path (``normalisation``, in-process, no sympy): normalised strings, exact numbers,
   percentages, units, multiple-choice letters. GSM8K-style answers never leave this layer.
3. Symbolic path (``symbolic``, in the worker processes of ``pool``): math-verify's LaTeX grammar
   and sympy, under a hard deadline per call, with nothing ever ``eval``-ed. Its verdicts are
   cached here; timeouts are not.

A slow input is a ``timeout`` verdict. A checker that cannot check (its worker pool cannot start,
refuses to serve or fails its self-test) raises ``CheckerUnavailable`` instead of answering:
its verdicts would be wrong labels.
"""

from __future__ import annotations

import logging
import math
import os
import threading
from typing import Hashable, Sequence

from labeler.checking.extraction import MAX_ANSWER_CHARS, _extract_reference, extract_answer
from labeler.checking.normalisation import _equation_rhs, _Fast, _fast_compare, _is_plain_number_reference, _Norm, _normalise
from labeler.checking.pool import _Pool
from labeler.checking.verdicts import CheckerUnavailable, CheckResult, Verdict

logger = logging.getLogger(__name__)

# The checker's behaviour, as a job records it (labeler/labeling/engine_record.py): bump it with any
# change that can turn a verdict (extraction, normalisation, the symbolic layer), so that a job
# resumed on a changed checker is told that its old and new units were checked differently.
CHECKER_VERSION = 1


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
    ``workers``: worker processes for symbolic work (default: all cores), started on first need.
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

    # -- public API ---------------------------------------------------------------------------

    def describe(self) -> dict:
        """What decides this checker's verdicts (its version and settings), for a job's engine record."""
        return {"checker_version": CHECKER_VERSION, "checker_timeout": self.timeout_s, "checker_last_number": self.last_number}

    def check(self, prediction: str, reference: str) -> CheckResult:
        return self.check_many([(prediction, reference)])[0]

    def check_many(self, pairs: Sequence[tuple[str, str]]) -> list[CheckResult]:
        pairs = _validated(pairs)
        results: list[CheckResult | None] = [None] * len(pairs)
        symbolic: dict[tuple[tuple[str, ...], tuple[str, ...]], list[tuple[int, str | None]]] = {}
        for i, pair in enumerate(pairs):
            try:
                res, task = self._fast(*pair)
            except Exception:  # an input the in-process layers cannot handle is unparseable
                logger.debug("answer checker: fast path failed", exc_info=True)
                res, task = CheckResult(Verdict.UNPARSEABLE, None), None
            if res is not None:
                results[i] = res
                continue
            extracted, pv, rv = task
            key = (tuple(pv), tuple(rv))
            cached = self._cache.get(key)
            if cached is not None:
                results[i] = CheckResult(cached, extracted)
            else:
                symbolic.setdefault(key, []).append((i, extracted))
        if symbolic:
            keys = list(symbolic)
            verdicts = self._run_symbolic([(list(k[0]), list(k[1])) for k in keys])
            for key, verdict in zip(keys, verdicts):
                if verdict is not Verdict.TIMEOUT:
                    self._cache.put(key, verdict)
                for i, extracted in symbolic[key]:
                    results[i] = CheckResult(verdict, extracted)
        return [r if r is not None else CheckResult(Verdict.UNPARSEABLE, None) for r in results]

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

    def _run_symbolic(self, tasks: list[tuple[list[str], list[str]]]) -> list[Verdict]:
        with self._lock:
            try:
                if self._pool is None:
                    self._pool = _Pool(self.workers, self.timeout_s, self.memory_limit_bytes, self.soft_timeout)
                return self._pool.run(tasks)
            except BaseException as exc:
                # A pool that failed mid-batch is in an unknown state: the next call starts a fresh
                # one, which must prove itself again.
                if self._pool is not None:
                    self._pool.close()
                    self._pool = None
                if isinstance(exc, Exception) and not isinstance(exc, CheckerUnavailable):
                    raise CheckerUnavailable(f"answer checker: the worker pool failed: {exc!r}") from exc
                raise

    def _fast(self, prediction: str, reference: str):
        """(result, None) when decided in-process, else (None, (extracted, pred_variants, ref_variants))."""
        ref = _extract_reference(reference)
        if ref is None:
            return CheckResult(Verdict.UNPARSEABLE, None), None
        if self.last_number == "auto":
            use_last = _is_plain_number_reference(ref)
        else:
            use_last = bool(self.last_number)
        extracted = extract_answer(prediction, last_number=use_last)
        if extracted is None:
            return CheckResult(Verdict.UNPARSEABLE, None), None
        if len(extracted) > 4 * MAX_ANSWER_CHARS or len(ref) > 4 * MAX_ANSWER_CHARS:
            # Not an answer (a model rambling inside \boxed{}): only an exact match counts.
            verdict = Verdict.CORRECT if extracted.strip() == ref.strip() else Verdict.UNPARSEABLE
            return CheckResult(verdict, extracted), None
        pn, rn = _normalise(extracted), _normalise(ref)
        decision = _fast_compare(pn, rn)
        if decision is _Fast.CORRECT:
            return CheckResult(Verdict.CORRECT, extracted), None
        if decision is _Fast.INCORRECT:
            return CheckResult(Verdict.INCORRECT, extracted), None
        if not pn.text:
            return CheckResult(Verdict.UNPARSEABLE, extracted), None
        if len(pn.spaced) > MAX_ANSWER_CHARS:
            return CheckResult(Verdict.UNPARSEABLE, extracted), None
        if len(rn.spaced) > MAX_ANSWER_CHARS:
            return CheckResult(Verdict.INCORRECT, extracted), None
        return None, (extracted, _symbolic_variants(pn, rn), _symbolic_variants(rn, pn))


def _symbolic_variants(n: _Norm, other: _Norm) -> list[str]:
    """The strings the symbolic layer parses for one side: the answer; the right side of a simple
    "x = value" when the other side is no such equation; with a percent sign the other side lacks,
    both value and value/100."""
    out = [n.spaced]
    rhs = _equation_rhs(n.spaced)
    if rhs is not None and _equation_rhs(other.spaced) is None:
        out.append(rhs)
    if n.percent and not other.percent:
        out = out + [f"\\frac{{{v}}}{{100}}" for v in out]
    return out


def positive_seconds(value) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"checker timeout must be a finite number of seconds > 0, got {value!r}")
    return seconds


def _validated(pairs) -> list[tuple[str, str]]:
    """The pairs as a list, or TypeError/ValueError naming the first bad one: a verdict for a
    malformed pair would be a label for an input nobody meant."""
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
    return pairs


class _VerdictCache:
    """Bounded map of symbolic verdicts, every read and write under its own lock (not the pool's:
    a cache hit must not wait for another thread's batch of symbolic checks)."""

    def __init__(self, max_size: int):
        self.max_size = max_size
        self._lock = threading.Lock()
        self._entries: dict[Hashable, Verdict] = {}

    def get(self, key: Hashable) -> Verdict | None:
        with self._lock:
            return self._entries.get(key)

    def put(self, key: Hashable, verdict: Verdict) -> None:
        with self._lock:
            if len(self._entries) >= self.max_size:
                self._entries.clear()
            self._entries[key] = verdict
