"""Reading input rows from JSON Lines, JSON, Parquet files or a Hugging Face hub dataset.

An input spec is a file path (`.jsonl`, `.json` holding an array of objects, `.parquet`), a folder
of such files (all of one kind, read in name order as one input: a dataset saved in shards) or
`hf:NAME[:CONFIG][@SPLIT]`, e.g. `hf:openai/gsm8k:main@test` (the split defaults to "train").

Problems with the whole input raise InputError. A row that cannot be read (a JSON Lines line
that is not valid JSON or not an object) comes back as a RawRow carrying a RowError, so one bad
line rejects one row, not the job. A line that is not UTF-8 keeps its bytes, base64-encoded, in its raw
text (after "base64:"), so that it can be repaired from rejected/.

`row_index` is the 0-based position of the row among the input's rows. In JSON Lines, blank
lines are not rows: they are skipped and not counted, so a file gets the same row indices as
the same data in Parquet, and `limit` counts rows, not lines.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

from labeler.records import RowError

FILE_EXTENSIONS = (".jsonl", ".json", ".parquet")
HF_PREFIX = "hf:"
RAW_MAX_CHARS = 2000
RAW_BASE64 = "base64:"  # how `raw` starts where it holds a row's bytes (a line that is not UTF-8), base64-encoded
RAW_MAX_BYTES = 1 << 20  # of such a row's bytes, those kept
_PARQUET_BATCH_ROWS = 1024
_FINGERPRINT_CHUNK = 1 << 20  # 1 MiB


class InputError(Exception):
    """The input as a whole cannot be read; the message is meant for the user, as is."""


@dataclass
class RawRow:
    row_index: int
    data: dict | None  # None when the row could not be read
    error: RowError | None
    raw: str  # the row as JSON text, truncated to RAW_MAX_CHARS, for the rejected table


def read_rows(spec: str, limit: int | None = None, trust_remote_code: bool = False) -> Iterator[RawRow]:
    """Rows of the input `spec`, at most `limit` of them.

    The input is opened before this returns, so a missing file or an unloadable dataset raises
    InputError here rather than at the first `next()`.
    """
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    if spec.startswith(HF_PREFIX):
        rows = _hub_rows(spec, trust_remote_code)
    elif Path(spec).is_dir():
        rows = _folder_rows([_file_rows(str(path)) for path in folder_files(spec)])
    else:
        rows = _file_rows(spec)
    return islice(rows, limit)


def _file_rows(spec: str) -> Iterator[RawRow]:
    """The rows of one input file, opened (InputError for a missing, unreadable or unknown file)."""
    path = Path(spec)
    suffix = path.suffix.lower()
    if suffix not in FILE_EXTENSIONS:
        raise InputError(
            f"{spec}: unsupported input type {suffix or '(no extension)'!r}; "
            f"expected {', '.join(FILE_EXTENSIONS)}, a folder of such files or {HF_PREFIX}NAME[:CONFIG][@SPLIT]"
        )
    if not path.is_file():
        raise InputError(f"{spec}: no such file")
    if not os.access(path, os.R_OK):
        raise InputError(f"{spec}: file is not readable")
    return {".jsonl": _jsonl_rows, ".json": _json_rows, ".parquet": _parquet_rows}[suffix](path)


def folder_files(spec: str) -> list[Path]:
    """The input files of a folder given as the input (a dataset saved as shards: train-00000-of-00002.parquet,
    ...): its files of one kind, .parquet, .jsonl or .json, in name order; not its subfolders (a split each, say).
    InputError when it holds none, or files of more than one kind."""
    files = sorted(path for path in Path(spec).iterdir() if path.is_file() and path.suffix.lower() in FILE_EXTENSIONS)
    kinds = sorted({path.suffix.lower() for path in files})
    if not files:
        raise InputError(f"{spec}: a folder with no {', '.join(FILE_EXTENSIONS)} files in it (its subfolders are not read: name one)")
    if len(kinds) > 1:
        raise InputError(f"{spec}: a folder with files of more than one kind ({', '.join(kinds)}): move them apart, or name one file")
    return files


def _folder_rows(files: list[Iterator[RawRow]]) -> Iterator[RawRow]:
    """The rows of a folder's files, one after another, numbered across them as one input's rows."""
    row_index = 0
    for rows in files:
        for row in rows:
            row.row_index = row_index
            row_index += 1
            yield row


def rows_from_records(records: Iterable, limit: int | None = None) -> Iterator[RawRow]:
    """Rows held in memory (dicts, as a file's rows would parse), numbered like a file's rows."""
    return (_checked_row(i, item) for i, item in enumerate(islice(records, limit)))


def input_fingerprint(spec: str) -> str:
    """A cheap id of the input's content, to notice a changed input on resume.

    Files: size plus a hash of the first and last MiB (the whole file when it is under 2 MiB).
    Neither path nor mtime goes in, so a copy of the same file on another node matches.
    Hub datasets: the spec itself.
    """
    if spec.startswith(HF_PREFIX):
        return spec
    if Path(spec).is_dir():  # its files' names (in order) and fingerprints
        parts = [f"{path.name}={input_fingerprint(str(path))}" for path in folder_files(spec)]
        return f"folder:{hashlib.sha256(chr(10).join(parts).encode()).hexdigest()[:16]}"
    try:
        with open(spec, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            digest = hashlib.sha256(f.read(_FINGERPRINT_CHUNK))
            f.seek(max(_FINGERPRINT_CHUNK, size - _FINGERPRINT_CHUNK))
            digest.update(f.read())
    except OSError as exc:
        raise InputError(f"{spec}: cannot read: {exc.strerror or exc}") from exc
    return f"file:{size}:{digest.hexdigest()[:16]}"


def parse_hub_spec(spec: str) -> tuple[str, str | None, str]:
    """`hf:NAME[:CONFIG][@SPLIT]` -> (name, config or None, split)."""
    body = spec.removeprefix(HF_PREFIX)
    body, _, split = body.partition("@")  # split first: "train[:100]" may hold a colon
    name, _, config = body.partition(":")
    if not name:
        raise InputError(f"{spec}: expected {HF_PREFIX}NAME[:CONFIG][@SPLIT]")
    return name, config or None, split or "train"


def _jsonl_rows(path: Path) -> Iterator[RawRow]:
    # Bytes in, decoded per line: one line of bad UTF-8 rejects that row only.
    with open(path, "rb") as f:
        row_index = 0
        for line_number, line in enumerate(f):
            if line_number == 0:
                line = line.removeprefix(b"\xef\xbb\xbf")  # UTF-8 byte-order mark
            if not line.strip():
                continue
            yield _parse_line(row_index, line)
            row_index += 1


def _parse_line(row_index: int, line: bytes) -> RawRow:
    raw = line.decode("utf-8", errors="replace").strip()[:RAW_MAX_CHARS]
    try:
        data = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return _not_utf8(row_index, line, exc)
    except json.JSONDecodeError as exc:
        return RawRow(
            row_index,
            None,
            RowError("row", f"not valid JSON: {_json_message(exc)} column {exc.colno}"),
            raw,
        )
    if not isinstance(data, dict):
        return RawRow(row_index, None, RowError("row", f"expected a JSON object, got {_json_type(data)}"), raw)
    return RawRow(row_index, data, None, raw)


def _not_utf8(row_index: int, line: bytes, exc: UnicodeDecodeError) -> RawRow:
    """A line that is not UTF-8: rejected, its bytes kept as they were in `raw`, base64-encoded after RAW_BASE64 (a
    text decoded with replacement characters would lose them), so that the row can be repaired (read as the
    encoding it is in: Latin-1, CP-1252, ...) from rejected/ alone; at most RAW_MAX_BYTES of them."""
    kept = line.rstrip(b"\r\n")
    where = f"byte 0x{line[exc.start]:02x} at byte {exc.start}"
    part = f"its first {RAW_MAX_BYTES} of {len(kept)} bytes" if len(kept) > RAW_MAX_BYTES else "its bytes as they were"
    reason = f"line is not valid UTF-8 ({where}); {part} are in raw, base64-encoded after '{RAW_BASE64}'"
    return RawRow(row_index, None, RowError("row", reason), RAW_BASE64 + base64.b64encode(kept[:RAW_MAX_BYTES]).decode("ascii"))


def _json_message(exc: json.JSONDecodeError) -> str:
    """The decoder's message, ending in "at" for a position to follow: some of its messages end in it
    already ("Invalid control character '\\n' at")."""
    return exc.msg if exc.msg.endswith(" at") else f"{exc.msg} at"


def _json_rows(path: Path) -> Iterator[RawRow]:
    # A JSON array has to be parsed whole before its first row exists.
    try:
        with open(path, encoding="utf-8-sig") as f:
            data = json.load(f)
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason})") from exc
    except json.JSONDecodeError as exc:
        hint = " (one object per line? name the file .jsonl)" if exc.msg == "Extra data" else ""
        raise InputError(f"{path}: not valid JSON: {_json_message(exc)} line {exc.lineno}{hint}") from exc
    if not isinstance(data, list):
        raise InputError(f"{path}: expected a JSON array of objects, got {_json_type(data)}")
    if data and not any(isinstance(item, dict) for item in data):
        raise InputError(f"{path}: expected a JSON array of objects, got an array of {_json_type(data[0])}s")
    return (_checked_row(i, item) for i, item in enumerate(data))


def _parquet_rows(path: Path) -> Iterator[RawRow]:
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ... for a bad file
        raise InputError(f"{path}: cannot read as Parquet: {exc}") from exc
    return _parquet_batches(path, parquet)


def _parquet_batches(path: Path, parquet) -> Iterator[RawRow]:
    import pyarrow as pa

    row_index = 0
    try:
        for batch in parquet.iter_batches(batch_size=_PARQUET_BATCH_ROWS):
            for item in batch.to_pylist():
                yield RawRow(row_index, item, None, _raw_json(item))
                row_index += 1
    except (OSError, pa.ArrowException) as exc:  # a corrupt row group, found only when reached
        raise InputError(f"{path}: cannot read Parquet row group after row {row_index}: {exc}") from exc


def _hub_rows(spec: str, trust_remote_code: bool) -> Iterator[RawRow]:
    name, config, split = parse_hub_spec(spec)
    try:
        import datasets

        extra = {"trust_remote_code": True} if trust_remote_code else {}
        dataset = datasets.load_dataset(name, config, split=split, **extra)
    except Exception as exc:  # datasets raises many types: not found, offline, bad config or split
        raise InputError(f"{spec}: cannot load dataset: {type(exc).__name__}: {exc}") from exc
    return (_checked_row(i, item) for i, item in enumerate(dataset))


def _checked_row(row_index: int, item) -> RawRow:
    if isinstance(item, dict):
        return RawRow(row_index, item, None, _raw_json(item))
    error = RowError("row", f"expected a JSON object, got {_json_type(item)}")
    return RawRow(row_index, None, error, _raw_json(item))


def _raw_json(item) -> str:
    return json.dumps(item, ensure_ascii=False, default=str)[:RAW_MAX_CHARS]


def _json_type(value) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number" if isinstance(value, int | float) else type(value).__name__)
