"""`tool_from_function`: a tool whose schemas come from a typed function, through pydantic.

pydantic is optional (the `pydantic` extra) and this module is its only importer: it is
imported when `tool_from_function` is called, never when tubeless is.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import importlib
import inspect
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tubeless._types import FunctionToolOptions, ToolOptions, check_keywords
from tubeless.agent._agent_contexts import ToolContext
from tubeless.agent._docstrings import read_docstring
from tubeless.agent._remote import RemoteToolContext
from tubeless.agent._tools import (
    AgentTool,
    check_sync_handler,
    check_tool_name,
    define_tool,
    named_tool,
)
from tubeless.errors import AgentDefinitionError, MissingExtraError

if TYPE_CHECKING:
    # Only for type checkers (annotations stay strings): `typing.Unpack` is 3.11+.
    from typing_extensions import Unpack

_MESSAGE_LIMIT = 200
_CONTEXTS = (ToolContext, RemoteToolContext)
"""Annotations of the parameter that receives the tool context instead of an argument."""


def _pydantic() -> Any:
    try:
        return importlib.import_module("pydantic")
    except ImportError:
        raise MissingExtraError(
            "tool_from_function", extra="pydantic", missing="pydantic"
        ) from None


def _bounded(text: object) -> str:
    words = " ".join(str(text).split())
    return words if len(words) <= _MESSAGE_LIMIT else words[: _MESSAGE_LIMIT - 3] + "..."


@dataclasses.dataclass(frozen=True, slots=True)
class _Parameters:
    """How a function's parameters map onto the input model's fields."""

    fields: dict[str, tuple[Any, Any]]
    """Field name -> `(annotation, FieldInfo)`, for `pydantic.create_model`."""
    positional: tuple[str | None, ...]
    """Field names of the positional-only parameters, in order (`None`: the context)."""
    keywords: dict[str, str | None]
    """Parameter name -> field name (`None`: the context) for the others."""


class _JsonInput:
    """A model look-alike whose validation returns the JSON form of the validated arguments.

    A call's validated input is plain data, so a durable agent can save it, an approval
    can show it and an executor can send it; the handler makes the typed arguments from
    it again (`_FunctionRun`).
    """

    def __init__(self, model: Any) -> None:
        self._model = model

    def validate_python(self, value: Any) -> Any:
        return self._model.model_validate(value).model_dump(mode="json", by_alias=True)

    def json_schema(self, mode: str = "validation") -> Any:
        return self._model.model_json_schema(mode=mode)


class _JsonOutput:
    """A `TypeAdapter` look-alike whose validation returns the JSON form of the value.

    Tool outputs become outcome values, which are plain data: a returned model instance
    is checked against the return annotation, then dumped in JSON mode.
    """

    def __init__(self, adapter: Any) -> None:
        self._adapter = adapter

    def validate_python(self, value: Any) -> Any:
        return self._adapter.dump_python(self._adapter.validate_python(value), mode="json")

    def json_schema(self, mode: str = "validation") -> Any:
        return self._adapter.json_schema(mode="serialization")


class _Definition:
    """The pieces of a function tool, each checked with a message naming the function."""

    def __init__(self, fn: Callable[..., Any], pydantic: Any) -> None:
        self.fn = fn
        self.pydantic = pydantic
        self.name = _bounded(getattr(fn, "__qualname__", None) or type(fn).__name__)
        try:
            self.signature = inspect.signature(fn, eval_str=True)
        except (NameError, TypeError, ValueError, SyntaxError) as error:
            problem = f"cannot read its signature ({type(error).__name__}: {error})"
            raise self.error(problem) from error
        self.docs = read_docstring(getattr(fn, "__doc__", None))

    def error(self, problem: str) -> AgentDefinitionError:
        return AgentDefinitionError(f"tool_from_function({self.name}): {_bounded(problem)}")

    def description(self, given: str | None) -> str:
        if given is not None:
            return given
        if self.docs.summary is None:
            raise self.error("no description: give description= or a docstring")
        return self.docs.summary

    def _field(self, index: int, parameter: inspect.Parameter) -> tuple[str, tuple[Any, Any]]:
        default = ... if parameter.default is inspect.Parameter.empty else parameter.default
        info = self.pydantic.Field(
            default,
            alias=parameter.name,
            description=self.docs.parameters.get(parameter.name),
        )
        return f"p{index}", (parameter.annotation, info)

    def parameters(self) -> _Parameters:
        fields: dict[str, tuple[Any, Any]] = {}
        positional: list[str | None] = []
        keywords: dict[str, str | None] = {}
        for index, parameter in enumerate(self.signature.parameters.values()):
            if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                raise self.error(f"parameter {parameter.name!r}: a tool takes named parameters")
            if parameter.annotation is inspect.Parameter.empty:
                raise self.error(f"parameter {parameter.name!r} has no type annotation")
            field: str | None = None
            if parameter.annotation not in _CONTEXTS:
                field, fields[field] = self._field(index, parameter)
            if parameter.kind is parameter.POSITIONAL_ONLY:
                positional.append(field)
            else:
                keywords[parameter.name] = field
        return _Parameters(fields, tuple(positional), keywords)

    def input_model(self, fields: dict[str, tuple[Any, Any]]) -> Any:
        config = self.pydantic.ConfigDict(extra="forbid")
        title = getattr(self.fn, "__name__", None) or type(self.fn).__name__
        try:
            return self.pydantic.create_model(str(title), __config__=config, **fields)
        except Exception as error:
            raise self.error(f"pydantic cannot model its parameters: {error}") from error

    def output(self) -> _JsonOutput:
        annotation = self.signature.return_annotation
        if annotation is inspect.Signature.empty:
            raise self.error("no return annotation")
        try:
            return _JsonOutput(self.pydantic.TypeAdapter(annotation))
        except Exception as error:
            raise self.error(f"pydantic cannot model its return value: {error}") from error


class _FunctionRun:
    """The tool's handler: the function called with typed arguments made from the input.

    It pickles as its function alone (for an executor) and models the parameters again
    where it is unpickled.
    """

    def __init__(self, fn: Callable[..., Any], parameters: _Parameters, model: Any) -> None:
        self._fn = fn
        self._parameters = parameters
        self._model = model

    def __call__(self, value: Any, context: Any) -> Any:
        typed = self._model.model_validate(value)
        parameters = self._parameters
        args = [context if f is None else getattr(typed, f) for f in parameters.positional]
        kwargs = {
            name: context if f is None else getattr(typed, f)
            for name, f in parameters.keywords.items()
        }
        return self._fn(*args, **kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        return _function_run, (self._fn,)


def _function_run(fn: Callable[..., Any]) -> _FunctionRun:
    """A function's handler, its input model made again (how `_FunctionRun` unpickles)."""
    definition = _Definition(fn, _pydantic())
    parameters = definition.parameters()
    return _FunctionRun(fn, parameters, definition.input_model(parameters.fields))


def tool_from_function(
    fn: Callable[..., Any],
    *,
    description: str | None = None,
    executor: concurrent.futures.Executor | None = None,
    **options: Unpack[ToolOptions],
) -> AgentTool:
    """Define a tool from a typed function: its schemas come from the signature, via pydantic.

    The tool's input is an object with one property per parameter (its annotation and
    default; its description from the docstring's `Args:` section); unknown properties
    are rejected. A parameter annotated `ToolContext` (or `RemoteToolContext`, with an
    executor), under any name and in any position, receives the tool context instead:
    the run's `signal` (check it in long loops), `log`, `sleep`, `report_progress`, the
    durable `execution` ids; it is not part of the input the model sees. `@tubeless.tool`
    is the decorator form, which also names the tool after the function. The validated
    input is the arguments' JSON form (what a durable agent saves, an approval shows and
    `needs_approval` gets); the function receives them typed. The output is checked
    against the return annotation and handed on in its JSON form (a returned pydantic
    model becomes a dict).

    Args:
        fn: the function; every parameter and the return value need a type annotation.
        description: what the tool does; defaults to the docstring's first paragraph.
        executor: as in `define_tool`: `fn` must pickle (a module-level function).
        **options: the `ToolOptions` (`replay`, `needs_approval`, `timeout`, `retry`), as
            in `define_tool`.

    Raises:
        MissingExtraError: `TUBELESS_EXTRA_MISSING` when pydantic is not installed
            (`pip install 'tubeless-pipelines[pydantic]'`).
        AgentDefinitionError: `TUBELESS_AGENT_INVALID_DEFINITION`, naming the function and
            what is missing, checked in this order: an `async def` function (or async
            generator), which a tool cannot be; a parameter's annotation (or a
            `*args`/`**kwargs` parameter), the return annotation, a description; or a
            type pydantic cannot model; then what `define_tool` checks (the executor and
            whether `fn` pickles, replay, needs_approval, timeout, retry).
        TypeError: for a keyword `tool_from_function` does not take.
    """
    check_keywords(options, ToolOptions, "tool_from_function")
    if not callable(fn):
        raise AgentDefinitionError("tool_from_function requires a function")
    check_sync_handler(fn, f"tool_from_function({_bounded(getattr(fn, '__qualname__', fn))})")
    definition = _Definition(fn, _pydantic())
    parameters = definition.parameters()
    output = definition.output()
    text = definition.description(description)
    model = definition.input_model(parameters.fields)
    return define_tool(
        description=text,
        input_schema=_JsonInput(model),
        output_schema=output,
        run=_FunctionRun(fn, parameters, model),
        executor=executor,
        **options,
    )


@typing.overload
def tool(fn: Callable[..., Any], /) -> AgentTool: ...


@typing.overload
def tool(
    fn: None = None, /, *, name: str | None = None, **options: Unpack[FunctionToolOptions]
) -> Callable[[Callable[..., Any]], AgentTool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    **options: Unpack[FunctionToolOptions],
) -> AgentTool | Callable[[Callable[..., Any]], AgentTool]:
    """Decorate a typed function to make it a tool named after the function.

    `@tubeless.tool` and `@tubeless.tool(replay="safe", ...)` both work; every keyword
    but `name` goes to `tool_from_function` (`description`, `executor`, `replay`,
    `needs_approval`, ...), which builds the tool. The decorated name is then the tool,
    not the function, and it carries its name (`tool.name`), so `define_agent(tools=[...])`
    takes a list of such tools; in a `tools` mapping the key names the tool instead.

    Args:
        fn: the function (when used as `@tubeless.tool` without parentheses).
        name: the tool's name (default: the function's `__name__`): letters, digits, `_`
            and `-`, starting with a letter, at most 128 characters.
        **options: the `FunctionToolOptions` for `tool_from_function`: `description`,
            `executor` and the `ToolOptions`.

    Raises:
        AgentDefinitionError: `TUBELESS_AGENT_INVALID_DEFINITION` for a name tools cannot
            have (a lambda's `<lambda>`: give `name=`), or what `tool_from_function` raises.
        MissingExtraError: as `tool_from_function`, when pydantic is not installed.
    """

    def decorate(function: Callable[..., Any]) -> AgentTool:
        tool_name = name if name is not None else getattr(function, "__name__", None)
        if not isinstance(tool_name, str):
            raise AgentDefinitionError("tubeless.tool needs name= for a callable without __name__")
        check_tool_name(tool_name)
        return named_tool(tool_from_function(function, **options), tool_name)

    return decorate if fn is None else decorate(fn)
