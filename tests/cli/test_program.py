"""Tests for the `tubeless` entry point: command dispatch, help and usage errors."""

from __future__ import annotations

from typing import Any

import pytest

from tubeless.cli import main


@pytest.mark.parametrize("flag", ["--help", "-h", "help"])
def test_help_in_every_spelling_exits_0(flag: str, capsys: Any) -> None:
    """`--help`, `-h` and `help` print the overview on stdout and exit 0."""
    assert main([flag]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("usage: tubeless [-h] [-V] COMMAND ...")
    for command in ("list", "inspect", "plan", "graph", "run", "history"):
        assert f"\n    {command} " in captured.out
    assert captured.err == ""


@pytest.mark.parametrize("command", ["list", "inspect", "plan", "graph", "run", "history"])
def test_every_command_has_help(command: str, capsys: Any) -> None:
    """`tubeless <command> --help` and `tubeless help <command>` print that command's help."""
    assert main([command, "--help"]) == 0
    direct = capsys.readouterr().out
    assert main(["help", command]) == 0
    assert capsys.readouterr().out == direct
    assert direct.startswith(f"usage: tubeless {command} ")


def test_no_command_is_a_usage_error(capsys: Any) -> None:
    """Without a command the CLI exits 1 with the overview on stderr."""
    assert main([]) == 1
    captured = capsys.readouterr()
    assert captured.err.startswith("Error: Pass a command.\n\nusage: tubeless")
    assert captured.out == ""


def test_an_unknown_command_is_a_usage_error(capsys: Any) -> None:
    """An unknown command exits 1 and names it."""
    assert main(["frobnicate"]) == 1
    assert capsys.readouterr().err.startswith('Error: Unknown command "frobnicate".\n')


@pytest.mark.parametrize(
    "args",
    [
        ["plan", "--bogus", "x.py"],
        ["plan"],
        ["inspect", "a.py", "b.py"],
        ["graph", "--dir", "LR", "x.py"],
        ["list", "extra"],
    ],
)
def test_bad_program_arguments_exit_1_with_usage(args: list[str], capsys: Any) -> None:
    """Unknown or abbreviated flags and wrong positionals exit 1 with the command's usage."""
    assert main(args) == 1
    err = capsys.readouterr().err
    assert err.startswith("Error: ")
    assert f"\n\nusage: tubeless {args[0]}" in err
    assert "Traceback" not in err


def test_python_dash_m_tubeless_runs_main(cli: Any) -> None:
    """`python -m tubeless` runs the same CLI and exits with its code."""
    result = cli("frobnicate")
    assert result.code == 1
    assert result.stderr.startswith('Error: Unknown command "frobnicate".')
