"""Answer checker health: a checker that cannot check raises instead of labelling.

Configuration is validated, workers refuse to serve without their no-eval guard, the worker pool
proves itself on known pairs, an over-long box is unparseable, and `check_many` answers every pair
or raises.
"""

from __future__ import annotations

import math
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import labeler.checking
import labeler.checking.pool as pool_module
from labeler.checking import AnswerChecker, CheckerUnavailable, Verdict, extract_answer
from labeler.checking.extraction import MAX_ANSWER_CHARS

C, I, U, T = Verdict.CORRECT, Verdict.INCORRECT, Verdict.UNPARSEABLE, Verdict.TIMEOUT

SYMBOLIC = ("\\boxed{\\sqrt{8}}", "2\\sqrt{2}")  # needs the worker pool (no fast-path decision)


# ---------------------------------------------------------------------------------------------
# 1. The timeout is a finite number of seconds > 0
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("timeout", [0, 0.0, -1, float("nan"), float("inf"), -float("inf"), "soon", None])
def test_timeout_must_be_finite_and_positive(timeout):
    with pytest.raises(ValueError, match="checker timeout must be a finite number of seconds > 0, got"):
        AnswerChecker(timeout_s=timeout)


def test_valid_timeouts_are_accepted():
    for timeout in (0.01, 1, 5.0, "2.5"):
        c = AnswerChecker(timeout_s=timeout)
        assert math.isfinite(c.timeout_s) and c.timeout_s > 0
        c.close()


# ---------------------------------------------------------------------------------------------
# 2. A worker without its no-eval guard refuses to serve
# ---------------------------------------------------------------------------------------------


def _guard_that_fails() -> None:
    raise ImportError("simulated: sympy's parser cannot be patched")


def _guard_that_does_nothing() -> None:
    """Returns as if installed, but installs nothing: the worker must notice on its own."""


def _guard_that_fails_once(marker: str) -> None:
    """Fails in the first worker that calls it (it leaves `marker` behind), installs the real
    guard in every later one."""
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        from labeler.checking.symbolic import _install_no_eval_guard

        _install_no_eval_guard()
        return
    os.close(fd)
    raise ImportError("simulated: the first worker cannot install its guard")


@pytest.mark.parametrize("guard", [_guard_that_fails, _guard_that_does_nothing])
def test_a_worker_without_its_guard_refuses_to_serve(monkeypatch, guard):
    """How the failure reaches the worker: the pool passes the guard installer to each worker
    process as an argument, looked up in labeler.checking.pool when the worker starts. Process
    arguments are pickled at every start and a module-level function pickles by reference (module
    and name), so the forkserver child imports this test module and calls the substitute.

    An environment variable would not do: forkserver children inherit the environment of the fork
    server, started once per test session (possibly by an earlier test), not the caller's current
    one; and a monkeypatch in this process does not reach the child's fresh imports.
    """
    monkeypatch.setattr(pool_module, "_install_no_eval_guard", guard)
    with AnswerChecker(timeout_s=5.0, workers=1) as c:
        with pytest.raises(CheckerUnavailable, match="guard"):
            c.check(*SYMBOLIC)
        # fast-path verdicts need no worker and stay available
        assert c.check("The answer is 18.", "18").verdict is C


def test_a_worker_that_fails_its_guard_gets_no_work(monkeypatch, tmp_path):
    from functools import partial

    monkeypatch.setattr(pool_module, "_install_no_eval_guard", partial(_guard_that_fails_once, str(tmp_path / "failed-once")))
    with AnswerChecker(timeout_s=5.0, workers=1) as c:
        assert c.check(*SYMBOLIC).verdict is C
        assert c._pool.refusals == 1
        assert c._pool.crashes == 0  # the refusing worker was never handed a task
    assert (tmp_path / "failed-once").exists()


def test_checker_unavailable_is_exported():
    assert "CheckerUnavailable" in labeler.checking.__all__
    assert issubclass(CheckerUnavailable, RuntimeError)


# ---------------------------------------------------------------------------------------------
# 3. The pool proves itself; a broken pool raises, a slow input is still a timeout
# ---------------------------------------------------------------------------------------------


def _die_at_start(conn, *args) -> None:  # a worker process target that exits at once
    os._exit(3)


def test_workers_that_die_at_start_make_the_checker_unavailable(monkeypatch):
    monkeypatch.setattr(pool_module, "_worker_main", _die_at_start)
    with AnswerChecker(timeout_s=2.0, workers=2) as c:
        with pytest.raises(CheckerUnavailable):
            c.check_many([SYMBOLIC, ("\\boxed{\\sqrt{18}}", "3\\sqrt{2}")])


def test_a_pool_that_cannot_spawn_makes_the_checker_unavailable(monkeypatch):
    def cannot_fork(*args, **kwargs):
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(pool_module, "_Worker", cannot_fork)
    with AnswerChecker(timeout_s=2.0, workers=1) as c:
        with pytest.raises(CheckerUnavailable, match="start"):
            c.check(*SYMBOLIC)


def test_workers_that_die_on_every_task_make_the_checker_unavailable(monkeypatch):
    original = pool_module._Worker.give

    def give_and_die(self, task_id, task):
        original(self, task_id, task)
        self.proc.kill()

    monkeypatch.setattr(pool_module._Worker, "give", give_and_die)
    with AnswerChecker(timeout_s=2.0, workers=1) as c:
        with pytest.raises(CheckerUnavailable, match="self-test"):
            c.check(*SYMBOLIC)


def test_workers_that_start_dying_later_are_caught_by_a_new_self_test(monkeypatch):
    with AnswerChecker(timeout_s=2.0, workers=1) as c:
        assert c.check(*SYMBOLIC).verdict is C
        original = pool_module._Worker.give

        def give_and_die(self, task_id, task):
            original(self, task_id, task)
            self.proc.kill()

        monkeypatch.setattr(pool_module._Worker, "give", give_and_die)
        pairs = [(f"\\boxed{{\\sqrt{{{k * k * 2}}}}}", f"{k}\\sqrt{{2}}") for k in range(3, 9)]
        with pytest.raises(CheckerUnavailable):
            c.check_many(pairs)


def test_the_pool_proves_itself_once_at_start():
    with AnswerChecker(timeout_s=5.0, workers=1) as c:
        assert c.check(*SYMBOLIC).verdict is C
        assert c.check("\\boxed{\\sqrt{18}}", "3\\sqrt{2}").verdict is C
        assert c._pool.self_tests == 1


def test_start_proves_the_pool_before_any_check_and_the_first_check_does_not_again():
    with AnswerChecker(timeout_s=5.0, workers=1) as c:
        c.start()
        assert c._pool is not None and c._pool.proven and c._pool.self_tests == 1
        assert c.check(*SYMBOLIC).verdict is C
        assert c._pool.self_tests == 1


def test_start_starts_every_worker_so_that_none_starts_beside_the_engine():
    """A worker started at the first batch of symbolic checks, mid-job, took a second of CPU from a generating engine."""
    with AnswerChecker(timeout_s=5.0, workers=2) as c:
        c.start()
        started = {w.proc.pid for w in c._pool.workers}
        assert len(started) == 2
        results = c.check_many([SYMBOLIC, ("\\boxed{\\sqrt{18}}", "3\\sqrt{2}")])
        assert [r.verdict for r in results] == [C, C]
        assert {w.proc.pid for w in c._pool.workers} == started


def python_in_a_fresh_process(code: str):
    """Run `code` in a new interpreter (its own forkserver, signal handlers and sympy state); its CompletedProcess."""
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_the_forkserver_warms_sympy_up_once_for_every_worker_it_forks():
    """The checker's forkserver imports warm_forkserver, whose warm-up must succeed: else every worker pays it again."""
    assert "labeler.checking.warm_forkserver" in pool_module._FORKSERVER_PRELOAD
    code = "import labeler.checking.warm_forkserver, labeler.checking.symbolic as s; print(s._warmed_up)"
    done = python_in_a_fresh_process(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"


def test_a_started_checker_and_its_checks_write_nothing_to_stderr():
    """Its forkserver warms math-verify up with no timeout, which math-verify warns about on every call:
    those warnings reached the user's stderr (CI: test_label_with_no_model_and_no_input_uses_the_embedded_defaults)."""
    code = (
        "from labeler.checking.checker import AnswerChecker\n"
        "with AnswerChecker(timeout_s=5.0, workers=2) as c:\n"
        "    c.start()\n"
        "    print(c.check_many([(r'\\boxed{\\frac{1}{\\sqrt{2}}}', r'\\frac{\\sqrt{2}}{2}'), ('\\boxed{\\frac{a}{', '3')]))\n"
    )
    done = python_in_a_fresh_process(code)
    assert done.returncode == 0, done.stderr
    assert "correct" in done.stdout.lower()
    assert done.stderr == ""


def test_ctrl_c_leaves_the_checker_processes_quiet_and_serving():
    """Ctrl-C reaches the checker's forkserver and workers with the job's process group: none may print a
    traceback (one per worker, on the user's stderr) or die; the job stops the pool itself."""
    code = (
        "import os, signal, time\n"
        "from multiprocessing import forkserver\n"
        "from labeler.checking.checker import AnswerChecker\n"
        "with AnswerChecker(timeout_s=5.0, workers=2) as c:\n"
        "    c.start()\n"
        "    pids = sorted(w.proc.pid for w in c._pool.workers)\n"
        "    for pid in pids + [forkserver._forkserver._forkserver_pid]:\n"
        "        os.kill(pid, signal.SIGINT)\n"
        "    time.sleep(0.5)\n"
        "    print(c.check_many([(r'\\boxed{\\frac{1}{\\sqrt{2}}}', r'\\frac{\\sqrt{2}}{2}')] * 4))\n"
        "    print(pids == sorted(w.proc.pid for w in c._pool.workers), c._pool.crashes)\n"
    )
    done = python_in_a_fresh_process(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "True 0"
    assert done.stderr == ""


def test_a_worker_whose_parent_is_gone_exits_quietly():
    """A worker still starting when its job dies finds the pipe closed: it exits, with no traceback."""
    code = (
        "import multiprocessing\n"
        "from labeler.checking import pool, symbolic\n"
        "parent, child = multiprocessing.Pipe()\n"
        "parent.close()\n"
        "pool._worker_main(child, None, None, symbolic._install_no_eval_guard)\n"
        "print('exited')\n"
    )
    done = python_in_a_fresh_process(code)
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "exited", "")


def test_a_process_whose_sympy_warm_up_fails_refuses_to_install_the_guard():
    """Without the warm-up the guard refuses what sympy loads lazily, and periodic or set checks would come
    back unparseable unseen: such a worker must not serve (it refuses, and says why)."""
    code = (
        "from labeler.checking import symbolic\n"
        "def broken(task):\n"
        "    raise ValueError('no periodic today')\n"
        "symbolic.run_task = broken\n"
        "try:\n"
        "    symbolic._install_no_eval_guard()\n"
        "except RuntimeError as exc:\n"
        "    print(exc)\n"
    )
    done = python_in_a_fresh_process(code)
    assert done.returncode == 0, done.stderr
    assert "sympy's warm-up failed: ValueError('no periodic today')" in done.stdout


def test_a_warm_up_whose_comparisons_fail_inside_math_verify_counts_as_failed():
    """math-verify catches its parser's errors and answers unparseable: the warm-up reads its verdicts."""
    code = (
        "import math_verify.parser as p\n"
        "def broken(*args, **kwargs):\n"
        "    raise MemoryError('no room')\n"
        "p.latex2sympy = broken\n"
        "from labeler.checking import symbolic\n"
        "symbolic.warm_up()\n"
        "print(symbolic._warmed_up, symbolic._warm_up_error)\n"
    )
    done = python_in_a_fresh_process(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("False RuntimeError(\"its comparisons of equal values gave ['unparseable'")


def test_a_start_that_fails_before_the_engine_is_raised_at_the_first_check(monkeypatch, caplog):
    from labeler.labeling.checker_start import start_checker

    monkeypatch.setattr(pool_module, "_worker_main", _die_at_start)
    with AnswerChecker(timeout_s=2.0, workers=1) as c:
        with pytest.raises(CheckerUnavailable):
            c.start()
        start_checker(c)  # what an executor calls before loading its engine: logged, not raised
        assert "did not start before the engine" in caplog.text
        with pytest.raises(CheckerUnavailable):
            c.check(*SYMBOLIC)


def test_the_self_test_is_cheap():
    with AnswerChecker(timeout_s=5.0, workers=1) as c:
        c.check(*SYMBOLIC)  # the worker is up
        t0 = time.perf_counter()
        c._pool.prove()
        assert time.perf_counter() - t0 < 0.5
        assert c._pool.self_tests == 2


# factorials of power towers: a tower alone against a number is decided in-process (labeler/checking/numeric.py)
TOWERS = [("\\boxed{%d^{%d^{%d^{100}}}!}" % (b, b, b), "5") for b in (2, 3, 5, 6, 7)]


def test_slow_inputs_in_a_row_stay_timeouts_after_a_passing_self_test():
    """Five slow inputs in a row look like a broken pool until the self-test says otherwise."""
    with AnswerChecker(timeout_s=0.5, workers=1) as c:
        results = c.check_many(TOWERS + [SYMBOLIC])
        assert [r.verdict for r in results] == [T] * len(TOWERS) + [C]
        assert c._pool.self_tests >= 2  # once at start, again after the streak of timeouts


def test_genuine_timeouts_with_kills_stay_timeouts():
    with AnswerChecker(timeout_s=1.0, workers=1, soft_timeout=False) as c:
        assert [r.verdict for r in c.check_many(TOWERS[:3])] == [T] * 3
        assert c._pool.kills == 3
        assert c.check(*SYMBOLIC).verdict is C
        assert c._pool.self_tests == 2  # the streak of kills made the pool prove itself again


# ---------------------------------------------------------------------------------------------
# 4. An over-long box is unparseable, never a number from elsewhere
# ---------------------------------------------------------------------------------------------

LONG = "1+" * (3 * MAX_ANSWER_CHARS) + "1"  # a box of ~12,000 characters


@pytest.mark.parametrize(
    "text",
    [
        "So she pays 18 dollars.\n\nTherefore \\boxed{" + LONG + "}",
        "The answer is 18.\n\n\\boxed{" + LONG + "}",
        "\\boxed{18}\n\nOn second thought, \\boxed{" + LONG + "}",
        "#### 18\n\\boxed{" + LONG + "}",
        "\\boxed{" + LONG[:5000] + " the answer is 18 " + LONG[:5000] + "}",
        "\\boxed{" + LONG[:5000] + " \\boxed{18} " + LONG[:5000] + "}",
    ],
)
def test_an_over_long_box_is_unparseable(text):
    assert extract_answer(text) is None
    with AnswerChecker(workers=1) as c:
        res = c.check(text, "18")
        assert res.verdict is U and res.extracted is None
        assert c._pool is None


def test_a_box_within_the_limit_is_still_an_answer():
    inside = "1+" * (MAX_ANSWER_CHARS // 2) + "1"  # ~2,000 characters
    assert extract_answer("So \\boxed{" + inside + "}") == inside
    # an answer after an over-long box still counts
    assert extract_answer("\\boxed{" + LONG + "}\n\n" + "x" * 100 + "\n\nThe answer is 18.") == "18"


def test_a_truncated_box_still_falls_back_to_the_previous_box():
    assert extract_answer("\\boxed{5} and then \\boxed{6") == "5"


# ---------------------------------------------------------------------------------------------
# 5. check_many answers every pair or raises; the cache is thread-safe
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pairs", [None, 5, object()])
def test_check_many_rejects_a_non_sequence(pairs):
    with AnswerChecker(workers=1) as c:
        with pytest.raises(TypeError, match="pairs"):
            c.check_many(pairs)


@pytest.mark.parametrize(
    "bad,exc",
    [
        (("5",), ValueError),
        (("5", "5", "5"), ValueError),
        ("55", TypeError),
        (5, TypeError),
        (None, TypeError),
        ((None, "5"), TypeError),
        (("5", None), TypeError),
        ((5, "5"), TypeError),
        ((b"5", "5"), TypeError),
    ],
)
def test_check_many_names_the_position_of_a_bad_pair(bad, exc):
    with AnswerChecker(workers=1) as c:
        with pytest.raises(exc, match="pair 2"):
            c.check_many([("18", "18"), ("The answer is 3.", "3"), bad, ("4", "4")])


def test_check_many_never_returns_a_shorter_list():
    with AnswerChecker(workers=1) as c:
        pairs = [("18", "18"), ("\\x00", "\\x00\\x01"), ("", "5"), ("5", ""), ("I don't know.", "5")]
        assert len(c.check_many(pairs)) == len(pairs)
        assert len(c.check_many(iter(pairs))) == len(pairs)
        assert c.check_many([]) == []


class _LockCheckingDict(dict):
    """A cache that fails every read or write made without the checker's cache lock held."""

    def __init__(self, lock):
        super().__init__()
        self.lock = lock
        self.accesses = 0

    def _check(self):
        assert self.lock.locked(), "checker cache accessed without its lock"
        self.accesses += 1

    def get(self, *a):
        self._check()
        return super().get(*a)

    def __getitem__(self, k):
        self._check()
        return super().__getitem__(k)

    def __setitem__(self, k, v):
        self._check()
        super().__setitem__(k, v)

    def __contains__(self, k):
        self._check()
        return super().__contains__(k)

    def clear(self):
        self._check()
        super().clear()


def test_the_cache_is_read_and_written_under_its_lock():
    with AnswerChecker(timeout_s=5.0, workers=1) as c:
        c._cache._entries = _LockCheckingDict(c._cache._lock)
        assert c.check(*SYMBOLIC).verdict is C  # a miss, then a write
        assert c.check(*SYMBOLIC).verdict is C  # a hit
        assert c._cache._entries.accesses >= 3


HAMMER = [
    ("\\boxed{\\sqrt{8}}", "2\\sqrt{2}"),
    ("\\boxed{\\sqrt{8}}", "3\\sqrt{2}"),
    ("\\boxed{x^2+2x+1}", "(x+1)^2"),
    ("\\boxed{(1,2)}", "(1,2]"),
    ("\\boxed{\\frac{1}{\\sqrt{2}}}", "\\frac{\\sqrt2}{2}"),
    ("\\boxed{\\{3,2,1\\}}", "\\{1,2,3\\}"),
    ("The answer is 18.", "18"),
    ("#### 1,000", "1000"),
    ("\\boxed{B}", "(C)"),
    ("I don't know.", "5"),
] + [(f"\\boxed{{\\sqrt{{{2 * k * k}}}}}", f"{k}\\sqrt{{2}}") for k in range(2, 12)]


def test_threads_hammering_the_checker_get_the_single_threaded_verdicts():
    with AnswerChecker(timeout_s=5.0, workers=2) as reference:
        expected = [(r.verdict, r.extracted) for r in reference.check_many(HAMMER)]
    assert expected[0][0] is C and expected[1][0] is I

    with AnswerChecker(timeout_s=5.0, workers=2) as c:
        c._cache.max_size = 4  # evictions all the time, while other threads read
        barrier = threading.Barrier(6)

        def hammer(seed: int) -> list:
            barrier.wait()
            got = []
            for round_ in range(6):
                order = [(i * 7 + seed + round_) % len(HAMMER) for i in range(len(HAMMER))]
                if (seed + round_) % 2:
                    results = c.check_many([HAMMER[i] for i in order])
                else:
                    results = [c.check(*HAMMER[i]) for i in order]
                got.append({i: (r.verdict, r.extracted) for i, r in zip(order, results)})
            return got

        with ThreadPoolExecutor(6) as ex:
            rounds = [r for f in [ex.submit(hammer, s) for s in range(6)] for r in f.result(timeout=300)]
    for by_index in rounds:
        assert [by_index[i] for i in range(len(HAMMER))] == expected


def test_the_benches_count_the_cpu_of_workers_killed_at_their_deadline():
    """bench/process_cpu.py reads the checker's CPU from its forkserver, which reaps killed workers: their
    CPU-seconds stay counted (summing the live children dropped them, and subtracted their start)."""
    from bench.process_cpu import checker_processes_cpu

    with AnswerChecker(timeout_s=1.0, workers=1, soft_timeout=False) as c:
        c.start()
        before = checker_processes_cpu()
        verdicts = c.check_many(TOWERS[:2])
        spent = checker_processes_cpu() - before
        assert c._pool.kills == 2 and [r.verdict for r in verdicts] == [Verdict.TIMEOUT] * 2
    assert spent > 1.0  # two workers, each busy about a second before its kill
