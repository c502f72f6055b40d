"""argparse, made strict: errors raise instead of exiting, and help is an exception too."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any, NoReturn

from tubeless.errors import CliHelpRequested, CliUsageError

__all__ = ["HelpAction", "StrictArgumentParser", "as_sentence", "help_text"]


def as_sentence(message: str) -> str:
    """Start `message` with a capital letter and end it with a full stop."""
    text = message.strip()
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else f"{text}."


def help_text(text: str) -> str:
    """Escape `%` so argparse's help formatting leaves `text` as it is."""
    return text.replace("%", "%%")


class HelpAction(argparse.Action):
    """`-h`/`--help`: raise `CliHelpRequested` with the parser's help instead of exiting."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        kwargs.setdefault("help", "Show this help message and exit.")
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        raise CliHelpRequested(parser.format_help())


class StrictArgumentParser(argparse.ArgumentParser):
    """An `ArgumentParser` that never exits and never guesses.

    Abbreviated long options are refused, and every parse error raises `CliUsageError`
    (carrying the parser's help) instead of printing and calling `sys.exit(2)`: exit code 2
    means "could not load" in tubeless. Subparsers made from it are strict too.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("exit_on_error", False)
        kwargs.setdefault("add_help", False)
        super().__init__(*args, **kwargs)
        if not self.add_help:
            self.add_argument("-h", "--help", action=HelpAction)

    def error(self, message: str) -> NoReturn:
        """Raise `CliUsageError` for `message` instead of printing it and exiting."""
        raise CliUsageError([as_sentence(message)], self.format_help())

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        """Raise `CliUsageError` instead of exiting (argparse calls this only on errors)."""
        raise CliUsageError([as_sentence(message or "Invalid arguments")], self.format_help())

    def parse_strictly(self, argv: Sequence[str]) -> argparse.Namespace:
        """Parse every token of `argv`, raising `CliUsageError` for anything unparsed.

        Raises:
            CliUsageError: for an unknown option, a missing or malformed value, a missing
                required option, or a leftover argument.
            CliHelpRequested: when `-h`/`--help` is among the tokens.
        """
        try:
            return self.parse_args(list(argv))
        except argparse.ArgumentError as error:
            self.error(str(error))
