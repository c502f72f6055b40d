"""`define_pipeline_command`: a pipeline as a typed command-line program."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from tubeless._frozen import FrozenDict
from tubeless._types import ContextLike, ControlsLike, HooksLike
from tubeless.cli._argparse import StrictArgumentParser
from tubeless.cli._commands._flags import CliParameter
from tubeless.cli._commands._options import (
    EXECUTION_KEY_FLAG,
    agent_controls_note,
    control_parameters,
    domain_values,
    run_controls,
)
from tubeless.cli._commands._parser import CommandArguments, Configure, Validate
from tubeless.cli._commands._schema_flags import infer_parameters, unsupported
from tubeless.cli._exit import ExitCode, exit_code_for
from tubeless.cli._failure import print_failure, print_rejected, want_traceback
from tubeless.cli._interrupt import InterruptGuard
from tubeless.errors import CliHelpRequested, CliValidationError
from tubeless.pipeline import Pipeline, PipelinePlan, RunContext
from tubeless.progress import PipelineReporter, ReporterLog, create_reporter, sanitize_terminal_log

__all__ = ["SIGINT_EXIT_CODE", "PipelineCommand", "define_pipeline_command"]

SIGINT_EXIT_CODE = 130
"""What a standalone command's `main()` returns after Ctrl-C."""

_REPORTER_OPTIONS = frozenset(
    {"stream", "mode", "color", "symbols", "env", "refresh_interval", "progress_bar_width", "clock"}
)
_PIPELINE_SURFACE = ("id", "step_ids", "target_ids", "plan", "run_or_raise", "to_mermaid")

MapOptions = Callable[[dict[str, Any]], Any]
Summarize = Callable[[Any, dict[str, Any]], Iterable[str] | None]


def _text(value: object, field: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"Pipeline command {field} must be a non-blank string")
    return value


def _callable(value: object, field: str) -> None:
    if value is not None and not callable(value):
        raise TypeError(f"Pipeline command {field} must be callable")


def _reporter_options(reporter: object) -> Mapping[str, Any] | None:
    if reporter is True:
        return {}
    if reporter is False:
        return None
    if not isinstance(reporter, Mapping):
        raise TypeError("Pipeline command reporter must be True, False or a mapping")
    unknown = sorted(str(key) for key in reporter if key not in _REPORTER_OPTIONS)
    if unknown:
        raise TypeError(f"Unknown reporter options: {', '.join(unknown)}")
    return dict(reporter)


def _domain_parameters(
    pipeline: Pipeline, overrides: Mapping[str, Mapping[str, Any]] | None, explicit: bool
) -> tuple[CliParameter, ...]:
    schema = getattr(pipeline, "options_schema", None)
    if explicit or schema is None:
        if overrides:
            raise ValueError(
                "Flag overrides require inferred pipeline flags (an options schema with JSON "
                "Schema and no configure=); use configure= for an explicit CLI"
            )
        return ()
    document = schema.json_schema() if callable(getattr(schema, "json_schema", None)) else None
    if document is None:
        unsupported("pipeline options", "the options schema does not export JSON Schema")
    return infer_parameters(document, overrides)


def define_pipeline_command(
    pipeline: Pipeline,
    *,
    name: str | None = None,
    description: str | None = None,
    map_options: MapOptions | None = None,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    configure: Configure | None = None,
    validate: Validate | None = None,
    hooks: HooksLike | None = None,
    reporter: bool | Mapping[str, Any] = True,
    summarize: Summarize | None = None,
    execution_key: bool = False,
) -> PipelineCommand:
    """Turn a pipeline into a command-line program with flags and live progress.

    Without `configure`, one flag per property of the pipeline's options JSON Schema is
    inferred (`question` gives `--question`); the parsed values keep the property names
    and, minus the run controls, become the domain options. Every command also has
    `--dry-run`, `--step`, `--target` (when targets are declared), `--continue-on-error`
    and `--max-concurrency`.

    Args:
        pipeline: the pipeline to run.
        name: the program name (default: the pipeline's name, then its id).
        description: shown in the help (default: the pipeline's description).
        map_options: turns the parsed domain values (run controls removed) into options.
        overrides: inferred mode only; per property, a new `description`, `flag`,
            `short` or `env` (an environment variable read when the flag is absent).
        configure: explicit mode: adds the command's arguments to an argparse parser
            (inference is off); requires `map_options`.
        validate: extra checks on the parsed values, returning error strings.
        hooks: hook sets called after the reporter's.
        reporter: `False` for no live progress, or options for `create_reporter`.
        summarize: `summarize(value, values)` returns lines printed on stdout after success.
            Without it the finalized value is printed: a string as it is, `None` not at
            all, anything else as JSON.
        execution_key: add `--execution-key KEY`, the run context's `execution_key`: a
            durable agent run by the command starts or resumes the execution with that
            key instead of its `Durability` key.

    Raises:
        ValueError: when flags cannot be inferred ("Cannot infer CLI flags for ..."), for
            reserved or duplicate flags, or for contradictory arguments.
        TypeError: for arguments of the wrong type.
    """
    missing = [field for field in _PIPELINE_SURFACE if not hasattr(pipeline, field)]
    if missing:
        raise TypeError(f"define_pipeline_command needs a pipeline, got {pipeline!r}")
    for field, value in (
        ("map_options", map_options),
        ("configure", configure),
        ("validate", validate),
        ("summarize", summarize),
    ):
        _callable(value, field)
    if configure is not None and map_options is None:
        raise ValueError("configure= defines explicit params and requires map_options=")
    if type(execution_key) is not bool:
        raise TypeError("Pipeline command execution_key must be True or False")
    builtins = control_parameters(tuple(pipeline.step_ids), tuple(pipeline.target_ids))
    if execution_key:
        builtins = (*builtins, EXECUTION_KEY_FLAG)
    resolved_name = _text(name, "name") or _text_or_none(pipeline.name) or pipeline.id
    arguments = CommandArguments(
        name=resolved_name,
        description=_text(description, "description") or _text_or_none(pipeline.description),
        domain=_domain_parameters(pipeline, overrides, configure is not None),
        builtins=builtins,
        configure=configure,
        validate=validate,
        controls_note=agent_controls_note(pipeline),
    )
    return PipelineCommand(
        pipeline,
        arguments=arguments,
        map_options=map_options,
        hooks=hooks,
        reporter=_reporter_options(reporter),
        summarize=summarize,
    )


def _json_ready(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(key): _json_ready(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(item) for item in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump):  # a pydantic model
        return dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _json_ready(dataclasses.asdict(value))
    return value


def default_summary(value: Any) -> list[str]:
    """What a command without `summarize=` prints after success: the finalized value.

    A string is printed as it is, `None` not at all, anything else as indented JSON
    (mappings, sequences, pydantic models and dataclasses become JSON data; other
    objects their `str`).
    """
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [json.dumps(_json_ready(value), indent=2, ensure_ascii=False, default=str)]


def _text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _hook_list(hooks: object) -> list[Any]:
    if hooks is None:
        return []
    return list(hooks) if isinstance(hooks, (list, tuple)) else [hooks]


def _context_fields(context: ContextLike | None) -> dict[str, Any]:
    if context is None:
        return {}
    if isinstance(context, RunContext):
        return {
            field.name: getattr(context, field.name)
            for field in dataclasses.fields(RunContext)
            if getattr(context, field.name) is not None
        }
    if isinstance(context, Mapping):
        return dict(context)
    raise TypeError("context must be a RunContext or a dict")


def _stderr_log() -> ReporterLog:
    def emit(level: str, message: str) -> None:
        print(sanitize_terminal_log(message), file=sys.stderr, flush=True)

    return ReporterLog(emit)


class PipelineCommand:
    """A pipeline with a command line: parse argv, run, print progress and a summary.

    Build one with `define_pipeline_command`. `plan`, `to_mermaid` and the id properties
    need no arguments; `parse` turns argv into values, `execute` runs values, `run` does
    both, and `main` is a whole program that returns an exit code.
    """

    __slots__ = ("_arguments", "_descriptor", "_hooks", "_map", "_pipeline", "_reporter", "_summ")

    def __init__(
        self,
        pipeline: Pipeline,
        *,
        arguments: CommandArguments,
        map_options: MapOptions | None,
        hooks: HooksLike | None,
        reporter: Mapping[str, Any] | None,
        summarize: Summarize | None,
    ) -> None:
        self._pipeline = pipeline
        self._arguments = arguments
        self._map = map_options
        self._hooks = hooks
        self._reporter = reporter
        self._summ = summarize
        self._descriptor = arguments.descriptor()

    def __repr__(self) -> str:
        return f"PipelineCommand({self.id!r})"

    @property
    def pipeline(self) -> Pipeline:
        """The pipeline the command runs."""
        return self._pipeline

    @property
    def id(self) -> str:
        """The pipeline's id."""
        return str(self._pipeline.id)

    @property
    def name(self) -> str:
        """The program name shown in usage lines."""
        return self._arguments.name

    @property
    def description(self) -> str | None:
        """The description shown in the help."""
        return self._arguments.description

    @property
    def step_ids(self) -> tuple[str, ...]:
        """The pipeline's step ids, in definition order."""
        return tuple(self._pipeline.step_ids)

    @property
    def target_ids(self) -> tuple[str, ...]:
        """The pipeline's declared targets."""
        return tuple(self._pipeline.target_ids)

    @property
    def descriptor(self) -> FrozenDict:
        """Read-only JSON-safe description: `name`, `description`, `parameters`."""
        return self._descriptor

    @property
    def parser(self) -> StrictArgumentParser:
        """A fresh argparse parser for the command (building it has no side effects)."""
        return self._arguments.build_parser()

    def plan(self, controls: ControlsLike | None = None) -> PipelinePlan:
        """Plan the pipeline structurally: no parsing and no domain options."""
        plan: PipelinePlan = self._pipeline.plan(controls)
        return plan

    def to_mermaid(self, direction: str = "TD", include_descriptions: bool = False) -> str:
        """The pipeline's static graph as a Mermaid flowchart."""
        return str(self._pipeline.to_mermaid(direction, include_descriptions))

    def parse(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> dict[str, Any]:
        """Parse `argv` into values (domain keys, then the run controls).

        Args:
            argv: the command's arguments, without the program name.
            env: where environment-backed flags are read (default `os.environ`).

        Raises:
            CliHelpRequested: for `-h`/`--help`.
            CliUsageError: when argv cannot be parsed (an unknown flag, a bad value, ...).
            CliValidationError: for `--step` with `--target`, a bad environment value, or
                errors from `validate`.
        """
        return self._arguments.parse(argv, os.environ if env is None else env)

    def execute(self, values: Mapping[str, Any], *, context: ContextLike | None = None) -> Any:
        """Run the pipeline with parsed `values`; print the summary lines after success.

        The summary is `summarize(value, values)`, or without `summarize=` the finalized
        value itself (see `define_pipeline_command`).

        The run's context is `context` with the reporter's logger as `log` and the hooks
        `[context hooks, reporter hooks, configured hooks]`. The reporter is always closed.

        Raises:
            PipelineExecutionError: when the run did not complete.
        """
        parsed = dict(values)
        domain = domain_values(parsed)
        options = self._map(domain) if self._map is not None else domain
        fields = _context_fields(context)
        reporter = self._open_reporter()
        hooks = _hook_list(fields.get("hooks"))
        if reporter is not None:
            hooks.append(reporter.hooks)
            fields["log"] = reporter.log
        elif fields.get("log") is None:
            fields["log"] = _stderr_log()
        hooks += _hook_list(self._hooks)
        fields["hooks"] = hooks or None
        if parsed.get(EXECUTION_KEY_FLAG.key) is not None:
            fields["execution_key"] = parsed[EXECUTION_KEY_FLAG.key]
        try:
            value = self._pipeline.run_or_raise(
                options, controls=run_controls(parsed), context=fields
            )
        finally:
            if reporter is not None:
                reporter.close()
        lines = self._summ(value, parsed) if self._summ is not None else default_summary(value)
        for line in lines or ():
            print(line, file=sys.stdout, flush=True)
        return value

    def run(self, argv: Sequence[str], *, context: ContextLike | None = None) -> Any:
        """Parse `argv` and execute the values; raises what `parse` and `execute` raise."""
        return self.execute(self.parse(argv), context=context)

    def main(self, argv: Sequence[str] | None = None) -> int:
        """Run as a whole program: print help or errors and return an exit code.

        Help exits 0, rejected arguments 4 (errors then the help on stderr), a failed run
        6 (or 5 for planning errors, 7 when cancelled), with one `Error:` line per root
        cause (and, with `TUBELESS_TRACEBACK=1`, its traceback). The first Ctrl-C cancels
        the run and the result is 130.
        """
        try:
            values = self.parse(sys.argv[1:] if argv is None else argv)
        except CliHelpRequested as request:
            print(request.help_text.rstrip("\n"), file=sys.stdout, flush=True)
            return ExitCode.SUCCESS
        except CliValidationError as rejected:
            print_rejected(rejected, sys.stderr)
            return ExitCode.VALIDATION
        run_signal = threading.Event()
        code: int = ExitCode.SUCCESS
        with InterruptGuard(run_signal) as guard:
            try:
                self.execute(values, context={"signal": run_signal})
            except Exception as error:
                print_failure(error, sys.stderr, show_traceback=want_traceback())
                code = exit_code_for(error)
        return SIGINT_EXIT_CODE if guard.interrupted else int(code)

    def _open_reporter(self) -> PipelineReporter | None:
        if self._reporter is None:
            return None
        return create_reporter(**self._reporter)
