"""A pipeline command's arguments: its argparse parser, its values and its descriptor."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from tubeless._frozen import FrozenDict
from tubeless.cli._argparse import StrictArgumentParser, help_text
from tubeless.cli._commands._flags import ABSENT, CliParameter
from tubeless.cli._commands._options import CONTROL_KEYS
from tubeless.errors import CliValidationError

__all__ = ["CommandArguments"]

Configure = Callable[[argparse.ArgumentParser], None]
Validate = Callable[[dict[str, Any]], Iterable[str] | None]


def _check_domain(domain: Sequence[CliParameter], builtins: Sequence[CliParameter]) -> None:
    owners: dict[str, str] = {"-h": "help", "--help": "help"}
    for parameter in builtins:
        owners.update(dict.fromkeys(parameter.option_strings(), parameter.key))
    reserved = set(owners)
    for parameter in domain:
        if parameter.key in CONTROL_KEYS:
            raise ValueError(
                f'"{parameter.key}" is a reserved parameter provided automatically by pipeline '
                "commands; rename the option or supply explicit params with configure="
            )
        for option in parameter.option_strings():
            if option in reserved:
                raise ValueError(
                    f"{option} is a reserved flag provided automatically by pipeline commands; "
                    f'give "{parameter.key}" a different flag in overrides'
                )
            if option in owners:
                raise ValueError(
                    f'Duplicate {option} flag: both "{owners[option]}" and "{parameter.key}" '
                    "resolve to it"
                )
            owners[option] = parameter.key


def _action_type(action: argparse.Action) -> str:
    if action.nargs == 0:
        return "boolean"
    converter = action.type
    if converter in (int, float) or getattr(converter, "__name__", "") in ("int", "float"):
        return "number"
    return "string"


def describe_action(action: argparse.Action) -> FrozenDict:
    """The descriptor of a flag added by a `configure` callback."""
    long_names = [name for name in action.option_strings if name.startswith("--")]
    short_names = [name for name in action.option_strings if not name.startswith("--")]
    out: dict[str, Any] = {
        "key": action.dest,
        "flag": (long_names[0][2:] if long_names else action.dest),
        "type": _action_type(action),
        "required": bool(action.required),
        "multiple": isinstance(action, argparse._AppendAction) or action.nargs in ("*", "+"),
        "positional": not action.option_strings,
    }
    if action.choices is not None:
        out["choices"] = tuple(str(choice) for choice in action.choices)
    if action.default is not None and action.default is not argparse.SUPPRESS:
        out["default"] = action.default
    if action.help and action.help is not argparse.SUPPRESS:
        out["description"] = action.help
    if short_names:
        out["short"] = short_names[0][1:]
    return FrozenDict(out)


class CommandArguments:
    """Builds a command's parser and turns argv into checked values.

    Args:
        name: the program name in usage lines.
        description: shown under the usage line.
        domain: inferred flags (empty in explicit mode).
        builtins: the run-control flags.
        configure: explicit mode: adds the command's own arguments to a fresh parser.
        validate: extra checks on the parsed values, returning error strings.
        controls_note: shown above the run controls in the help (what they mean here).

    Raises:
        ValueError: for a reserved or duplicate flag, or a `configure` that fails.
    """

    def __init__(
        self,
        *,
        name: str,
        description: str | None,
        domain: tuple[CliParameter, ...],
        builtins: tuple[CliParameter, ...],
        configure: Configure | None,
        validate: Validate | None,
        controls_note: str | None = None,
    ) -> None:
        _check_domain(domain, builtins)
        self.name = name
        self.description = description
        self.domain = domain
        self.builtins = builtins
        self._configure = configure
        self._validate = validate
        self._controls_note = controls_note
        self._explicit_keys: tuple[str, ...] = ()
        if configure is not None:
            self._explicit_keys = self._check_configure()

    def _check_configure(self) -> tuple[str, ...]:
        try:
            _, configured = self._build()
        except argparse.ArgumentError as error:
            raise ValueError(f"configure added a conflicting argument: {error}") from error
        keys = []
        for action in configured:
            if action.dest in CONTROL_KEYS or action.dest == "help":
                raise ValueError(
                    f'configure added "{action.dest}", a reserved parameter provided '
                    "automatically by pipeline commands"
                )
            keys.append(action.dest)
        return tuple(keys)

    def _build(self) -> tuple[StrictArgumentParser, list[argparse.Action]]:
        parser = StrictArgumentParser(
            prog=self.name,
            description=None if self.description is None else help_text(self.description),
        )
        for parameter in self.domain:
            parameter.add_to(parser)
        note = None if self._controls_note is None else help_text(self._controls_note)
        controls = parser.add_argument_group("run controls", description=note)
        for parameter in self.builtins:
            parameter.add_to(controls)
        before = len(parser._actions)
        if self._configure is not None:
            self._configure(parser)
        return parser, parser._actions[before:]

    def build_parser(self) -> StrictArgumentParser:
        """Build a fresh parser (no side effects: nothing is parsed or printed)."""
        return self._build()[0]

    def descriptor(self) -> FrozenDict:
        """The read-only description of every parameter, with the command's name."""
        if self._configure is not None:
            described = [describe_action(action) for action in self._build()[1]]
        else:
            described = [parameter.to_dict() for parameter in self.domain]
        described += [parameter.to_dict() for parameter in self.builtins]
        out: dict[str, Any] = {"name": self.name}
        if self.description is not None:
            out["description"] = self.description
        out["parameters"] = tuple(described)
        return FrozenDict(out)

    def parse(self, argv: Sequence[str], environ: Mapping[str, str]) -> dict[str, Any]:
        """Parse `argv` into values: domain keys first, then the run controls.

        Raises:
            CliHelpRequested: for `-h`/`--help`.
            CliUsageError: when argparse cannot parse `argv`.
            CliValidationError: for a bad environment value, `--step` with `--target`, or
                errors returned by `validate`.
        """
        parser = self.build_parser()
        namespace = parser.parse_strictly(argv)
        errors: list[str] = []
        values: dict[str, Any] = {}
        if self._configure is not None:
            values.update((key, getattr(namespace, key, None)) for key in self._explicit_keys)
        for parameter in (*self.domain, *self.builtins):
            value = parameter.resolve(getattr(namespace, parameter.key, None), environ, errors)
            if value is not ABSENT:
                values[parameter.key] = value
        values.setdefault("targets", [])
        if errors:
            raise CliValidationError(errors, parser.format_help())
        problems = []
        if values["step_ids"] and values["targets"]:
            problems.append("--step and --target cannot be used together.")
        if self._validate is not None:
            problems += [str(problem) for problem in self._validate(values) or ()]
        if problems:
            raise CliValidationError(problems, parser.format_help())
        return values
