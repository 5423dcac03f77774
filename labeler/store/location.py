"""Where a job writes: a local directory, or a prefix in an object store (s3://, gs://, any fsspec URL).

Every file goes in whole under its final name or not at all. Locally that takes a temp name, fsync
and rename; object stores have no rename, but one PUT of a whole object is atomic already, so there
the file is serialised in memory and written in one go. Nothing here decides what is committed: the
commit records (labeler/manifest.py) do, after the files they name are in place.

Every failure of the filesystem (a full disk, no permission, an object store that refuses) comes
out as one StorageError naming the file and the cause, and a failed write leaves no temp file.
"""

from __future__ import annotations

import io
import os
import posixpath
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from labeler.store.errors import StorageError, describe_cause


class OutputLocation:
    def __init__(self, output: str | Path):
        self.uri = str(output)
        try:
            self.filesystem, self.base = _resolve(self.uri)
        except (OSError, ValueError, ImportError, pa.ArrowException) as error:  # an unknown scheme, a missing fsspec package
            raise StorageError(f"{self.uri}: cannot open: {describe_cause(error)}") from error
        self.is_local = isinstance(self.filesystem, pafs.LocalFileSystem)

    def __repr__(self) -> str:
        return f"OutputLocation({self.uri!r})"

    # -- names ---------------------------------------------------------------
    def path(self, relative: str = "") -> str:
        """The path inside the filesystem."""
        return posixpath.join(self.base, relative) if relative else self.base

    def display(self, relative: str = "") -> str:
        """How users name it: a local path, or the URI they gave plus the relative part."""
        if self.is_local:
            return self.path(relative)
        return f"{self.uri.rstrip('/')}/{relative}" if relative else self.uri

    # -- reading ---------------------------------------------------------------
    def exists(self, relative: str) -> bool:
        with self._failing("read", relative):
            return self.filesystem.get_file_info(self.path(relative)).type != pafs.FileType.NotFound

    def read_bytes(self, relative: str) -> bytes | None:
        """The file's content, or None when it does not exist (or vanished while being read)."""
        with self._failing("read", relative):
            try:
                with self.filesystem.open_input_stream(self.path(relative)) as stream:
                    return stream.read()
            except FileNotFoundError:
                return None

    def read_table(self, relative: str, columns: list[str] | None = None) -> pa.Table:
        with self._failing("read", relative):
            return pq.read_table(self.path(relative), columns=columns, filesystem=self.filesystem)

    def check_parquet(self, relative: str) -> None:
        """StorageError unless the file ends in a readable Parquet footer: reads the footer only,
        so it is cheap, and it finds a truncated file (a copy cut short, a shard cut by hand)."""
        with self._failing("read", relative):
            pq.read_metadata(self.path(relative), filesystem=self.filesystem)

    def list_names(self, directory: str) -> list[str]:
        """Names of the files directly in `directory` (none when it does not exist)."""
        selector = pafs.FileSelector(self.path(directory), allow_not_found=True)
        with self._failing("list", directory):
            return sorted(info.base_name for info in self.filesystem.get_file_info(selector) if info.type == pafs.FileType.File)

    def list_versions(self, directory: str) -> list[tuple[str, str]]:
        """(name, version) of the files directly in `directory`; the version, "size:mtime", changes when a file is rewritten."""
        selector = pafs.FileSelector(self.path(directory), allow_not_found=True)
        with self._failing("list", directory):
            found = [info for info in self.filesystem.get_file_info(selector) if info.type == pafs.FileType.File]
        return sorted((info.base_name, f"{info.size}:{info.mtime_ns}") for info in found)

    def version(self, relative: str) -> str:
        info = self.filesystem.get_file_info(self.path(relative))
        return f"{info.size}:{info.mtime_ns}"

    # -- writing ---------------------------------------------------------------
    def make_dirs(self, *directories: str) -> None:
        if not self.is_local:  # object stores have no directories to make
            return
        if os.path.exists(self.base) and not os.path.isdir(self.base):
            raise StorageError(f"{self.base}: is a file; the output must be a directory")
        for directory in directories:
            with self._failing("create the directory", directory):
                Path(self.path(directory)).mkdir(parents=True, exist_ok=True)

    def write_bytes(self, relative: str, data: bytes) -> None:
        """Whole or nothing: a reader sees the old file, the new one, or none, never a part."""
        if not self.is_local:
            with self._failing("write", relative), self.filesystem.open_output_stream(self.path(relative)) as stream:
                stream.write(data)
            return
        final = Path(self.path(relative))
        temp = final.with_name(f".{final.name}.tmp")
        with self._failing("write", relative):
            try:
                with open(temp, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(temp, final)
            except BaseException:  # a full disk, or Ctrl-C: leave no temp file behind
                _remove_quietly(temp)
                raise
            _fsync_directory(final.parent)

    def write_table(self, relative: str, table: pa.Table) -> None:
        sink = io.BytesIO()
        pq.write_table(table, sink)
        self.write_bytes(relative, sink.getvalue())

    def delete(self, relative: str) -> None:
        with self._failing("delete", relative):
            try:
                self.filesystem.delete_file(self.path(relative))
            except FileNotFoundError:
                pass

    def delete_tree(self, directory: str) -> None:
        with self._failing("delete", directory):
            is_directory = self.filesystem.get_file_info(self.path(directory)).type == pafs.FileType.Directory
            if is_directory:
                self.filesystem.delete_dir(self.path(directory))
        if not is_directory:  # object stores: a "directory" is only a common prefix of keys
            for name in self.list_names(directory):
                self.delete(f"{directory}/{name}")

    @contextmanager
    def _failing(self, action: str, relative: str = "") -> Iterator[None]:
        """Errors of the filesystem (OSError, and Arrow's for a file that is not Parquet) as one
        StorageError: `PATH: cannot ACTION: CAUSE`."""
        try:
            yield
        except StorageError:
            raise
        except (OSError, pa.ArrowException) as error:
            raise StorageError(f"{self.display(relative)}: cannot {action}: {describe_cause(error)}") from error


def _resolve(uri: str) -> tuple[pafs.FileSystem, str]:
    """pyarrow's own filesystems for local paths, s3://, gs://, hdfs://; fsspec for any other URL."""
    if "://" not in uri:
        return pafs.LocalFileSystem(), os.path.abspath(uri)
    try:
        filesystem, path = pafs.FileSystem.from_uri(uri)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        import fsspec

        fsspec_filesystem, path = fsspec.core.url_to_fs(uri)
        filesystem = pafs.PyFileSystem(pafs.FSSpecHandler(fsspec_filesystem))
    return filesystem, path.rstrip("/")


def _remove_quietly(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError:  # the error that brought us here is the one to report
        pass


def _fsync_directory(directory: Path) -> None:
    """Make a rename inside `directory` durable before anything that depends on it is written."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
