"""`run --trace -`: keep stdout for NDJSON by sending everything else to stderr."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import TextIO

__all__ = ["diverted_stdout"]


@contextlib.contextmanager
def diverted_stdout() -> Iterator[TextIO]:
    """Send stdout to stderr for the duration; yield a stream that writes the real stdout.

    With real file descriptors the swap is made on descriptor 1 itself, so output of
    subprocesses and C code goes to stderr too; otherwise only `sys.stdout` is swapped.
    """
    sys.stdout.flush()
    try:
        out_fd, err_fd = sys.stdout.fileno(), sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        original = sys.stdout
        with contextlib.redirect_stdout(sys.stderr):
            yield original
        return
    saved = os.dup(out_fd)
    trace = os.fdopen(saved, "w", encoding="utf-8", newline="\n", closefd=True)
    os.dup2(err_fd, out_fd)
    try:
        # Python-level prints share stderr's (line) buffering, so output keeps its order.
        with contextlib.redirect_stdout(sys.stderr):
            yield trace
    finally:
        for stream in (trace, sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os.dup2(saved, out_fd)
        trace.close()
