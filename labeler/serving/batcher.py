"""Requests to a reward server, batched: completions from all waiting requests are scored together, on
one thread (the PRM is one model), up to max_batch at a time.

A request puts its items on a bounded queue and awaits their rewards; one asyncio task takes what is
waiting (after at most max_wait_ms for more), scores it in a worker thread and hands each request its
own. Nothing waits without bound: a full queue refuses at once (Busy), and a caller times its own wait.
A job whose caller stopped waiting is dropped unscored while it is still queued (abandoned); once its
batch is being scored it cannot be stopped (the PRM runs the batch as one), so its rewards are
discarded when they come, counted and logged (discarded): never handed to anyone. A caller that asks
for the same items again after the first caller stopped waiting (a client's retry after its timeout), while
that job is still queued or being scored, takes over the job, which is then scored once for it
(retries_joined), not queued a second time; a copy sent while the first caller still waits is a job of its own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

log = logging.getLogger("labeler.serve")


class Busy(Exception):
    """The queue holds max_pending completions already."""


class TooLarge(ValueError):
    """A request of more completions than max_pending: it could never be queued."""


@dataclass
class _Job:
    items: list  # what score() takes, one per completion
    future: asyncio.Future
    key: tuple | None  # the items, to find the job again for a retry (None: unhashable items)
    abandoned: bool = False  # its caller stopped waiting (timeout, disconnect)


class Batcher:
    def __init__(self, score: Callable[[Sequence], list], max_batch: int, max_wait_s: float, max_pending: int):
        self.score = score  # items -> one result per item, in order; raises ValueError for bad items
        self.max_batch, self.max_wait_s, self.max_pending = max_batch, max_wait_s, max_pending
        self.pending = 0  # completions queued or being scored
        self.batches = 0
        self.scored = 0
        self.abandoned = 0  # requests dropped unscored: their callers had stopped waiting while they were queued
        self.discarded = 0  # requests scored after their callers had stopped waiting: the rewards thrown away
        self.retries_joined = 0  # requests answered by an identical one's scoring, whose caller had stopped waiting
        self._waiting: dict[tuple, _Job] = {}  # the jobs queued or being scored, by their items
        self._queue: asyncio.Queue[_Job] = asyncio.Queue()
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prm-scorer")
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def submit(self, items: list) -> list:
        if len(items) > self.max_pending:
            raise TooLarge(f"{len(items)} completions in one request; at most {self.max_pending} (--max-pending) can wait")
        key = _key(items)
        job = self._waiting.get(key) if key is not None else None
        if job is not None and job.abandoned:  # a retry of a request that timed out: its job, not a second one
            job.abandoned = False
            self.retries_joined += 1
        else:
            if self.pending + len(items) > self.max_pending:
                raise Busy(f"{self.pending} completions are waiting (--max-pending {self.max_pending})")
            job = _Job(items, asyncio.get_running_loop().create_future(), key)
            job.future.add_done_callback(lambda f: f.cancelled() or f.exception())  # read: no "never retrieved" warning
            self.pending += len(items)
            if key is not None:
                self._waiting[key] = job
            await self._queue.put(job)
        try:
            return await asyncio.shield(job.future)
        except asyncio.CancelledError:  # the caller timed out or went away: nobody will read the rewards
            job.abandoned = True
            raise

    async def drain(self) -> None:
        """Wait until every queued job is answered, then stop the scorer (graceful shutdown)."""
        await self._queue.join()
        if self._task is not None:
            self._task.cancel()
        self._thread.shutdown(wait=True)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            jobs = [await self._queue.get()]
            size = len(jobs[0].items)
            deadline = loop.time() + self.max_wait_s
            while size < self.max_batch:
                try:
                    job = self._queue.get_nowait()  # what is waiting already, even with max_wait 0
                except asyncio.QueueEmpty:
                    if deadline <= loop.time():
                        break
                    try:
                        job = await asyncio.wait_for(self._queue.get(), deadline - loop.time())
                    except TimeoutError:
                        break
                jobs.append(job)
                size += len(job.items)
            await self._score(jobs)

    async def _score(self, jobs: list[_Job]) -> None:
        """Score the jobs together; when that fails (a bad item), each job alone, so that one bad request
        gets its own error and the others their rewards."""
        everyone, jobs = jobs, [job for job in jobs if not job.abandoned]
        for job in everyone:
            if job.abandoned:
                self.abandoned += 1
                self._forget(job)
        try:
            if not jobs:
                return
            try:
                results = await self._in_thread([item for job in jobs for item in job.items])
            except Exception as error:
                if len(jobs) == 1:
                    self._answer(jobs[0], error=error)
                    return
                for job in jobs:
                    if job.abandoned:  # its caller left while the batch was tried: not scored again alone
                        self.abandoned += 1
                        self._forget(job)
                        continue
                    try:
                        self._answer(job, await self._in_thread(job.items))
                    except Exception as alone:
                        self._answer(job, error=alone)
                return
            start = 0
            for job in jobs:
                self._answer(job, results[start : start + len(job.items)])
                start += len(job.items)
        finally:
            for job in everyone:
                self.pending -= len(job.items)
                self._queue.task_done()

    def _forget(self, job: _Job) -> None:
        if job.key is not None and self._waiting.get(job.key) is job:
            del self._waiting[job.key]

    def _answer(self, job: _Job, results: list | None = None, error: Exception | None = None) -> None:
        self._forget(job)
        if job.abandoned:
            self.discarded += 1
            what = "rewards are" if error is None else f"error ({type(error).__name__}) is"
            log.warning("a request of %d completions timed out while being scored: its %s discarded", len(job.items), what)
        elif error is not None:
            job.future.set_exception(error)
        else:
            job.future.set_result(results)

    async def _in_thread(self, items: list) -> list:
        results = await asyncio.get_running_loop().run_in_executor(self._thread, self.score, items)
        self.batches += 1
        self.scored += len(items)
        return results


_NAN = object()  # every NaN in a key: a missing reference parsed from JSON is a new float each time, and nan != nan


def _key(items: list) -> tuple | None:
    """What tells a retry from another request: the items, every NaN in them as one value (None: not hashable)."""
    try:
        key = _without_nan(tuple(items))
        hash(key)
    except TypeError:
        return None
    return key


def _without_nan(value):
    if isinstance(value, float) and value != value:
        return _NAN
    if isinstance(value, tuple):
        return tuple(_without_nan(part) for part in value)
    return value
