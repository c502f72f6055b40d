"""Test doubles for code built on tubeless: use them in your own tests, as ours do."""

from __future__ import annotations

import copy
import threading
from typing import Any

from tubeless import errors, trace

__all__ = ["MemoryTraceSink"]


class MemoryTraceSink:
    """A trace sink that keeps every exported record in memory, in export order.

    Each record is validated and deep-copied, so later changes to the caller's dict do not
    show. Safe to share between threads.

    Args:
        fail_after: when set, the sink takes this many records and then raises
            `TraceSinkError` on every later `export`, as a broken destination would.
    """

    def __init__(self, *, fail_after: int | None = None) -> None:
        self._lock = threading.Lock()
        self._records: list[dict[str, Any]] = []
        self._fail_after = fail_after
        self.flush_count = 0
        """How many times `flush()` was called."""
        self.closed = False
        """Whether `close()` was called."""

    @property
    def records(self) -> list[dict[str, Any]]:
        """A copy of the list of records taken so far, in export order."""
        with self._lock:
            return list(self._records)

    def export(self, record: dict[str, Any]) -> None:
        """Validate and keep `record`.

        Raises:
            TraceRecordError: when `record` is not a valid trace record.
            TraceSinkError: when the sink is closed, or `fail_after` records were taken.
        """
        trace.validate_record(record)
        kept = copy.deepcopy(record)
        with self._lock:
            if self.closed:
                raise errors.TraceSinkError("MemoryTraceSink is closed")
            if self._fail_after is not None and len(self._records) >= self._fail_after:
                raise errors.TraceSinkError(
                    f"MemoryTraceSink fails after {self._fail_after} records"
                )
            self._records.append(kept)

    def flush(self) -> None:
        """Count the call; the records are already in memory."""
        with self._lock:
            self.flush_count += 1

    def close(self) -> None:
        """Refuse later records; the kept ones stay readable."""
        with self._lock:
            self.closed = True
