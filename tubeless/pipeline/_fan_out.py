"""Fan-out: one child run per item, bounded, results in input order (`for_each_pipeline`)."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tubeless._quote import quote, quote_list
from tubeless.errors import (
    ChildPipelineError,
    ErrorCause,
    FanOutDiagnostics,
    FanOutFailure,
    RunCancelledError,
    normalize_cause,
)
from tubeless.pipeline._child_progress import FanOutProgress
from tubeless.pipeline._child_runs import (
    observed,
    record_lock,
    resolved_controls,
    run_child,
)
from tubeless.pipeline._classify import is_cancellation
from tubeless.pipeline._handler_context import (
    StepContext,
    cancellation_message,
    raise_if_cancelled,
)
from tubeless.pipeline._pool import run_lazily

if TYPE_CHECKING:
    from tubeless.pipeline._define import Pipeline

FAN_OUT_FAILURE_LIMIT = 32
_TEXT_LIMIT = 1024


class FanOutRunner:
    """The handler of a `for_each_pipeline` step."""

    def __init__(
        self,
        *,
        step_id: str,
        pipeline: Pipeline,
        items: Callable[[Mapping[str, Any], StepContext], Sequence[Any]],
        key: Callable[[Any, int], str],
        map_options: Callable[[Any, int, Mapping[str, Any], StepContext], Any] | None,
        concurrency: int | Callable[[Mapping[str, Any], StepContext], int],
        controls: object,
        map_result: Callable[[Any, Any, Any, int, StepContext], Any] | None,
        progress: Mapping[str, Any],
    ) -> None:
        """Run `pipeline` once per item of `items(inputs, context)`, keyed by `key(item, index)`.

        `controls` is static controls or `controls(item, index, inputs, context)`;
        `progress` may set `item_noun` and `detail_limit` of the progress rows.
        """
        self.step_id = step_id
        self.pipeline = pipeline
        self.items = items
        self.key = key
        self.map_options = map_options
        self.concurrency = concurrency
        self.controls = controls
        self.map_result = map_result
        self.progress = dict(progress)

    def _keys(self, items: Sequence[Any]) -> list[str]:
        keys = [self.key(item, index) for index, item in enumerate(items)]
        for key in keys:
            if not isinstance(key, str):
                raise ChildPipelineError(
                    f"Mapped child pipeline {self.pipeline.id} key must return a string, "
                    f"got {quote(key)}"
                )
        duplicates = sorted(key for key, count in Counter(keys).items() if count > 1)
        if duplicates:
            raise ChildPipelineError(
                f"Mapped child pipeline {self.pipeline.id} received duplicate item keys: "
                f"{quote_list(duplicates)}"
            )
        return keys

    def _concurrency(self, inputs: Mapping[str, Any], context: StepContext) -> int:
        value = (
            self.concurrency(inputs, context) if callable(self.concurrency) else self.concurrency
        )
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ChildPipelineError(
                f"Mapped child pipeline {self.pipeline.id} concurrency must be a positive "
                f"integer, got {value!r}"
            )
        return value

    def __call__(self, inputs: Mapping[str, Any], context: StepContext) -> list[Any]:
        items = list(self.items(inputs, context))
        keys = self._keys(items)
        concurrency = self._concurrency(inputs, context)
        progress = None
        if observed(context):
            progress = FanOutProgress(
                keys,
                len(self.pipeline.step_ids),
                context.offer_progress,
                item_noun=str(self.progress.get("item_noun", "items")),
                detail_limit=int(self.progress.get("detail_limit", 32)),
                lock=record_lock(context),
            )
            progress.publish()
        batch = _FanOutBatch(self, items, keys, inputs, context, progress)
        signal = context.signal
        run_lazily(len(items), concurrency, batch.run_item, lambda: not batch.stop_if(signal))
        return batch.results()


class _FanOutBatch:
    """The state of one fan-out: results in input order and failures."""

    def __init__(
        self,
        runner: FanOutRunner,
        items: list[Any],
        keys: list[str],
        inputs: Mapping[str, Any],
        context: StepContext,
        progress: FanOutProgress | None,
    ) -> None:
        self._runner = runner
        self._items = items
        self._keys = keys
        self._inputs = inputs
        self._context = context
        self._progress = progress
        self._values: list[Any] = [None] * len(items)
        self._failures: list[tuple[int, BaseException]] = []
        self._lock = threading.Lock()
        self._scheduler_error: RunCancelledError | None = None

    def stop_if(self, signal: threading.Event) -> bool:
        if signal.is_set() and self._scheduler_error is None:
            self._scheduler_error = RunCancelledError(cancellation_message(signal))
        return signal.is_set()

    def run_item(self, index: int) -> None:
        runner, context, key, item = (
            self._runner,
            self._context,
            self._keys[index],
            self._items[index],
        )
        try:
            raise_if_cancelled(context.signal)
            options = (
                runner.map_options(item, index, self._inputs, context)
                if runner.map_options
                else context.options
            )
            controls = resolved_controls(
                runner.controls, context, item, index, self._inputs, context
            )
            plan = runner.pipeline.plan(controls)
            hooks = [self._progress.track(key, plan)] if self._progress else []
            result = run_child(
                context,
                runner.pipeline,
                options,
                controls=controls,
                plan=plan,
                hooks=hooks,
                item_key=key,
            )
            value = result.value
            if runner.map_result:
                value = runner.map_result(value, result, item, index, context)
            self._values[index] = value
            if self._progress:
                self._progress.settle(key, "completed")
        except Exception as error:
            with self._lock:
                self._failures.append((index, error))
            if self._progress:
                cancelled = is_cancellation(error, context.signal)
                self._progress.settle(key, "cancelled" if cancelled else "failed")

    def results(self) -> list[Any]:
        if not self._failures and self._scheduler_error is None:
            return self._values
        raise self._error()

    def _error(self) -> ChildPipelineError:
        signal = self._context.signal
        failures = sorted(self._failures, key=lambda entry: entry[0])
        cancelled = all(is_cancellation(error, signal) for _, error in failures)
        primary = next((e for _, e in failures if not is_cancellation(e, signal)), None)
        primary = primary or (failures[0][1] if failures else self._scheduler_error)
        pipeline_id = self._runner.pipeline.id
        if failures:
            details = "; ".join(f"{self._keys[i]}: {e}" for i, e in failures)
            message = (
                f"Mapped child pipeline {pipeline_id} failed for {len(failures)} item(s): {details}"
            )
        else:
            message = f"Mapped child pipeline {pipeline_id} failed: {self._scheduler_error}"
        error = ChildPipelineError(
            message,
            cancelled=cancelled,
            fan_out=self._diagnostics(failures),
            item_errors=tuple(e for _, e in failures),
        )
        error.__cause__ = primary
        return error

    def _diagnostics(self, failures: list[tuple[int, BaseException]]) -> FanOutDiagnostics:
        signal = self._context.signal
        kept = [
            FanOutFailure(
                index=index,
                key=self._keys[index][:_TEXT_LIMIT],
                key_truncated=len(self._keys[index]) > _TEXT_LIMIT,
                cancelled=is_cancellation(error, signal),
                error=_bounded_cause(error),
            )
            for index, error in failures[:FAN_OUT_FAILURE_LIMIT]
        ]
        return FanOutDiagnostics(
            failures=tuple(kept),
            failure_count=len(failures),
            omitted_failure_count=len(failures) - len(kept),
        )


def _bounded(link: ErrorCause | None) -> ErrorCause | None:
    if link is None:
        return None
    return ErrorCause(
        message=link.message[:_TEXT_LIMIT],
        name=None if link.name is None else link.name[:_TEXT_LIMIT],
        source_code=None if link.source_code is None else link.source_code[:_TEXT_LIMIT],
        cause=_bounded(link.cause),
    )


def _bounded_cause(error: BaseException) -> ErrorCause:
    """The error's cause chain with every string cut to 1024 characters."""
    bounded = _bounded(normalize_cause(error))
    assert bounded is not None
    return bounded
