"""The one file of an output that needs more than whole-file writes: the driver lock (labeler/store/lock.py).

Taking a lock needs an atomic create (it fails when the file exists) and taking over a stale one
needs a compare-and-swap (replace it only if it is still the stale copy that was read). Each kind
of storage has its own way:
- a local disk: os.open(O_CREAT | O_EXCL); a takeover renames the stale file aside, checks that what
  it moved is the copy it judged stale (else puts it back), then creates anew;
- S3: PUT with If-None-Match: * to create, If-Match: ETAG to replace or delete (boto3);
- Google Cloud Storage: if_generation_match=0 to create, =GENERATION to replace or delete
  (google-cloud-storage);
- fsspec's memory filesystem (tests, notebooks): its "xb" mode, within one process.
pyarrow's own S3 and GCS filesystems expose none of this, so those go through the vendor's client;
where no atomic create is known (HDFS, other fsspec schemes, a missing client) opening the lock
file is a StorageError that says what is missing. A `version` is what a compare-and-swap compares:
the content itself locally and in memory, the ETag on S3, the generation on GCS.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

import pyarrow.fs as pafs

from labeler.store.errors import StorageError, describe_cause
from labeler.store.location import OutputLocation, _fsync_directory


class LockFile(Protocol):
    where: str  # how users name it

    def create(self, data: bytes) -> Any | None:
        """Write the file whole if it does not exist: its version; None (nothing written) if it does."""

    def read(self) -> tuple[bytes, Any] | None:
        """(content, version), or None when there is no file."""

    def update(self, data: bytes, version: Any) -> Any | None:
        """The holder's rewrite: the new version, or None (nothing written) unless the file is still at `version`."""

    def take_over(self, data: bytes, version: Any) -> Any | None:
        """Replace someone else's stale file, still at `version`, with `data`: the new version; None if it changed or went."""

    def delete(self, version: Any) -> bool:
        """Delete the file if it is still at `version`."""


def open_lock_file(location: OutputLocation, name: str) -> LockFile:
    """The lock file `name` in `location`, with the atomic operations of its storage (see above)."""
    if location.is_local:
        return LocalLockFile(Path(location.path(name)))
    filesystem, where = location.filesystem, location.display(name)
    scheme = location.uri.partition("://")[0]  # as the user spelt it, chained ones (dir::memory) too
    if isinstance(filesystem, pafs.S3FileSystem):
        return S3LockFile(_s3_client(location.uri, where), *_bucket_and_key(location.path(name)), where)
    if isinstance(filesystem, pafs.GcsFileSystem):
        return GcsLockFile(_gcs_bucket(location.path(name), where), _bucket_and_key(location.path(name))[1], where)
    if isinstance(filesystem, pafs.PyFileSystem):
        fsspec_filesystem = filesystem.handler.fs
        if "memory" in _protocols(fsspec_filesystem):
            return MemoryLockFile(fsspec_filesystem, location.path(name), where)
    raise StorageError(
        f"{where}: cannot lock the output: no atomic create is known for {scheme}:// here "
        "(local paths, s3:// with boto3, gs:// with google-cloud-storage and memory:// have one); "
        "rerun with --no-output-lock if you are sure that only one driver writes there"
    )


def _protocols(fsspec_filesystem) -> tuple[str, ...]:
    protocol = fsspec_filesystem.protocol
    return (protocol,) if isinstance(protocol, str) else tuple(protocol)


def _bucket_and_key(path: str) -> tuple[str, str]:
    bucket, _, key = path.partition("/")
    return bucket, key


class LocalLockFile:
    def __init__(self, path: Path):
        self.path = path
        self.where = str(path)

    def create(self, data: bytes) -> Any | None:
        with self._failing("create"):
            self.path.parent.mkdir(parents=True, exist_ok=True)  # a new output
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                return None
            try:
                os.write(fd, data)  # a reader that comes in between sees an empty file: lock.py waits and reads again
                os.fsync(fd)
            except BaseException:  # a full disk: leave no lock that names this live process
                os.close(fd)
                self.path.unlink(missing_ok=True)
                raise
            os.close(fd)
            _fsync_directory(self.path.parent)
        return data

    def read(self) -> tuple[bytes, Any] | None:
        with self._failing("read"):
            try:
                data = self.path.read_bytes()
            except FileNotFoundError:
                return None
        return data, data

    def update(self, data: bytes, version: Any) -> Any | None:
        # Not a compare-and-swap: a takeover between the read and the rename would be overwritten. It
        # needs this holder to have missed heartbeats for the whole stale threshold and then to wake up
        # in that instant; the fencing check before each commit (lock.py) then stops one of the two.
        current = self.read()
        if current is None or current[0] != version:
            return None
        temp = self.path.with_name(f"{self.path.name}.{uuid.uuid4().hex}.tmp")
        with self._failing("write"):
            try:
                with open(temp, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(temp, self.path)
            finally:
                temp.unlink(missing_ok=True)
            _fsync_directory(self.path.parent)
        return data

    def take_over(self, data: bytes, version: Any) -> Any | None:
        aside = self.path.with_name(f"{self.path.name}.stale-{uuid.uuid4().hex}")
        with self._failing("take over"):
            try:
                os.rename(self.path, aside)  # atomic: of two drivers taking over, one moves the stale file
            except FileNotFoundError:
                return None
            if aside.read_bytes() != version:  # it was renewed, or another driver took over first: put it back
                try:
                    os.link(aside, self.path)  # unless a third driver created one meanwhile
                except FileExistsError:
                    pass
                aside.unlink()
                return None
            aside.unlink()
        return self.create(data)

    def delete(self, version: Any) -> bool:
        current = self.read()
        if current is None or current[0] != version:
            return False
        with self._failing("delete"):
            self.path.unlink(missing_ok=True)
        return True

    def _failing(self, action: str):
        return _failing(self.where, action)


class MemoryLockFile:
    """fsspec's memory filesystem lives in one process; its "xb" mode refuses an existing file."""

    def __init__(self, filesystem, path: str, where: str):
        self.filesystem, self.path, self.where = filesystem, path, where

    def create(self, data: bytes) -> Any | None:
        try:
            with self.filesystem.open(self.path, "xb") as handle:
                handle.write(data)
        except FileExistsError:
            return None
        return data

    def read(self) -> tuple[bytes, Any] | None:
        try:
            data = self.filesystem.cat_file(self.path)
        except FileNotFoundError:
            return None
        return data, data

    def update(self, data: bytes, version: Any) -> Any | None:
        current = self.read()
        if current is None or current[0] != version:
            return None
        self.filesystem.pipe_file(self.path, data)
        return data

    def take_over(self, data: bytes, version: Any) -> Any | None:
        return self.update(data, version)

    def delete(self, version: Any) -> bool:
        current = self.read()
        if current is None or current[0] != version:
            return False
        self.filesystem.rm_file(self.path)
        return True


class S3LockFile:
    """Conditional PUT and DELETE (If-None-Match, If-Match) through boto3's client."""

    def __init__(self, client, bucket: str, key: str, where: str):
        self.client, self.bucket, self.key, self.where = client, bucket, key, where

    def create(self, data: bytes) -> Any | None:
        return self._put(data, IfNoneMatch="*")

    def read(self) -> tuple[bytes, Any] | None:
        with self._failing("read"):
            try:
                response = self.client.get_object(Bucket=self.bucket, Key=self.key)
            except Exception as error:
                if _status(error) == 404:
                    return None
                raise
            return response["Body"].read(), response["ETag"]

    def update(self, data: bytes, version: Any) -> Any | None:
        return self._put(data, IfMatch=version)

    def take_over(self, data: bytes, version: Any) -> Any | None:
        return self._put(data, IfMatch=version)

    def delete(self, version: Any) -> bool:
        with self._failing("delete"):
            try:
                self.client.delete_object(Bucket=self.bucket, Key=self.key, IfMatch=version)
            except Exception as error:
                if _status(error) in CONDITION_FAILED:
                    return False
                raise
        return True

    def _put(self, data: bytes, **condition) -> Any | None:
        """The new ETag, or None when the condition failed (412), or lost a race with another conditional write (409)."""
        with self._failing("write"):
            try:
                return self.client.put_object(Bucket=self.bucket, Key=self.key, Body=data, **condition)["ETag"]
            except Exception as error:
                if _status(error) in CONDITION_FAILED:
                    return None
                raise

    def _failing(self, action: str):
        return _failing(self.where, action)


# A conditional write that did not happen: 412 the condition failed, 409 it lost a race with another
# conditional write to the same key, 404 the file it was conditional on is gone.
CONDITION_FAILED = (412, 409, 404)


def _status(error: Exception) -> int | None:
    """The HTTP status of a botocore ClientError (error.response) or a google.api_core error (error.code)."""
    response = getattr(error, "response", None)
    if isinstance(response, dict):
        return response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    code = getattr(error, "code", None)
    return code if isinstance(code, int) else None


def _s3_client(uri: str, where: str):
    try:
        import boto3
    except ImportError as error:
        raise StorageError(
            f"{where}: cannot lock the output: a conditional create on S3 needs boto3 (pip install boto3), "
            "or rerun with --no-output-lock if you are sure that only one driver writes there"
        ) from error
    # pyarrow takes the endpoint and region from the URI's query (s3://b/p?endpoint_override=...); so does the lock
    query = {key: values[-1] for key, values in parse_qs(urlsplit(uri).query).items()}
    options = {}
    if "endpoint_override" in query:
        endpoint = query["endpoint_override"]
        options["endpoint_url"] = endpoint if "://" in endpoint else f"{query.get('scheme', 'https')}://{endpoint}"
    if "region" in query:
        options["region_name"] = query["region"]
    return boto3.client("s3", **options)


class GcsLockFile:
    """Generation preconditions (if_generation_match) through google-cloud-storage."""

    def __init__(self, bucket, key: str, where: str):
        self.bucket, self.key, self.where = bucket, key, where

    def create(self, data: bytes) -> Any | None:
        return self._upload(data, 0)

    def read(self) -> tuple[bytes, Any] | None:
        with self._failing("read"):
            blob = self.bucket.get_blob(self.key)
            if blob is None:
                return None
            try:
                return blob.download_as_bytes(if_generation_match=blob.generation), blob.generation
            except Exception as error:
                if _status(error) in CONDITION_FAILED:  # rewritten or deleted since get_blob: read again
                    return self.read()
                raise

    def update(self, data: bytes, version: Any) -> Any | None:
        return self._upload(data, version)

    def take_over(self, data: bytes, version: Any) -> Any | None:
        return self._upload(data, version)

    def delete(self, version: Any) -> bool:
        with self._failing("delete"):
            try:
                self.bucket.blob(self.key).delete(if_generation_match=version)
            except Exception as error:
                if _status(error) in CONDITION_FAILED:
                    return False
                raise
        return True

    def _upload(self, data: bytes, generation: int) -> Any | None:
        blob = self.bucket.blob(self.key)
        with self._failing("write"):
            try:
                blob.upload_from_string(data, if_generation_match=generation)
            except Exception as error:
                if _status(error) in CONDITION_FAILED:
                    return None
                raise
        return blob.generation

    def _failing(self, action: str):
        return _failing(self.where, action)


def _gcs_bucket(path: str, where: str):
    try:
        from google.cloud import storage
    except ImportError as error:
        raise StorageError(
            f"{where}: cannot lock the output: a conditional create on Google Cloud Storage needs google-cloud-storage "
            "(pip install google-cloud-storage), or rerun with --no-output-lock if you are sure that only one driver writes there"
        ) from error
    return storage.Client().bucket(_bucket_and_key(path)[0])


class _failing:
    """Errors of the storage as one StorageError, `PATH: cannot ACTION: CAUSE` (as in location.py)."""

    def __init__(self, where: str, action: str):
        self.where, self.action = where, action

    def __enter__(self):
        return self

    def __exit__(self, kind, error, traceback):
        # Only storage calls run inside: whatever the client raises (botocore, google.api_core, OSError) is a storage failure.
        if error is None or isinstance(error, StorageError) or not isinstance(error, Exception):
            return False
        raise StorageError(f"{self.where}: cannot {self.action} the lock: {describe_cause(error)}") from error
