"""Tests for `get_parser`: the whole `tubeless` parser, built without side effects."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import pytest

from tubeless.cli import get_parser


def _parsers(
    parser: argparse.ArgumentParser, prog: str = "tubeless"
) -> dict[str, argparse.ArgumentParser]:
    found = {prog: parser}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.update(_parsers(sub, f"{prog} {name}"))
    return found


def test_building_the_parser_has_no_side_effects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """`get_parser()` prints nothing, writes nothing and returns a fresh parser each time."""
    monkeypatch.chdir(tmp_path)
    first, second = get_parser(), get_parser()
    assert first is not second
    assert os.listdir(tmp_path) == []
    assert capsys.readouterr() == ("", "")


def test_the_parser_has_every_command() -> None:
    """The parser holds every command: list ... approvals, batch, and mcp lock."""
    assert list(_parsers(get_parser())) == [
        "tubeless",
        "tubeless list",
        "tubeless inspect",
        "tubeless plan",
        "tubeless graph",
        "tubeless run",
        "tubeless history",
        "tubeless export",
        "tubeless export otel",
        "tubeless approvals",
        "tubeless batch",
        "tubeless mcp",
        "tubeless mcp lock",
    ]


def test_every_option_has_sentence_style_help() -> None:
    """Each argument's help starts with a capital letter and ends with a full stop."""
    for prog, parser in _parsers(get_parser()).items():
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                helps = [choice.help for choice in action._choices_actions]
            else:
                helps = [action.help]
            for text in helps:
                assert text, f"{prog} {action.dest} has no help"
                assert text[0].isupper() and text.endswith("."), (prog, text)


def test_program_parsing_is_strict() -> None:
    """Abbreviations are refused and errors raise instead of exiting."""
    from tubeless.errors import CliUsageError

    plan = _parsers(get_parser())["tubeless plan"]
    with pytest.raises(CliUsageError) as caught:
        plan.parse_args(["--expl", "x.py"])  # an abbreviation of --explain
    assert caught.value.errors[0].startswith("Unrecognized arguments: --expl")
    assert caught.value.help_text.startswith("usage: tubeless plan")
