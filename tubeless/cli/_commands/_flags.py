"""One command-line parameter: its argparse option, its help, and how its value resolves."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
from collections.abc import Mapping
from typing import Any, Literal

from tubeless._frozen import FrozenDict
from tubeless.cli._argparse import help_text

__all__ = [
    "ABSENT",
    "NO_DEFAULT",
    "CliParameter",
    "ParameterType",
    "flag_for",
    "parse_number",
]

ParameterType = Literal["string", "number", "boolean"]


class _Marker:
    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


NO_DEFAULT: Any = _Marker("NO_DEFAULT")
"""`CliParameter.default` when the parameter has no default."""
ABSENT: Any = _Marker("ABSENT")
"""What `CliParameter.resolve` returns for an optional parameter that was not given."""

_CAMEL_HUMP = re.compile(r"([a-z0-9])([A-Z])")


def flag_for(key: str) -> str:
    """The default flag of a key: kebab-case (`maxItems` and `max_items` give `max-items`)."""
    return _CAMEL_HUMP.sub(r"\1-\2", key).replace("_", "-").lower()


def _number_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def parse_number(
    text: str, *, integer: bool, minimum: float | None, maximum: float | None
) -> int | float:
    """Read a number from `text`.

    Raises:
        ValueError: saying what is wrong without repeating the text ("must be an integer").
    """
    value: int | float
    try:
        value = int(text)
    except ValueError:
        try:
            value = float(text)
        except ValueError:
            raise ValueError("must be a number") from None
        if not math.isfinite(value):
            raise ValueError("must be a number") from None
        if integer and not value.is_integer():
            raise ValueError("must be an integer") from None
        if integer:
            value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"must be at least {_number_text(minimum)}")
    if maximum is not None and value > maximum:
        raise ValueError(f"must be at most {_number_text(maximum)}")
    return value


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CliParameter:
    """One flag of a pipeline command and the value key it fills."""

    key: str
    """The key in the parsed values (a schema property name or a built-in control)."""
    flag: str
    """The long option without its dashes (`max-items` for `--max-items`)."""
    type: ParameterType
    """`string`, `number` or `boolean`."""
    multiple: bool = False
    """A repeatable flag collecting a list (strings or numbers only)."""
    optional: bool = False
    """May be left out: the key is then absent from the values (`[]` for a repeatable flag)."""
    default: Any = NO_DEFAULT
    """The value when neither the command line nor the environment gives one."""
    choices: tuple[str, ...] | None = None
    """The allowed strings, for a string flag."""
    integer: bool = False
    """Only whole numbers, for a number flag."""
    minimum: float | None = None
    """The smallest allowed number."""
    maximum: float | None = None
    """The largest allowed number."""
    description: str | None = None
    """What the flag means, for the help."""
    env: str | None = None
    """An environment variable read when the flag is not given (never echoed in errors)."""
    short: str | None = None
    """A one-letter alias (`q` for `-q`)."""
    group: str | None = None
    """`execution` for the built-in run controls."""
    exclusive: bool = False
    """Cannot be combined with another exclusive flag (`--step` and `--target`)."""
    metavar: str | None = None
    """How the help names the flag's value."""

    @property
    def required(self) -> bool:
        """Whether the flag must be given (not boolean, optional, defaulted or from env).

        A repeatable flag is required unless `optional`: an array the options schema
        requires must be given at least once.
        """
        return (
            self.type != "boolean"
            and not self.optional
            and self.default is NO_DEFAULT
            and self.env is None
        )

    def option_strings(self) -> tuple[str, ...]:
        """Every option string the flag takes (`--no-x` included for a boolean)."""
        names = [f"--{self.flag}"]
        if self.type == "boolean":
            names.append(f"--no-{self.flag}")
        if self.short:
            names.insert(0, f"-{self.short}")
        return tuple(names)

    def to_dict(self) -> FrozenDict:
        """The read-only, JSON-safe descriptor of the flag (camelCase field names)."""
        out: dict[str, Any] = {
            "key": self.key,
            "flag": self.flag,
            "type": self.type,
            "required": self.required,
            "multiple": self.multiple,
            "positional": False,
        }
        optional = {
            "group": self.group,
            "exclusive": True if self.exclusive else None,
            "choices": self.choices,
            "default": self._descriptor_default(),
            "description": self.description,
            "environment": self.env,
            "integer": True if self.integer else None,
            "min": self.minimum,
            "max": self.maximum,
            "short": self.short,
        }
        out.update((key, value) for key, value in optional.items() if value is not None)
        return FrozenDict(out)

    def _descriptor_default(self) -> Any:
        if self.default is not NO_DEFAULT:
            return self.default
        return False if self.type == "boolean" else None

    def help(self) -> str:
        """The flag's help: its description and constraints, as one sentence."""
        text = (self.description or f"The {self.key} option").strip().rstrip(".")
        details: list[str] = []
        if self.integer:
            details.append("an integer")
        if self.minimum is not None:
            details.append(f"at least {_number_text(self.minimum)}")
        if self.maximum is not None:
            details.append(f"at most {_number_text(self.maximum)}")
        if self.multiple:
            details.append("repeatable")
        if self.default is not NO_DEFAULT and not self.multiple:
            details.append(f"default: {json.dumps(self.default, ensure_ascii=False)}")
        elif self.required:
            details.append("required")
        if self.env:
            details.append(f"environment variable {self.env}")
        suffix = f" ({'; '.join(details)})" if details else ""
        return help_text(f"{text}{suffix}.")

    def add_to(self, container: argparse._ActionsContainer) -> None:
        """Add the flag to an argparse parser or argument group.

        Every argparse default is `None`, meaning "not given": `resolve` applies the
        environment and the default afterwards, so they never show as parsed values.
        """
        names = [f"-{self.short}", f"--{self.flag}"] if self.short else [f"--{self.flag}"]
        options: dict[str, Any] = {"dest": self.key, "default": None, "help": self.help()}
        if self.type == "boolean":
            options["action"] = argparse.BooleanOptionalAction
        else:
            options["metavar"] = self.metavar or self.flag.upper().replace("-", "_")
            if self.choices is not None:
                options["choices"] = list(self.choices)
            if self.type == "number":
                options["type"] = _NumberArgument(self)
            if self.multiple:
                options["action"] = "append"
            options["required"] = self.required
        container.add_argument(*names, **options)

    def resolve(self, given: Any, environ: Mapping[str, str], errors: list[str]) -> Any:
        """The flag's value: the command line, then the environment, then the default.

        Problems are appended to `errors` (an environment value is never repeated there).
        Returns `ABSENT` for an optional flag with no value.
        """
        if given is not None:
            return given
        if self.env is not None and self.env in environ:
            return self._from_environment(environ[self.env], errors)
        if self.default is not NO_DEFAULT:
            return list(self.default) if isinstance(self.default, list) else self.default
        if self.multiple and self.optional:
            return []
        if self.type == "boolean":
            return False
        if not self.optional:
            errors.append(f"Missing required option --{self.flag}.")
        return ABSENT

    def _from_environment(self, text: str, errors: list[str]) -> Any:
        source = f"Environment variable {self.env}"
        if self.type == "boolean":
            if text.strip().lower() in ("true", "false"):
                return text.strip().lower() == "true"
            errors.append(f"{source} must be true or false.")
            return ABSENT
        if self.type == "number":
            try:
                return parse_number(
                    text, integer=self.integer, minimum=self.minimum, maximum=self.maximum
                )
            except ValueError as error:
                errors.append(f"{source} {error}.")
                return ABSENT
        if self.choices is not None and text not in self.choices:
            errors.append(f"{source} must be one of: {', '.join(self.choices)}.")
            return ABSENT
        return text


class _NumberArgument:
    """The argparse `type` of a number flag: reads and checks one value."""

    __slots__ = ("_parameter",)

    def __init__(self, parameter: CliParameter) -> None:
        self._parameter = parameter

    def __call__(self, text: str) -> int | float:
        parameter = self._parameter
        try:
            return parse_number(
                text,
                integer=parameter.integer,
                minimum=parameter.minimum,
                maximum=parameter.maximum,
            )
        except ValueError as error:
            raise argparse.ArgumentTypeError(f"{error}, got {text!r}") from None
