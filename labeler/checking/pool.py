"""The worker processes of the symbolic layer: a forkserver (else spawn) pool, one task per worker
at a time, each under a hard deadline (an overrunning worker is killed and replaced) and a soft
one inside the worker."""

from __future__ import annotations

import logging
import multiprocessing
import time
from collections import deque
from multiprocessing.connection import wait as _wait_connections

from labeler.checking.symbolic import _install_no_eval_guard, _symbolic_check
from labeler.checking.verdicts import Verdict

logger = logging.getLogger(__name__)


class _SoftTimeout(BaseException):
    pass


# The workers' process target: forkserver/spawn pass it by reference (module and name), so it
# stays a module-level function.
def _worker_main(conn, soft_timeout_s: float | None, memory_limit_bytes: int | None) -> None:  # pragma: no cover - runs in a child
    import signal

    if memory_limit_bytes:
        try:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (memory_limit_bytes, memory_limit_bytes))
        except Exception:
            pass
    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    logging.getLogger("latex2sympy2_extended").setLevel(logging.CRITICAL)
    try:
        import sympy  # noqa: F401
        import math_verify  # noqa: F401

        _install_no_eval_guard()
    except Exception:
        pass

    def on_alarm(signum, frame):
        raise _SoftTimeout()

    signal.signal(signal.SIGALRM, on_alarm)
    conn.send(("ready", None))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        task_id, pred_variants, ref_variants = msg
        try:
            if soft_timeout_s:
                signal.setitimer(signal.ITIMER_REAL, soft_timeout_s)
            try:
                verdict = _symbolic_check(pred_variants, ref_variants)
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
        try:
            conn.send((task_id, verdict))
        except (OSError, ValueError):
            return


class _Worker:
    def __init__(self, ctx, soft_timeout_s: float | None, memory_limit_bytes: int | None):
        parent, child = ctx.Pipe(duplex=True)
        self.conn = parent
        self.proc = ctx.Process(target=_worker_main, args=(child, soft_timeout_s, memory_limit_bytes), daemon=True, name="answer-checker")
        try:
            self.proc.start()
        finally:
            child.close()
        self.ready = False
        self.started_at = time.monotonic()
        self.task: int | None = None
        self.deadline = 0.0

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


def _pool_context():
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


class _Pool:
    """Worker processes, each with one task at a time and a hard deadline per task.

    A worker that overruns its deadline is SIGKILLed and replaced (the task's verdict is
    ``timeout``); one that dies on its own (a crash) gets its task once more, then ``timeout``.
    Workers start lazily; tasks go only to workers that have finished importing sympy, so start-up
    time never counts against a task's deadline.
    """

    STARTUP_TIMEOUT_S = 120.0
    MAX_START_FAILURES = 3
    MAX_ATTEMPTS = 2

    def __init__(self, n_workers: int, timeout_s: float, memory_limit_bytes: int | None, soft_timeout: bool = True):
        self.n_workers = max(1, n_workers)
        self.timeout_s = timeout_s
        self.soft_timeout_s = max(0.05, timeout_s * 0.8) if soft_timeout else None
        self.memory_limit_bytes = memory_limit_bytes
        self.ctx = _pool_context()
        self.workers: list[_Worker] = []
        self.kills = 0  # workers killed for overrunning their deadline
        self.crashes = 0  # workers that died on their own
        self.start_failures = 0

    def _spawn(self) -> _Worker | None:
        try:
            return _Worker(self.ctx, self.soft_timeout_s, self.memory_limit_bytes)
        except Exception:
            logger.exception("answer checker: cannot start a worker process")
            self.start_failures += 1
            return None

    def _replace(self, w: _Worker) -> None:
        w.kill()
        w.task = None
        if w in self.workers:
            self.workers.remove(w)
        if self.start_failures < self.MAX_START_FAILURES:
            new = self._spawn()
            if new is not None:
                self.workers.append(new)

    def run(self, tasks: list[tuple[list[str], list[str]]]) -> list[Verdict]:
        results: list[Verdict | None] = [None] * len(tasks)
        attempts = [0] * len(tasks)
        pending = deque(range(len(tasks)))
        self.start_failures = 0
        self.workers = [w for w in self.workers if w.proc.is_alive() or self._discard(w)]
        while len(self.workers) < min(self.n_workers, len(tasks)) and self.start_failures < self.MAX_START_FAILURES:
            new = self._spawn()
            if new is not None:
                self.workers.append(new)
        while pending or any(w.task is not None for w in self.workers):
            if not self.workers:
                if self.start_failures >= self.MAX_START_FAILURES:
                    logger.error("answer checker: worker processes fail to start; symbolic checks get 'timeout'")
                    break
                new = self._spawn()
                if new is not None:
                    self.workers.append(new)
                continue
            for w in list(self.workers):
                if pending and w.ready and w.task is None:
                    tid = pending.popleft()
                    attempts[tid] += 1
                    try:
                        w.conn.send((tid, tasks[tid][0], tasks[tid][1]))
                    except Exception:
                        attempts[tid] -= 1
                        pending.appendleft(tid)
                        self.crashes += 1
                        self._replace(w)
                        continue
                    w.task = tid
                    w.deadline = time.monotonic() + self.timeout_s
            waiting = [w for w in self.workers if w.task is not None or not w.ready]
            if not waiting:
                continue
            next_deadline = min(w.deadline if w.task is not None else w.started_at + self.STARTUP_TIMEOUT_S for w in waiting)
            ready = _wait_connections([w.conn for w in waiting], timeout=max(0.0, next_deadline - time.monotonic()))
            by_conn = {id(w.conn): w for w in waiting}
            for conn in ready:
                w = by_conn[id(conn)]
                try:
                    msg = conn.recv()
                except (EOFError, OSError):
                    # Died on its own (a crash, the OS out of memory): retry its task once elsewhere.
                    if w.task is not None:
                        self.crashes += 1
                        if attempts[w.task] < self.MAX_ATTEMPTS:
                            pending.appendleft(w.task)
                        else:
                            results[w.task] = Verdict.TIMEOUT
                    else:
                        self.start_failures += 1
                    self._replace(w)
                    continue
                if msg[0] == "ready":
                    w.ready = True
                    continue
                tid, verdict = msg
                if w.task == tid:
                    results[tid] = Verdict(verdict)
                    w.task = None
            now = time.monotonic()
            for w in list(self.workers):
                if w.task is not None and now >= w.deadline:
                    results[w.task] = Verdict.TIMEOUT
                    self.kills += 1
                    self._replace(w)
                elif not w.ready and w.task is None and now >= w.started_at + self.STARTUP_TIMEOUT_S:
                    self.start_failures += 1
                    self._replace(w)
        return [r if r is not None else Verdict.TIMEOUT for r in results]

    def _discard(self, w: _Worker) -> bool:
        w.kill()
        return False

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
