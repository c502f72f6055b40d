"""Tests for terminal-safe text, durations, colour and mode decisions."""

from __future__ import annotations

import io
import os

import pytest

from tubeless.progress._terminal import (
    SYMBOL_SETS,
    Theme,
    color_enabled,
    format_count,
    format_duration,
    format_number,
    interactive_allowed,
    sanitize_terminal_log,
    sanitize_terminal_text,
    stream_is_tty,
    stream_is_utf8,
)


@pytest.mark.parametrize(
    ("ms", "expected"),
    [
        (0, "0ms"),
        (-5, "0ms"),
        (0.4, "0ms"),
        (0.5, "1ms"),
        (999, "999ms"),
        (999.4, "999ms"),
        (999.5, "1s"),
        (1000, "1s"),
        (1049, "1s"),
        (1050, "1.1s"),
        (1234, "1.2s"),
        (2000, "2s"),
        (59_900, "59.9s"),
        (59_949, "59.9s"),
        (59_950, "1m"),
        (60_000, "1m"),
        (61_000, "1m1s"),
        (90_500, "1m31s"),
        (119_499, "1m59s"),
        (119_500, "2m"),
        (3_600_000, "60m"),
        (float("nan"), "0ms"),
        (float("inf"), "0ms"),
    ],
)
def test_format_duration(ms: float, expected: str) -> None:
    """Durations print as ms, one-decimal seconds or minutes, rounding half up with carry."""
    assert format_duration(ms) == expected


def test_format_number_and_count() -> None:
    """Counts print without a spurious `.0`; bar counts keep one decimal for fractions."""
    assert format_number(4) == "4"
    assert format_number(4.0) == "4"
    assert format_number(2.5) == "2.5"
    assert format_count(12) == "12"
    assert format_count(12.0) == "12"
    assert format_count(2.25) == "2.2"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("plain text", "plain text"),
        ("\x1b[31mred\x1b[0m text", "red text"),
        ("Skip\x1b]2;owned\x07 Step", "Skip Step"),
        ("see \x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\ here", "see link here"),
        ("Fail\x1bPsecret\x1b\\ Step", "Fail Step"),
        ("apc\x1b_hidden\x1b\\ end", "apc end"),
        ("cached\x1b[?2004h safely", "cached safely"),
        ("one\trow\x9b31m", "one row"),
        ("c1 osc\x9d0;title\x9c end", "c1 osc end"),
        ("bell\x07 and backspace\x08", "bell and backspace"),
        ("Read\nrows\r\nnow", "Read rows now"),
        ("  padded \n", "padded"),
        ("evil\u202etxt.exe", "eviltxt.exe"),
        ("iso\u2066late\u2069d \u200fmark", "isolated mark"),
        ("lone escape \x1b", "lone escape"),
        ("nested \x1b\x1b[31m[31m", "nested 31m"),
        ("charset \x1b(Bback", "charset back"),
        ("del\x7f", "del"),
        ("unterminated \x1b]2;title", "unterminated 2;title"),
    ],
)
def test_sanitize_terminal_text(raw: str, expected: str) -> None:
    """Escape sequences, control and bidi characters vanish; whitespace folds to one line."""
    assert sanitize_terminal_text(raw) == expected


def test_sanitize_terminal_text_never_leaves_an_escape() -> None:
    """Whatever the input, no ESC or CSI byte survives sanitising."""
    nasty = "".join(chr(code) for code in range(0xA0)) * 3 + "\x1b[" + "\x1b]"
    cleaned = sanitize_terminal_text(nasty)
    assert "\x1b" not in cleaned
    assert "\x9b" not in cleaned
    assert all(not (0 <= ord(char) < 0x20 or 0x7F <= ord(char) < 0xA0) for char in cleaned)


def test_sanitize_terminal_log_keeps_line_breaks() -> None:
    """The log form keeps lines (CRLF and CR become LF) but strips everything else."""
    raw = "first\r\nsecond\rthird\tcolumn \x1b[2Jx\x01y\u202e\nlast"
    assert sanitize_terminal_log(raw) == "first\nsecond\nthird column xy\nlast"


@pytest.mark.parametrize(
    ("env", "is_tty", "expected"),
    [
        ({}, True, True),
        ({}, False, False),
        ({"TERM": "dumb"}, True, False),
        ({"NO_COLOR": "1"}, True, False),
        ({"NO_COLOR": ""}, True, False),
        ({"FORCE_COLOR": "1"}, False, True),
        ({"FORCE_COLOR": ""}, False, True),
        ({"FORCE_COLOR": "0"}, True, False),
        ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, False, True),
        ({"FORCE_COLOR": "1", "TERM": "dumb"}, False, True),
        ({"TERM": "xterm-256color"}, True, True),
    ],
)
def test_color_enabled(env: dict[str, str], is_tty: bool, expected: bool) -> None:
    """FORCE_COLOR wins; otherwise colour needs a TTY, no NO_COLOR and a non-dumb TERM."""
    assert color_enabled(env, is_tty) is expected


@pytest.mark.parametrize(
    ("env", "is_tty", "expected"),
    [
        ({}, True, True),
        ({}, False, False),
        ({"CI": ""}, True, True),
        ({"CI": "0"}, True, True),
        ({"CI": "false"}, True, True),
        ({"CI": "true"}, True, False),
        ({"CI": "1"}, True, False),
        ({"CI": "yes"}, True, False),
        ({"TERM": "dumb"}, True, False),
        ({"TERM": "xterm"}, True, True),
    ],
)
def test_interactive_allowed(env: dict[str, str], is_tty: bool, expected: bool) -> None:
    """Auto mode redraws only on a non-dumb TTY outside CI."""
    assert interactive_allowed(env, is_tty) is expected


def test_stream_detection() -> None:
    """A pseudo-terminal counts as a TTY and a StringIO does not; encodings are read."""
    assert stream_is_tty(io.StringIO()) is False
    main, secondary = os.openpty()
    try:
        with open(secondary, "w", encoding="utf-8", closefd=False) as tty:
            assert stream_is_tty(tty) is True
            assert stream_is_utf8(tty) is True
        with open(secondary, "w", encoding="ascii", closefd=False) as tty:
            assert stream_is_utf8(tty) is False
    finally:
        os.close(main)
        os.close(secondary)
    closed = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    closed.close()
    assert stream_is_tty(closed) is False
    assert stream_is_utf8(io.StringIO()) is False


def test_theme_paints_only_with_color() -> None:
    """ANSI codes wrap styled text only when colour is on."""
    colored = Theme(symbols=SYMBOL_SETS["ascii"], color=True, unicode=False)
    plain = Theme(symbols=SYMBOL_SETS["ascii"], color=False, unicode=False)
    assert colored.paint("fail", "x") == "\x1b[31mx\x1b[0m"
    assert colored.paint("fail", "") == ""
    assert plain.paint("fail", "x") == "x"
    assert plain.ellipsis == "..."
    assert Theme(symbols=SYMBOL_SETS["unicode"], color=False, unicode=True).ellipsis == "…"
