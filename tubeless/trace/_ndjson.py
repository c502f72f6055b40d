"""NDJSON traces: one compact JSON record per line, written by a sink and read back whole."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import threading
import warnings
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from tubeless.errors import TornTraceWarning, TraceRecordError, TraceSinkError, TraceStoreError
from tubeless.trace._encoding import encode
from tubeless.trace._rules import TRACE_RECORD_BYTE_LIMIT
from tubeless.trace._wire import decode_record

__all__ = [
    "FLUSH_INTERVAL",
    "NDJSON_FILE_BYTE_LIMIT",
    "NDJSON_LINE_BYTE_LIMIT",
    "NDJSON_RECORD_LIMIT",
    "NdjsonTraceSink",
    "read_ndjson",
]

NDJSON_FILE_BYTE_LIMIT = 64 * 1024 * 1024
"""`read_ndjson` refuses files larger than this many bytes."""
NDJSON_LINE_BYTE_LIMIT = TRACE_RECORD_BYTE_LIMIT
"""`read_ndjson` refuses lines longer than this many bytes (line ending excluded).

It is the record limit of the trace rules, so every record the writer accepts reads back.
"""
NDJSON_RECORD_LIMIT = 100_000
"""`read_ndjson` refuses files holding more records than this."""
FLUSH_INTERVAL = 0.05
"""Seconds an `NdjsonTraceSink` may hold a written record before flushing it."""
_FILE_BUFFER_BYTES = 1024 * 1024
"""The write buffer of a file the sink opens: the timed flush, not the buffer, writes."""
_LINE_LIMIT = NDJSON_LINE_BYTE_LIMIT + 1
"""The longest line (newline included) `_check_line` need not look at when it is ASCII."""


def _check_line(line: str) -> None:
    """Refuse a line `read_ndjson` would refuse: not UTF-8, or longer than its limit.

    `validate_record` measures plain records; this catches a run's own records too, which
    are bounded as they are built but not measured.
    """
    try:
        size = len(line) if line.isascii() else len(line.encode("utf-8"))
    except UnicodeEncodeError:
        raise TraceRecordError(
            "Invalid trace record at $: holds a lone surrogate, which is not UTF-8 text"
        ) from None
    if size - 1 > NDJSON_LINE_BYTE_LIMIT:
        limit = NDJSON_LINE_BYTE_LIMIT
        raise TraceRecordError(
            f"Invalid trace record at $: {size - 1} bytes of JSON exceed the {limit}-byte "
            "record limit"
        )


class NdjsonTraceSink:
    """A trace sink writing one compact JSON record per line.

    Given a path, the file is created (with its parent directories) or truncated, and
    `close()` closes it; given a text stream, the stream is written and flushed but never
    closed. Records are flushed at the end of every run, on `flush()` and `close()`, and
    otherwise within `FLUSH_INTERVAL` seconds (50 ms) of being written, so a reader of a
    live file sees each record within 100 ms without a system call per record. After a
    write fails, every later `export` and `close` raises that failure again.

    Args:
        path_or_stream: a file path, or an open text stream such as `sys.stdout`.
    """

    def __init__(self, path_or_stream: str | os.PathLike[str] | IO[str]) -> None:
        self._lock = threading.Lock()
        self._error: BaseException | None = None
        self._closed = False
        self._timer: threading.Timer | None = None
        if isinstance(path_or_stream, (str, os.PathLike)):
            path = Path(path_or_stream)
            path.parent.mkdir(parents=True, exist_ok=True)
            self._stream: IO[str] = path.open(
                "w", encoding="utf-8", newline="\n", buffering=_FILE_BUFFER_BYTES
            )
            self._owned = True
        else:
            self._stream = path_or_stream
            self._owned = False

    def export(self, record: dict[str, Any]) -> None:
        """Validate `record` and append it as one line.

        Raises:
            TraceRecordError: when `record` is not a valid trace record (an edited definition
                snapshot included, which a reader would refuse), or its line would
                not read back (over 1 MiB, or not UTF-8): nothing is written, and the sink
                stays usable.
            TraceSinkError: when the sink is closed, or the write fails now or failed before.
        """
        decode_record(record)
        line = encode(record).line
        if not (len(line) <= _LINE_LIMIT and line.isascii()):
            _check_line(line)
        with self._lock:
            if self._error is not None or self._closed:
                self._raise_if_unusable()
            try:
                self._stream.write(line)
            except (OSError, ValueError) as error:  # ValueError: the stream was closed
                self._error = error
                raise TraceSinkError(f"Cannot write the NDJSON trace: {error}") from error
            if self._timer is None:
                self._timer = threading.Timer(FLUSH_INTERVAL, self._flush_held)
                self._timer.daemon = True
                self._timer.start()

    def flush(self) -> None:
        """Flush the underlying stream now.

        Raises:
            TraceSinkError: when flushing fails, or an earlier write failed.
        """
        self._stop_timer()
        with self._lock:
            if self._closed:
                return
            self._raise_if_unusable()
            self._flush_stream()

    def _flush_held(self) -> None:
        """The timer's flush: a failure is kept for the next `export`, `flush` or `close`."""
        with self._lock:
            self._timer = None
            if not self._closed and self._error is None:
                with contextlib.suppress(TraceSinkError):
                    self._flush_stream()

    def _flush_stream(self) -> None:
        try:
            self._stream.flush()
        except (OSError, ValueError) as error:
            self._error = error
            raise TraceSinkError(f"Cannot flush the NDJSON trace: {error}") from error

    def _stop_timer(self) -> None:
        """Cancel a pending timed flush and wait for its thread, so none outlives a run."""
        with self._lock:
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
            timer.join()

    def close(self) -> None:
        """Flush, close the file when the sink opened it, and report any write failure.

        Closing twice is harmless.

        Raises:
            TraceSinkError: when a write failed, or the final flush or close fails.
        """
        self._stop_timer()
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                if self._owned:
                    self._stream.close()
                elif self._error is None:
                    self._stream.flush()
            except (OSError, ValueError) as error:
                self._error = self._error or error
            if self._error is not None:
                raise TraceSinkError(
                    f"The NDJSON trace lost records: {self._error}"
                ) from self._error

    def _raise_if_unusable(self) -> None:
        if self._error is not None:
            raise TraceSinkError(f"The NDJSON trace failed earlier: {self._error}") from self._error
        if self._closed:
            raise TraceSinkError("The NDJSON trace sink is closed")

    def __enter__(self) -> NdjsonTraceSink:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def _reject_constant(token: str) -> Any:
    raise ValueError(f"{token} is not JSON")


def _read_limited(path: Path) -> bytes:
    limit = NDJSON_FILE_BYTE_LIMIT
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            raise TraceStoreError(f"{path} is not a regular file")
        with path.open("rb") as file:
            data = file.read(limit + 1)  # the file may grow after stat
    except FileNotFoundError:
        raise TraceStoreError(f"Trace file not found: {path}") from None
    except OSError as error:
        raise TraceStoreError(f"Cannot read trace file {path}: {error}") from error
    if len(data) > limit:
        raise TraceStoreError(f"{path} exceeds the {limit}-byte NDJSON trace limit")
    return data


def _parse_line(line: bytes) -> dict[str, Any]:
    """Decode one non-blank line into a valid record; raise `ValueError` saying why not."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("is not valid UTF-8") from None
    try:
        record = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        raise ValueError("is not valid JSON") from None
    try:
        decode_record(record)
    except TraceRecordError as error:
        raise ValueError(f"is not a valid trace record: {error}") from None
    return record  # type: ignore[no-any-return]


def read_ndjson(
    path: str | os.PathLike[str], *, tolerate_torn_tail: bool = False
) -> list[dict[str, Any]]:
    """Read and validate a whole NDJSON trace, in file order.

    Blank lines (spaces and tabs only) are skipped and a `\\r` before a line's newline is
    tolerated. The file may hold at most 64 MiB, each line at most 1 MiB, and at most
    100,000 records.

    Args:
        path: the trace file.
        tolerate_torn_tail: when true, a last line without its newline that is not a
            valid record (a writer stopped mid-line) is skipped with a `TornTraceWarning`
            saying how many records were read; every other bad line still fails.

    Raises:
        TraceStoreError: when the file is missing or too large, or a line is too long, not
            UTF-8, not JSON or not a valid trace record (a definition snapshot that no longer
            matches its fingerprints included); the message names the line (from 1).
    """
    source = Path(path)
    data = _read_limited(source)
    lines = data.split(b"\n")
    records: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=1):
        try:
            record = _record_of(source, number, line, len(records))
        except TraceStoreError:
            torn = tolerate_torn_tail and number == len(lines) and bool(line)
            if not torn:
                raise
            warnings.warn(
                f"{source} ends with a torn line {number} (no newline), skipped; "
                f"read {len(records)} records",
                TornTraceWarning,
                stacklevel=2,
            )
            break
        if record is not None:
            records.append(record)
    return records


def _record_of(source: Path, number: int, line: bytes, count: int) -> dict[str, Any] | None:
    """The record on line `number`, or `None` for a blank line."""
    if line.endswith(b"\r"):
        line = line[:-1]
    if len(line) > NDJSON_LINE_BYTE_LIMIT:
        limit = NDJSON_LINE_BYTE_LIMIT
        raise TraceStoreError(f"{source} line {number} exceeds the {limit}-byte line limit")
    if not line.strip(b" \t"):
        return None
    if count >= NDJSON_RECORD_LIMIT:
        limit = NDJSON_RECORD_LIMIT
        raise TraceStoreError(f"{source} line {number}: more than {limit} records")
    try:
        return _parse_line(line)
    except ValueError as error:
        raise TraceStoreError(f"{source} line {number} {error}") from None
