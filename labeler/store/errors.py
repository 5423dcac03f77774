"""StorageError: a job's output cannot be written or read (a full disk, no permission, a path that
is a file, an object store that refuses). Kept apart from the store so that the CLI can catch it
without importing pyarrow."""

from __future__ import annotations


class StorageError(OSError):
    """One line, `PATH: cannot ACTION: CAUSE`, for the user; the OSError behind it is its __cause__.

    An OSError, so that callers that caught the raw OSError before still catch it."""


def describe_cause(error: BaseException) -> str:
    """What went wrong, on one line: "No space left on device", not "[Errno 28] ...: '/long/path/.x.tmp'"."""
    text = getattr(error, "strerror", None) or str(error) or type(error).__name__
    return " ".join(text.split()).rstrip(".")
