"""`run_many`: one run of a pipeline per input, on a pool, each yielded as it ends.

On a thread pool (the default, or a `ThreadPoolExecutor` the caller passes) every run
takes the pipeline object itself and shares one cancellation signal. On any other
executor (a process pool, Dask's `Client.get_executor(pure=False)`) a run cannot take
the pipeline object: the task names where the pipeline is importable (a module and an
attribute, or a module file), and the worker imports it once per process. What comes
back is the run's report without the original exception objects (`exceptions` are
`None`; the diagnostics keep each code, message and cause chain).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import importlib
import importlib.util
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from tubeless._quote import quote, type_name
from tubeless.pipeline._run_result import PipelineRun

__all__ = ["PipelineReference", "import_module_file", "run_many"]

_DEFAULT_WORKERS = 8
"""Threads of the default pool: runs mostly wait (on models, on tools), not compute."""


def import_module_file(path: Path, name: str) -> ModuleType:
    """Import the Python file at `path` as module `name` (once per process).

    Like `python FILE`, the file's directory goes on `sys.path` first, so its sibling
    modules import. A failed import leaves no half-made module behind and raises as is.
    """
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError("not a Python module")
    module = importlib.util.module_from_spec(spec)
    directory = str(path.parent)
    if directory not in sys.path:
        sys.path.insert(0, directory)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


@dataclasses.dataclass(frozen=True, slots=True)
class PipelineReference:
    """Where a worker process finds a pipeline: a module attribute, by name or by file."""

    module: str
    """The module's name in `sys.modules`."""
    attribute: str
    """The module attribute holding the pipeline."""
    path: str | None = None
    """The module's file, for a module that is not importable by name (a loaded script)."""

    def load(self) -> Any:
        """Import the module (by name, else from its file) and return the pipeline."""
        try:
            module = importlib.import_module(self.module)
        except ImportError:
            if self.path is None:
                raise
            module = import_module_file(Path(self.path), self.module)
        return getattr(module, self.attribute)

    @classmethod
    def find(cls, pipeline: Any) -> PipelineReference:
        """Find a module attribute that holds `pipeline` itself.

        Raises:
            TypeError: when no loaded module holds it at module level.
        """
        for name, module in list(sys.modules.items()):
            namespace = getattr(module, "__dict__", None)
            if not isinstance(namespace, dict) or name == "__main__":
                continue
            for attribute, value in list(namespace.items()):
                if value is pipeline:
                    path = getattr(module, "__file__", None)
                    return cls(name, attribute, None if path is None else str(path))
        raise TypeError(
            f"run_many on a process pool or a cluster needs pipeline {quote(pipeline.id)} "
            "defined at module level of an importable module (not in __main__)"
        )


def _portable(run: PipelineRun) -> PipelineRun:
    """The run without its exception objects, which need not pickle."""
    return dataclasses.replace(run, exceptions=(None,) * len(run.exceptions))


def _run_remote(
    reference: PipelineReference, options: Any, context: Mapping[str, Any], index: int
) -> PipelineRun:
    """Run one input where `reference` is importable (`index` keeps equal inputs apart)."""
    del index
    return _portable(reference.load().run(options, context=dict(context)))


def _check(executor: object, max_workers: object, key: object, context: object) -> None:
    if executor is not None and not isinstance(executor, concurrent.futures.Executor):
        raise TypeError(f"run_many executor must be an Executor, got {type_name(executor)}")
    if max_workers is not None and (
        not isinstance(max_workers, int) or isinstance(max_workers, bool) or max_workers < 1
    ):
        raise ValueError(
            f"run_many max_workers must be a positive integer, got {quote(max_workers)}"
        )
    if key is not None and not callable(key):
        raise TypeError(f"run_many key must be a function of the input, got {type_name(key)}")
    if context is not None and not isinstance(context, Mapping):
        raise TypeError(f"run_many context must be a mapping, got {type_name(context)}")


def run_many(
    pipeline: Any,
    inputs: Iterable[Any],
    *,
    executor: concurrent.futures.Executor | None = None,
    max_workers: int | None = None,
    key: Callable[[Any], str] | None = None,
    context: Mapping[str, Any] | None = None,
) -> Iterator[tuple[int, PipelineRun]]:
    """Run `pipeline` once per input and yield `(index, run)` as each run ends.

    Inputs are read lazily and at most `max_workers` runs are in flight. Every run gets
    `context` (a trace store there receives every run's records); with `key`, a run's
    context also gets `execution_key=key(input)`, so a durable agent journals each input
    under its own execution: rerunning a batch returns finished inputs from their journal
    and resumes the ones that were cut off. Leaving the loop early (`break`, an exception,
    closing the generator) starts nothing more, cancels the runs in flight on threads and
    waits for them; no thread of the batch outlives it.

    Args:
        pipeline: any pipeline (an agent included).
        inputs: the options of each run, in order; `index` counts from 0.
        executor: where the runs go; default a thread pool of `max_workers` (8) threads
            owned by the batch. A `ThreadPoolExecutor` of yours is used as is (never shut
            down). On any other executor (a process pool, Dask's
            `Client.get_executor(pure=False)`) the pipeline must be defined at module level
            of a module the workers can import, `context` must pickle (trace stores pickle
            as their path), it carries no signal, and the runs come back without
            `exceptions`.
        max_workers: runs in flight at once (default: 8, or the executor's own size).
        key: the execution key of an input, for durable agents.
        context: the run context shared by every run (`tracing`, `hooks`, `signal`, ...).

    Raises:
        TypeError: for an argument of the wrong kind, or a pipeline that a worker process
            could not import.
        ValueError: for a `max_workers` that is not a positive integer.
    """
    _check(executor, max_workers, key, context)
    return _Batch(pipeline, executor, max_workers, key, dict(context or {})).results(inputs)


class _Batch:
    """One `run_many`: the executor, the signal, and the futures in flight."""

    def __init__(
        self,
        pipeline: Any,
        executor: concurrent.futures.Executor | None,
        max_workers: int | None,
        key: Callable[[Any], str] | None,
        context: dict[str, Any],
    ) -> None:
        self._key = key
        self._owned = executor is None
        width = max_workers or getattr(executor, "_max_workers", None) or _DEFAULT_WORKERS
        self._width: int = width
        self._executor = executor or concurrent.futures.ThreadPoolExecutor(
            width, thread_name_prefix="tubeless-batch"
        )
        self._local = isinstance(self._executor, concurrent.futures.ThreadPoolExecutor)
        self._pipeline = pipeline
        self._reference: PipelineReference | None = None
        self._signal: threading.Event | None = context.get("signal")
        self._own_signal: threading.Event | None = None
        if not self._local:
            context.pop("signal", None)
            self._reference = PipelineReference.find(pipeline)
        elif self._signal is None:
            self._own_signal = self._signal = context["signal"] = threading.Event()
        self._context = context

    def _start(self, index: int, options: Any) -> concurrent.futures.Future[PipelineRun]:
        context = self._context
        if self._key is not None:
            context = {**context, "execution_key": self._key(options)}
        if self._reference is None:
            return self._executor.submit(self._pipeline.run, options, context=context)
        return self._executor.submit(_run_remote, self._reference, options, context, index)

    def results(self, inputs: Iterable[Any]) -> Iterator[tuple[int, PipelineRun]]:
        pending: dict[concurrent.futures.Future[PipelineRun], int] = {}
        source = enumerate(inputs)
        finished = False
        try:
            for index, options in source:
                pending[self._start(index, options)] = index
                if len(pending) >= self._width:
                    break
            while pending:
                done, _ = concurrent.futures.wait(
                    pending, return_when=concurrent.futures.FIRST_COMPLETED
                )
                for future in done:
                    index = pending.pop(future)
                    yield index, future.result()
                    if self._signal is not None and self._signal.is_set():
                        continue
                    for index, options in source:
                        pending[self._start(index, options)] = index
                        break
            finished = True
        finally:
            self._end(pending, finished)

    def _end(self, pending: Mapping[concurrent.futures.Future[Any], int], finished: bool) -> None:
        if not finished:
            for future in pending:
                future.cancel()
            if self._own_signal is not None:
                self._own_signal.set()
        concurrent.futures.wait(pending)
        if self._owned:
            self._executor.shutdown(wait=True)
