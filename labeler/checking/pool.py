"""The worker processes of the symbolic layer: a forkserver (else spawn) pool, one task per worker
at a time, each under a hard deadline (an overrunning worker is killed and replaced) and a soft
one inside the worker. The pool proves itself on known pairs before it answers, and raises
``CheckerUnavailable`` when it cannot check."""

from __future__ import annotations

import logging
import multiprocessing
import time
from collections import deque
from multiprocessing.connection import wait as _wait_connections

from labeler.checking.symbolic import _check_no_eval_guard, _install_no_eval_guard, quiet_library_loggers, run_task
from labeler.checking.verdicts import CheckerUnavailable, Verdict

logger = logging.getLogger(__name__)


class _SoftTimeout(BaseException):
    pass


# The workers' process target: forkserver/spawn pass it by reference (module and name), so it
# stays a module-level function. `install_guard` (symbolic._install_no_eval_guard) travels the same
# way; it is an argument so that a test can hand the worker one that fails.
def _worker_main(conn, soft_timeout_s: float | None, memory_limit_bytes: int | None, install_guard) -> None:  # pragma: no cover - runs in a child
    import signal

    # Ctrl-C goes to the whole process group: the job stops the pool itself (EOF or close), and a
    # worker interrupted here would print a traceback to the user's stderr, one per worker.
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def send(message) -> bool:
        """False when the parent is gone (its end of the pipe closed): the worker then just exits."""
        try:
            conn.send(message)
            return True
        except (OSError, ValueError):
            return False

    if memory_limit_bytes:
        try:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (memory_limit_bytes, memory_limit_bytes))
        except Exception:
            pass
    quiet_library_loggers()
    # Without its imports or its guard a worker does not serve: it says why and exits.
    try:
        import sympy  # noqa: F401
        import math_verify  # noqa: F401
    except BaseException as exc:
        send(("refused", f"cannot import sympy/math_verify: {exc!r}"))
        return
    try:
        install_guard()
        _check_no_eval_guard()
    except BaseException as exc:
        send(("refused", f"cannot install its no-eval guard: {exc!r}"))
        return

    def on_alarm(signum, frame):
        raise _SoftTimeout()

    signal.signal(signal.SIGALRM, on_alarm)
    if not send(("ready", None)):
        return
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        task_id, task = msg
        try:
            if soft_timeout_s:
                signal.setitimer(signal.ITIMER_REAL, soft_timeout_s)
            try:
                verdict = run_task(task)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except _SoftTimeout:
            verdict = Verdict.TIMEOUT.value
        except RecursionError:
            verdict = Verdict.UNPARSEABLE.value
        except MemoryError:
            verdict = Verdict.TIMEOUT.value
        except Exception:
            verdict = Verdict.UNPARSEABLE.value
        if not send((task_id, verdict)):
            return


# Cheap tasks any working worker decides, and how: a task of comparison.py, verdict.
SELF_TEST = [
    (("plain", ("\\frac{1}{2}",), ("0.5",)), Verdict.CORRECT),
    (("plain", ("x+1",), ("1+x",)), Verdict.CORRECT),
    (("plain", ("2",), ("3",)), Verdict.INCORRECT),
]


class _Worker:
    def __init__(self, ctx, soft_timeout_s: float | None, memory_limit_bytes: int | None):
        parent, child = ctx.Pipe(duplex=True)
        self.conn = parent
        args = (child, soft_timeout_s, memory_limit_bytes, _install_no_eval_guard)
        self.proc = ctx.Process(target=_worker_main, args=args, daemon=True, name="answer-checker")
        try:
            self.proc.start()
        finally:
            child.close()
        self.ready = False
        self.started_at = time.monotonic()
        self.task: int | None = None
        self.deadline = 0.0

    def give(self, task_id: int, task: tuple) -> None:
        self.conn.send((task_id, task))

    def kill(self) -> None:
        try:
            self.proc.kill()
            self.proc.join(timeout=5)
        except Exception:
            pass
        try:
            self.conn.close()
        except Exception:
            pass


# Imported once by the forkserver, so each worker (a new pool, a replacement after a kill) starts
# in milliseconds instead of importing sympy and math-verify and warming sympy up for a second or more.
# warm_forkserver first: it ignores Ctrl-C before the second of imports (else a traceback, and no forkserver).
_FORKSERVER_PRELOAD = ["labeler.checking.warm_forkserver", "sympy", "math_verify", "labeler.checking.pool"]


def _pool_context():
    methods = multiprocessing.get_all_start_methods()
    if "forkserver" not in methods:
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(_FORKSERVER_PRELOAD)  # no effect once this process's forkserver runs
    return ctx


class _Pool:
    """Worker processes, each with one task at a time and a hard deadline per task.

    A worker that overruns its deadline is SIGKILLed and replaced (the task's verdict is
    ``timeout``); one that dies on its own (a crash) gets its task once more, then ``timeout``.
    Workers start as tasks need them (all at once with ``start_all``, as ``AnswerChecker.start``
    asks); tasks go only to workers that have finished importing sympy and installed their no-eval
    guard, so start-up time never counts against a task's deadline.

    Health: the pool answers only after it has passed its self-test (``SELF_TEST``), at start, after
    a worker crashed, and after ``REPROVE_AFTER`` failures in a row (timeouts, crashes, failed
    starts with no verdict between them). A slow input times out and the self-test passes; a broken
    pool fails it and ``run`` raises ``CheckerUnavailable``, as it does when workers keep failing
    to start.
    """

    STARTUP_TIMEOUT_S = 120.0
    MAX_START_FAILURES = 3  # in a row
    MAX_ATTEMPTS = 2
    REPROVE_AFTER = 3

    def __init__(self, n_workers: int, timeout_s: float, memory_limit_bytes: int | None, soft_timeout: bool = True):
        self.n_workers = max(1, n_workers)
        self.timeout_s = timeout_s
        self.soft_timeout_s = max(0.05, timeout_s * 0.8) if soft_timeout else None
        self.memory_limit_bytes = memory_limit_bytes
        self.ctx = _pool_context()
        self.workers: list[_Worker] = []
        self.kills = 0  # workers killed for overrunning their deadline
        self.crashes = 0  # workers that died on their own while checking
        self.refusals = 0  # workers that would not serve (no imports, no guard)
        self.start_failures = 0  # in a row
        self.last_start_failure = ""
        self.self_tests = 0
        self.streak = 0  # failures since the last definite verdict
        self.proven = False

    # -- health -------------------------------------------------------------------------------

    def prove(self) -> None:
        """Run the self-test; CheckerUnavailable unless every pair gets its known verdict."""
        self.self_tests += 1
        tasks = [task for task, _ in SELF_TEST]
        expected = [verdict for _, verdict in SELF_TEST]
        results: list[Verdict | None] = [None] * len(tasks)

        def a_wrong_verdict() -> bool:
            return any(r is not None and r is not e for r, e in zip(results, expected))

        self._schedule(tasks, results, [0] * len(tasks), workers_wanted=1, halt=a_wrong_verdict)
        wrong = [
            f"{task[1][0]} vs {task[2][0]}: {got.value if got else 'no verdict'}, not {want.value}"
            for task, got, want in zip(tasks, results, expected)
            if got is not want
        ]
        if wrong:
            self.proven = False
            raise CheckerUnavailable("answer checker: the symbolic worker pool failed its self-test (" + "; ".join(wrong) + ")")
        self.proven = True
        self.streak = 0

    def _failed(self) -> None:
        self.streak += 1
        if self.streak >= self.REPROVE_AFTER:
            self.proven = False

    def _record(self, results: list, tid: int, verdict: Verdict) -> None:
        results[tid] = verdict
        if verdict is Verdict.TIMEOUT:
            self._failed()
        else:
            self.streak = 0

    # -- workers ------------------------------------------------------------------------------

    def _spawn(self) -> None:
        if self.start_failures >= self.MAX_START_FAILURES:
            raise CheckerUnavailable(
                f"answer checker: symbolic worker processes fail to start ({self.start_failures} in a row; last: {self.last_start_failure})"
            )
        try:
            self.workers.append(_Worker(self.ctx, self.soft_timeout_s, self.memory_limit_bytes))
        except Exception as exc:
            logger.warning("answer checker: cannot start a worker process: %r", exc)
            self.start_failures += 1
            self.last_start_failure = f"cannot start a process: {exc!r}"
            self._failed()

    def _remove(self, w: _Worker) -> None:
        w.kill()
        w.task = None
        if w in self.workers:
            self.workers.remove(w)

    def _replace(self, w: _Worker) -> None:
        self._remove(w)
        if self.start_failures < self.MAX_START_FAILURES:
            self._spawn()

    def _start_failed(self, w: _Worker, reason: str) -> None:
        self._remove(w)
        logger.warning("answer checker: a worker process failed to start: %s", reason)
        self.start_failures += 1
        self.last_start_failure = reason
        self._failed()
        if self.start_failures < self.MAX_START_FAILURES:
            self._spawn()

    # -- scheduling ---------------------------------------------------------------------------

    def run(self, tasks: list[tuple], start_all: bool = False) -> list[Verdict]:
        """The verdicts of `tasks`; `start_all`: start every worker now, not only as many as the tasks need."""
        results: list[Verdict | None] = [None] * len(tasks)
        attempts = [0] * len(tasks)
        self._top_up(self.n_workers if start_all else len(tasks))  # the self-test runs on the first of them to start
        while True:
            if not self.proven:
                self.prove()
            self._schedule(tasks, results, attempts, workers_wanted=len(tasks), halt=lambda: not self.proven)
            if self.proven:
                return results

    def _top_up(self, wanted: int) -> None:
        for w in [w for w in self.workers if not w.proc.is_alive()]:
            self._remove(w)
        while len(self.workers) < min(self.n_workers, wanted):
            self._spawn()

    def _schedule(self, tasks, results: list, attempts: list[int], workers_wanted: int, halt) -> None:
        """Run the tasks without a result until each has one, or until halt() holds and none is in
        flight (tasks not yet handed out keep None), on up to `workers_wanted` workers."""
        pending = deque(i for i, r in enumerate(results) if r is None)
        self._top_up(min(workers_wanted, len(pending)))
        while True:
            halted = halt()
            if not halted:
                for w in list(self.workers):
                    if pending and w.ready and w.task is None:
                        self._give(w, pending, tasks, results, attempts)
            if not any(w.task is not None for w in self.workers) and (halted or not pending):
                return
            if not self.workers:
                self._spawn()
                continue
            self._wait(results, pending, attempts)

    def _give(self, w: _Worker, pending: deque, tasks, results: list, attempts: list[int]) -> None:
        tid = pending.popleft()
        attempts[tid] += 1
        w.task = tid
        w.deadline = time.monotonic() + self.timeout_s
        try:
            w.give(tid, tasks[tid])
        except Exception:
            self._crashed(w, results, pending, attempts)

    def _crashed(self, w: _Worker, results: list, pending: deque, attempts: list[int]) -> None:
        """A worker died on its own while checking (a crash, the OS out of memory): its task gets
        one more try elsewhere, and nothing more is answered before the pool has proved itself
        again."""
        self.crashes += 1
        self.proven = False
        if attempts[w.task] < self.MAX_ATTEMPTS:
            pending.appendleft(w.task)
            self._failed()
        else:
            self._record(results, w.task, Verdict.TIMEOUT)
        self._replace(w)

    def _wait(self, results: list, pending: deque, attempts: list[int]) -> None:
        """Wait for the next message or deadline among busy and starting workers, and act on it."""
        waiting = [w for w in self.workers if w.task is not None or not w.ready]
        if waiting:
            next_deadline = min(w.deadline if w.task is not None else w.started_at + self.STARTUP_TIMEOUT_S for w in waiting)
            ready = _wait_connections([w.conn for w in waiting], timeout=max(0.0, next_deadline - time.monotonic()))
            by_conn = {id(w.conn): w for w in waiting}
            for conn in ready:
                self._receive(by_conn[id(conn)], results, pending, attempts)
        now = time.monotonic()
        for w in list(self.workers):
            if w.task is not None and now >= w.deadline:
                self.kills += 1
                self._record(results, w.task, Verdict.TIMEOUT)
                self._replace(w)
            elif not w.ready and w.task is None and now >= w.started_at + self.STARTUP_TIMEOUT_S:
                self._start_failed(w, f"not ready within {self.STARTUP_TIMEOUT_S:.0f}s")

    def _receive(self, w: _Worker, results: list, pending: deque, attempts: list[int]) -> None:
        try:
            msg = w.conn.recv()
        except (EOFError, OSError):
            if w.task is None:
                w.kill()
                self._start_failed(w, f"exited with code {w.proc.exitcode} before it was ready")
            else:
                self._crashed(w, results, pending, attempts)
            return
        if msg[0] == "ready":
            w.ready = True
            self.start_failures = 0
        elif msg[0] == "refused":
            self.refusals += 1
            self._start_failed(w, f"a worker refused to serve: {msg[1]}")
        elif w.task == msg[0]:
            w.task = None
            self._record(results, msg[0], Verdict(msg[1]))

    def close(self) -> None:
        for w in self.workers:
            try:
                w.conn.send(None)
            except Exception:
                pass
        deadline = time.monotonic() + 2.0
        for w in self.workers:
            w.proc.join(timeout=max(0.0, deadline - time.monotonic()))
            w.kill()
        self.workers.clear()
