"""`tubeless batch`: one run per input line, results as JSON lines, resumable after a kill.

Each input line is a JSON object, the options of one run; its index is its 0-based line
number (blank lines are skipped). A result line is written and flushed as soon as its run
ends, so a killed batch keeps every finished line; rerunning the same command skips the
indices the output already holds (a torn last line is dropped) and, at the end, rewrites
the output sorted by index. A durable agent resumes inputs that were cut off.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import math
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, TextIO

from tubeless._quote import quote
from tubeless.cli._exit import ExitCode, one_line
from tubeless.cli._failure import run_root_causes
from tubeless.cli._interrupt import InterruptGuard
from tubeless.cli._program._sources import resolve_target
from tubeless.errors import CliLoadError, CliUsageError, MissingExtraError

__all__ = ["INPUT_INVALID_CODE", "handle_batch"]

INPUT_INVALID_CODE = "TUBELESS_BATCH_INPUT_INVALID"
"""The code of a result line for an input line that is not a JSON object."""

_BAR_WIDTH = 24
_REDRAW_SECONDS = 0.1


def _read_done(path: Path) -> dict[int, str]:
    """The result lines already in `path`, by index (a torn or foreign line is dropped)."""
    done: dict[int, str] = {}
    if not path.exists():
        return done
    for line in path.read_text("utf-8", errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            row = json.loads(line)
            if isinstance(row, dict) and isinstance(row.get("index"), int):
                done[row["index"]] = line
    return done


def _inputs(path: Path) -> Iterator[tuple[int, Any, str | None]]:
    """`(index, options, problem)` per non-blank line; `problem` says why it is unusable."""
    try:
        stream = path.open(encoding="utf-8", errors="replace")
    except OSError as error:
        raise CliLoadError(f"Cannot read inputs {path}: {error.strerror}") from error
    with stream:
        for index, line in enumerate(stream):
            if not line.strip():
                continue
            try:
                options = json.loads(line)
            except json.JSONDecodeError as error:
                yield index, None, f"line {index + 1}: not JSON ({error.msg})"
                continue
            if not isinstance(options, dict):
                yield index, None, f"line {index + 1}: expected a JSON object, got {quote(options)}"
                continue
            yield index, options, None


def _error_of(run: Any) -> dict[str, str]:
    """The code and message of the failure that started a run's failure."""
    roots = run_root_causes(run)
    if not roots:
        return {"code": run.status.upper(), "message": f"the run ended {run.status}"}
    root = roots[0]
    diagnostic, exception = root.diagnostic, root.exception
    if diagnostic is None:
        assert exception is not None  # a root has a diagnostic, an exception, or both
        code = getattr(exception, "code", None) or type(exception).__name__
        return {"code": str(code), "message": one_line(exception)}
    code = diagnostic.source_code or diagnostic.code
    message = diagnostic.message
    cause = getattr(diagnostic, "cause", None)
    while cause is not None:
        code, message = cause.source_code or code, cause.message
        cause = cause.cause
    return {"code": code, "message": " ".join(str(message).split())}


def _result_line(index: int, run: Any) -> str:
    row: dict[str, Any] = {"index": index, "status": run.status}
    if run.status == "completed":
        row["value"] = run.value
    else:
        row["error"] = _error_of(run)
    return json.dumps(row, ensure_ascii=False, sort_keys=False, default=repr)


class _Progress:
    """Done and failed counts with an ETA: a redrawn bar on a terminal, else a line each."""

    def __init__(self, total: int, already: int, stream: TextIO) -> None:
        self.total, self.done, self.failed = total, already, 0
        self._started = time.monotonic()
        self._fresh = 0
        self._stream = stream
        self._live = stream.isatty() and os.environ.get("TERM") != "dumb"
        self._drawn = 0.0

    def _eta(self) -> str:
        if not self._fresh or self.done >= self.total:
            return "--:--"
        left = (time.monotonic() - self._started) / self._fresh * (self.total - self.done)
        minutes, seconds = divmod(int(left), 60)
        return f"{minutes:02d}:{seconds:02d}"

    def finished(self, index: int, status: str, code: str | None) -> None:
        self.done += 1
        self._fresh += 1
        self.failed += status != "completed"
        if not self._live:
            tail = f" {code}" if code else ""
            self._stream.write(
                f"[{self.done}/{self.total}] input {index} {status}{tail} (failed {self.failed})\n"
            )
            self._stream.flush()
            return
        now = time.monotonic()
        if now - self._drawn >= _REDRAW_SECONDS or self.done == self.total:
            self._drawn = now
            self.draw()

    def draw(self) -> None:
        if not self._live:
            return
        filled = _BAR_WIDTH * self.done // max(self.total, 1)
        bar = "#" * filled + "." * (_BAR_WIDTH - filled)
        self._stream.write(
            f"\r\x1b[K[{bar}] {self.done}/{self.total} done, {self.failed} failed, "
            f"ETA {self._eta()}"
        )
        self._stream.flush()

    def close(self) -> None:
        if self._live:
            self.draw()
            self._stream.write("\n")
            self._stream.flush()


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(share * len(ordered)) - 1))]


def summary_lines(rows: Mapping[int, str], durations: list[float]) -> list[str]:
    """The summary table: counts by status, the top error codes, p50/p95 durations."""
    statuses: Counter[str] = Counter()
    codes: Counter[str] = Counter()
    for line in rows.values():
        row = json.loads(line)
        statuses[row["status"]] += 1
        if "error" in row:
            codes[row["error"]["code"]] += 1
    lines = [f"{'status':<28} {'inputs':>7}"]
    lines += [f"{status:<28} {count:>7}" for status, count in sorted(statuses.items())]
    if codes:
        lines.append(f"{'error code':<40} {'inputs':>7}")
        lines += [f"{code:<40} {count:>7}" for code, count in codes.most_common(5)]
    if durations:
        lines.append(
            f"duration of the {len(durations)} runs of this invocation: "
            f"p50 {_percentile(durations, 0.5):.3f} s, p95 {_percentile(durations, 0.95):.3f} s"
        )
    return lines


def _write_sorted(path: Path, rows: Mapping[int, str]) -> None:
    """Replace `path` with `rows` in index order, atomically."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.writelines(rows[index] + "\n" for index in sorted(rows))
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _executor(address: str | None) -> tuple[Any, Any]:
    """Dask's executor for `--dask ADDRESS` and its client, or `(None, None)`."""
    if address is None:
        return None, None
    try:
        distributed: Any = importlib.import_module("distributed")
    except ImportError as error:
        raise MissingExtraError(
            "tubeless batch --dask", extra="dask", missing="distributed"
        ) from error
    client = distributed.Client(address)
    return client.get_executor(pure=False), client


def _pipeline(arguments: argparse.Namespace) -> Any:
    source = resolve_target(arguments.source, arguments.export, arguments.project, Path.cwd())
    found = source.plan_source()
    return found if hasattr(found, "plan") else found.pipeline


def handle_batch(arguments: argparse.Namespace) -> int:
    """Run every input line not yet in the output; exit 0 only when every input completed."""
    from tubeless.pipeline import run_many

    inputs, output = Path(arguments.inputs), Path(arguments.output)
    if inputs.resolve() == output.resolve():
        raise CliUsageError(["--output must not be the --inputs file."])
    pipeline = _pipeline(arguments)
    rows = _read_done(output)
    if output.exists():
        _write_sorted(output, rows)  # drops a line torn by a kill before appending
    pending = [(index, options, problem) for index, options, problem in _inputs(inputs)]
    total = len(pending)
    todo = [(index, options) for index, options, problem in pending if index not in rows]
    progress = _Progress(total, total - len(todo), sys.stderr)
    durations: list[float] = []
    signal = threading.Event()
    context: dict[str, Any] = {"signal": signal}
    executor, client = _executor(arguments.dask)
    store = None
    try:
        if arguments.store is not None:
            from tubeless.trace import SqliteTraceStore

            store = context["tracing"] = SqliteTraceStore(arguments.store)
        problems = {index: problem for index, _, problem in pending if problem}
        with output.open("a", encoding="utf-8") as stream, InterruptGuard(signal) as guard:
            for index, problem in problems.items():
                if index in rows:
                    continue
                error = {"code": INPUT_INVALID_CODE, "message": problem}
                line = json.dumps({"index": index, "status": "failed", "error": error})
                _emit(stream, rows, index, line)
                progress.finished(index, "failed", INPUT_INVALID_CODE)
            runs = run_many(
                pipeline,
                (options for index, options in todo if index not in problems),
                executor=executor,
                max_workers=arguments.workers,
                context=context,
            )
            order = [index for index, _ in todo if index not in problems]
            for position, run in runs:
                index = order[position]
                _emit(stream, rows, index, _result_line(index, run))
                durations.append((run.finished_at_ms - run.started_at_ms) / 1000)
                code = None if run.status == "completed" else _error_of(run)["code"]
                progress.finished(index, run.status, code)
        progress.close()
    finally:
        if store is not None:
            store.close()
        if client is not None:
            client.close()
    _write_sorted(output, rows)
    sys.stdout.write("\n".join(summary_lines(rows, durations)) + "\n")
    if guard.interrupted:
        return ExitCode.CANCELLATION
    everything = all(json.loads(line)["status"] == "completed" for line in rows.values())
    return ExitCode.SUCCESS if everything and len(rows) >= total else ExitCode.EXECUTION


def _emit(stream: TextIO, rows: dict[int, str], index: int, line: str) -> None:
    rows[index] = line
    stream.write(line + "\n")
    stream.flush()
