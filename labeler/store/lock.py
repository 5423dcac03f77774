"""One driver per output: `labeler label` holds `<output>/.lock` while it runs.

Two drivers on one output would both run every unit, and the manifest rewrites of one could drop
the units the other committed. So a job takes the lock before it reads or writes anything in its
output (--overwrite too), and a second driver stops with OutputLockedError naming the holder.

The lock file is JSON: its format, the holder's token (a uuid), host, pid, command, version, when it
started and its last heartbeat, and, on Linux, the host's boot id, the clock tick at which the
holder's process started and its PID namespace. The holder rewrites the heartbeat every HEARTBEAT_SECONDS from a daemon
thread. A lock is stale, and is taken over with a warning, when its heartbeat is older than
STALE_AFTER_SECONDS (a killed machine; the hosts' clocks must agree to well within that), or when
its host is this one and its process is certainly gone: the host booted since (another boot id), its
pid is not alive, or is another process now (it started at another tick: a reused pid). A holder in
another PID namespace of the same host name (two containers given one hostname, or one container
restarted: a new PID namespace) is judged by its heartbeat only, as its pid is not this namespace's
to ask about (a lock of format 2, which does not record the namespace, is judged by its pid). Host
names must be unique among the machines that share an output: another machine's lock under this
host name reads as one from before a reboot (another boot id). A lock in a format this version does not know
(a newer format, fields it does not know) is never taken over: its holder may live by rules this
version cannot judge. A labeler before 0.2 does not know this format (its parser refuses the fields it
does not know and takes the lock for unreadable, so over): a pre-0.2 labeler must not share an output
with 0.2 or later, whose labels schema and checker changed too. The takeover is a compare-and-swap (labeler/store/lock_file.py), so of two
drivers taking over one stale lock only one gets it.

Fencing: before every commit and in every heartbeat the holder reads the lock back; if it no longer
carries its token (it stalled past the threshold and was taken over) the job stops with
LockLostError instead of writing. The lock is deleted when the job ends, only if still ours.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Iterator
from datetime import datetime, timezone

from labeler import __version__
from labeler.store.errors import StorageError
from labeler.store.location import OutputLocation
from labeler.store.lock_file import LockFile, open_lock_file

if TYPE_CHECKING:
    from labeler.store.shard_store import ShardStore

LOCK_NAME = ".lock"
HEARTBEAT_SECONDS = 10.0
STALE_AFTER_SECONDS = 60.0  # six missed heartbeats
UNREADABLE_WAIT_SECONDS = 0.5  # a local lock is empty for an instant between its create and its write
TAKE_ATTEMPTS = 3
LOCK_FORMAT = 3  # 3: pid_namespace; 2: boot_id and process_start; 1 (no format field): the locks written before them

logger = logging.getLogger("labeler.lock")


class OutputLockedError(StorageError):
    """Another live driver holds the output's lock."""


class LockLostError(StorageError):
    """This driver's lock was taken over (it missed heartbeats past the stale threshold): it must not write."""


@dataclass(frozen=True)
class LockHolder:
    token: str
    host: str
    pid: int
    started: str
    heartbeat: str
    command: str = ""
    version: str = ""
    format: int = 1
    boot_id: str = ""  # "" where the host does not say (not Linux), and in format 1
    process_start: str = ""  # clock ticks from boot to the holder process's start; "" as boot_id
    # the holder's PID namespace (Linux: /proc/self/ns/pid): two containers may share a hostname and a boot,
    # not their pids; "" where the host does not say, and before format 3
    pid_namespace: str = ""

    def describe(self, now: float) -> str:
        return f"host {self.host}, pid {self.pid}, since {self.started}, last heartbeat {now - _epoch(self.heartbeat):.0f}s ago"

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), indent=1).encode()

    @classmethod
    def parse(cls, data: bytes) -> LockHolder | ForeignLock | None:
        """The holder; a ForeignLock for a lock of a format this version does not know; None for content
        that is not a lock (empty, cut short, edited)."""
        try:
            content = json.loads(data)
        except ValueError:
            return None
        if not isinstance(content, dict):
            return None
        unknown = sorted(set(content) - {f.name for f in fields(cls)})
        lock_format = content.get("format", 1)
        if unknown or not isinstance(lock_format, int) or lock_format > LOCK_FORMAT:
            return ForeignLock(content, tuple(unknown))
        try:
            holder = cls(**content)
            _epoch(holder.heartbeat)
            if not isinstance(holder.pid, int) or isinstance(holder.pid, bool) or not 0 < holder.pid < 2**31:
                return None  # edited by hand: no process to ask about
            return holder
        except (ValueError, TypeError):
            return None


@dataclass(frozen=True)
class ForeignLock:
    """A lock written in a format this version does not know (a newer labeler's): never taken over."""

    content: dict
    unknown_fields: tuple[str, ...]

    def describe(self) -> str:
        written = f"written by labeler {self.content.get('version') or 'of another version'}"
        what = [f"format {self.content.get('format', 1)}"]
        if self.unknown_fields:
            what.append(f"fields this version does not know: {', '.join(self.unknown_fields)}")
        who = ", ".join(f"{key} {self.content[key]}" for key in ("host", "pid", "started") if key in self.content)
        return f"{written} ({'; '.join(what)}){', ' + who if who else ''}"


class OutputLock:
    """`with OutputLock(location) as lock:` holds the output's lock; `lock.check()` before each write that commits."""

    def __init__(
        self,
        location: OutputLocation,
        *,
        stale_after: float = STALE_AFTER_SECONDS,
        heartbeat_every: float = HEARTBEAT_SECONDS,
        lock_file: LockFile | None = None,
    ):
        self.location = location
        self.stale_after, self.heartbeat_every = stale_after, heartbeat_every
        self.file = lock_file or open_lock_file(location, LOCK_NAME)
        self.holder = LockHolder(
            token=uuid.uuid4().hex,
            host=socket.gethostname(),
            pid=os.getpid(),
            started=_iso(time.time()),
            heartbeat=_iso(time.time()),
            command=" ".join(sys.argv)[:500],
            version=__version__,
            format=LOCK_FORMAT,
            boot_id=_boot_id(),
            process_start=_process_start(os.getpid()),
            pid_namespace=_pid_namespace(),
        )
        self.warnings: list[str] = []  # a stale lock taken over, for the job's log
        self._version = None
        self._lost: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> OutputLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    # -- taking ------------------------------------------------------------------
    def acquire(self) -> None:
        self.location.make_dirs()  # refuses an output that is a file
        data = self.holder.to_bytes()
        seen_unreadable = None
        for _ in range(TAKE_ATTEMPTS):
            version = self.file.create(data)
            if version is not None:
                return self._hold(version)
            found = self.file.read()
            if found is None:  # released meanwhile
                continue
            content, version = found
            holder = LockHolder.parse(content)
            if holder is None and content != seen_unreadable:  # maybe caught between a create and its write
                seen_unreadable = content
                time.sleep(UNREADABLE_WAIT_SECONDS)
                continue
            if isinstance(holder, ForeignLock):
                raise OutputLockedError(
                    f"{self.file.where}: held by a lock that labeler {__version__} cannot judge ({holder.describe()}): "
                    f"its driver may still be running; wait for it to finish, or run the labeler that wrote it, or, if "
                    f"you are sure no driver writes there, delete {self.file.where} and rerun"
                )
            reason = self._stale_reason(holder)
            if reason is None:
                raise OutputLockedError(
                    f"{self.file.where}: another driver is labelling this output ({holder.describe(time.time())}); "
                    f"wait for it to finish, or stop it (a lock is taken over once its heartbeat is {self.stale_after:.0f}s old)"
                )
            version = self.file.take_over(data, version)
            if version is not None:
                self.warnings.append(f"{self.file.where}: took over a stale lock ({reason})")
                return self._hold(version)
        raise OutputLockedError(f"{self.file.where}: the lock changed hands while this driver tried to take it; another driver is starting")

    def _stale_reason(self, holder: LockHolder | None) -> str | None:
        """Why the lock of `holder` may be taken over, or None while its driver is alive."""
        if holder is None:
            return "its content is unreadable"
        now = time.time()
        if now - _epoch(holder.heartbeat) > self.stale_after:
            return f"{holder.describe(now)}, over {self.stale_after:.0f}s"
        if holder.host == self.holder.host:
            gone = self._process_gone(holder)
            if gone is not None:
                return f"{holder.describe(now)}; {gone}"
        return None

    def _process_gone(self, holder: LockHolder) -> str | None:
        """Why the process of `holder`, a lock of this host, is certainly not running; None when it may be."""
        return process_gone(holder, self.holder.boot_id, self.holder.pid, self.holder.pid_namespace)

    def _hold(self, version) -> None:
        self._version = version
        self._thread = threading.Thread(target=self._beat, name="output-lock-heartbeat", daemon=True)
        self._thread.start()

    # -- holding ---------------------------------------------------------------
    def check(self) -> None:
        """LockLostError unless the lock file still carries this driver's token (fencing, before a commit)."""
        if self._lost is None:
            found = self.file.read()
            holder = LockHolder.parse(found[0]) if found is not None else None
            if not isinstance(holder, LockHolder) or holder.token != self.holder.token:
                if isinstance(holder, LockHolder):
                    self._lost = f"now held by host {holder.host}, pid {holder.pid}"
                elif isinstance(holder, ForeignLock):
                    self._lost = f"now held by a lock {holder.describe()}"
                else:
                    self._lost = "it is gone" if found is None else "its content is unreadable"
        if self._lost is not None:
            raise LockLostError(
                f"{self.file.where}: this driver lost the output's lock ({self._lost}): it stops without writing; "
                "the driver that holds it now carries on"
            )

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat_every):
            try:
                self.check()
                self.holder = LockHolder(**{**asdict(self.holder), "heartbeat": _iso(time.time())})
                version = self.file.update(self.holder.to_bytes(), self._version)
                if version is None:
                    self._lost = "it changed under this driver"
                    return
                self._version = version
            except LockLostError:
                return
            except StorageError as error:  # a passing outage: the next beat tries again, fencing guards the commits
                logger.warning("%s; the next heartbeat tries again", error)

    # -- releasing ---------------------------------------------------------------
    def release(self) -> None:
        """Stop the heartbeat and delete the lock if it is still ours."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        if self._lost is None:
            try:
                self.file.delete(self._version)
            except StorageError as error:  # left behind, it goes stale and the next driver takes it over
                logger.warning("%s; the next driver takes the lock over once it is stale", error)


@contextmanager
def hold_output(store: ShardStore, enabled: bool = True) -> Iterator[list[str]]:
    """Hold the lock of `store`'s output, fencing its commits, and yield the warnings of taking it
    (a stale lock taken over); with `enabled=False` (--no-output-lock) hold nothing."""
    if not enabled:
        yield []
        return
    with OutputLock(store.location) as lock:
        store.fence = lock.check
        try:
            yield lock.warnings
        finally:
            store.fence = None


def read_lock_holder(location: OutputLocation) -> dict | None:
    """Who holds the output's lock, read without taking it (`labeler status`, `labeler report`); None when
    no one does. `stale`: its driver is gone and the next run takes the lock over (`gone` says why, when
    the holder is a process of this host that is certainly not running)."""
    data = location.read_bytes(LOCK_NAME)
    if data is None:
        return None
    holder = LockHolder.parse(data)
    if holder is None:
        return {"unreadable": True, "stale": True}
    if isinstance(holder, ForeignLock):
        who = {key: holder.content.get(key, "?") for key in ("host", "pid")}  # what readers name a holder by
        return {"foreign": holder.describe(), **who, "stale": False}
    age = time.time() - _epoch(holder.heartbeat)
    # stale: its driver is gone, as a driver starting here would judge it (OutputLock._stale_reason): its
    # heartbeat is too old, or it is of this host and its process is certainly not running (a kill -9)
    gone = process_gone(holder, _boot_id(), os.getpid(), _pid_namespace()) if holder.host == socket.gethostname() else None
    found = {"host": holder.host, "pid": holder.pid, "started": holder.started, "heartbeat_age_seconds": round(age, 1)}
    return found | {"stale": age > STALE_AFTER_SECONDS or gone is not None} | ({"gone": gone} if gone else {})


def process_gone(holder: LockHolder, boot_id: str, pid: int, pid_namespace: str = "") -> str | None:
    """Why the process of `holder`, a lock of this host, is certainly not running, as seen from the
    process `pid` of boot `boot_id` and PID namespace `pid_namespace` of this host; None when it may be
    (a holder in another PID namespace, another container of the same name, is never judged by its pid:
    its heartbeat says when it is gone)."""
    if holder.boot_id and boot_id and holder.boot_id != boot_id:
        return "this host has restarted since it was taken"
    if holder.pid_namespace and pid_namespace and holder.pid_namespace != pid_namespace:
        return None
    if not _pid_alive(holder.pid):
        return "that process is gone"
    if holder.format < 2 and holder.pid == pid:  # every lock this process writes has a later format
        return f"pid {holder.pid} is another process now (this one, which did not take it)"
    now_start = _process_start(holder.pid)
    if holder.process_start and now_start and holder.process_start != now_start:
        return f"pid {holder.pid} is another process now (started at tick {now_start}, the holder at {holder.process_start})"
    return None


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="seconds")


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def _boot_id() -> str:
    """This boot of the host (Linux: a new random id at each boot); "" where the host does not say."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _pid_namespace() -> str:
    """This process's PID namespace (Linux: e.g. "pid:[4026531836]"); "" where the host does not say."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def _process_start(pid: int) -> str:
    """The clock tick since boot at which process `pid` started (Linux: field 22 of /proc/PID/stat),
    which tells a pid's processes apart; "" where it cannot be read."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    after_name = stat.rpartition(")")[2].split()  # the name, in parentheses, may hold spaces; field 3 on
    return after_name[19] if len(after_name) > 19 else ""
