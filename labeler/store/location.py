"""Where a job writes: a local directory, or a prefix in an object store (s3://, gs://, any fsspec URL).

Every file goes in whole under its final name or not at all. Locally that takes a temp name, fsync
and rename; object stores have no rename, but one PUT of a whole object is atomic already, so there
the file is serialised in memory and written in one go. Nothing here decides what is committed: the
commit records (labeler/manifest.py) do, after the files they name are in place.
"""

from __future__ import annotations

import io
import os
import posixpath
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq


class OutputLocation:
    def __init__(self, output: str | Path):
        self.uri = str(output)
        self.filesystem, self.base = _resolve(self.uri)
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
        return self.filesystem.get_file_info(self.path(relative)).type != pafs.FileType.NotFound

    def read_bytes(self, relative: str) -> bytes | None:
        """The file's content, or None when it does not exist (or vanished while being read)."""
        try:
            with self.filesystem.open_input_stream(self.path(relative)) as stream:
                return stream.read()
        except FileNotFoundError:
            return None

    def read_table(self, relative: str, columns: list[str] | None = None) -> pa.Table:
        return pq.read_table(self.path(relative), columns=columns, filesystem=self.filesystem)

    def list_names(self, directory: str) -> list[str]:
        """Names of the files directly in `directory` (none when it does not exist)."""
        selector = pafs.FileSelector(self.path(directory), allow_not_found=True)
        return sorted(info.base_name for info in self.filesystem.get_file_info(selector) if info.type == pafs.FileType.File)

    # -- writing ---------------------------------------------------------------
    def make_dirs(self, *directories: str) -> None:
        if self.is_local:  # object stores have no directories to make
            for directory in directories:
                Path(self.path(directory)).mkdir(parents=True, exist_ok=True)

    def write_bytes(self, relative: str, data: bytes) -> None:
        """Whole or nothing: a reader sees the old file, the new one, or none, never a part."""
        if not self.is_local:
            with self.filesystem.open_output_stream(self.path(relative)) as stream:
                stream.write(data)
            return
        final = Path(self.path(relative))
        temp = final.with_name(f".{final.name}.tmp")
        with open(temp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, final)
        _fsync_directory(final.parent)

    def write_table(self, relative: str, table: pa.Table) -> None:
        sink = io.BytesIO()
        pq.write_table(table, sink)
        self.write_bytes(relative, sink.getvalue())

    def delete(self, relative: str) -> None:
        try:
            self.filesystem.delete_file(self.path(relative))
        except FileNotFoundError:
            pass

    def delete_tree(self, directory: str) -> None:
        if self.filesystem.get_file_info(self.path(directory)).type == pafs.FileType.Directory:
            self.filesystem.delete_dir(self.path(directory))
        else:  # object stores: a "directory" is only a common prefix of keys
            for name in self.list_names(directory):
                self.delete(f"{directory}/{name}")


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


def _fsync_directory(directory: Path) -> None:
    """Make a rename inside `directory` durable before anything that depends on it is written."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
