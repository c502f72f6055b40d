"""Terminal-safe text, durations, symbols and colour for the live reporters."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from typing import Literal, TextIO

__all__ = [
    "SYMBOL_SETS",
    "Symbols",
    "SymbolsName",
    "Theme",
    "color_enabled",
    "format_count",
    "format_duration",
    "format_number",
    "interactive_allowed",
    "js_round",
    "sanitize_terminal_log",
    "sanitize_terminal_text",
    "stream_is_tty",
    "stream_is_utf8",
]

SymbolsName = Literal["ascii", "unicode", "emoji"]

# Escape sequences, longest forms first: a string sequence (OSC, DCS, SOS, PM, APC) swallows
# its payload up to the terminator, so the payload never reaches the screen either.
_OSC = re.compile(r"(?:\x1b\]|\x9d).*?(?:\x07|\x1b\\|\x9c)", re.DOTALL)
_STRING_SEQUENCE = re.compile(r"(?:\x1b[P_X^]|[\x90\x98\x9e\x9f]).*?(?:\x1b\\|\x9c)", re.DOTALL)
_CSI = re.compile(r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]")
_ESCAPE = re.compile(r"\x1b[ -/]*[0-~]")
# Every C0/C1 control except the line feed, which the log form keeps; a lone ESC left over
# by the patterns above is removed here, so no escape sequence can survive.
_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")
# Bidirectional embeddings, overrides, isolates and marks: they can reorder what a reader
# sees (U+202E turns "exe.txt" around), so they are dropped.
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_WHITESPACE = re.compile(r"\s+")
_LINE_BREAK = re.compile("\r\n?|[\u2028\u2029]")


def _strip_controls(text: str) -> str:
    for pattern in (_OSC, _STRING_SEQUENCE, _CSI, _ESCAPE, _CONTROL, _BIDI):
        text = pattern.sub("", text)
    return text


def sanitize_terminal_text(text: str) -> str:
    """Make one line of untrusted text safe to print on a terminal.

    Runs of whitespace (newlines and tabs included) become one space; escape sequences
    (CSI, OSC, DCS, APC, PM, SOS and two-character escapes) are removed with their
    payload; other control characters and bidi override characters are removed.

    Args:
        text: any text, for example a step name, an error message or a progress message.

    Returns:
        The text on one line, without leading or trailing spaces.
    """
    return _strip_controls(_WHITESPACE.sub(" ", text)).strip()


def sanitize_terminal_log(text: str) -> str:
    """Like `sanitize_terminal_text`, but keep line breaks (normalised to `\\n`).

    Tabs become spaces; everything else that `sanitize_terminal_text` removes is removed.
    """
    return _strip_controls(_LINE_BREAK.sub("\n", text).replace("\t", " "))


def js_round(value: float) -> int:
    """Round half up, as JavaScript's `Math.round` does (Python rounds half to even)."""
    return math.floor(value + 0.5)


def format_duration(ms: float) -> str:
    """Format a duration in milliseconds the way the reporters print it.

    Under a second: `"999ms"`. Under a minute: seconds with one decimal, dropping a
    trailing `.0` (`"59.9s"`, `"2s"`). Otherwise minutes and whole seconds (`"1m"`,
    `"1m59s"`). Rounding carries: 59950 ms is `"1m"`, not `"60s"`.
    """
    total_ms = max(0, js_round(ms)) if math.isfinite(ms) else 0
    if total_ms < 1000:
        return f"{total_ms}ms"
    if total_ms < 60_000:
        seconds = js_round(total_ms / 100) / 10
        if seconds < 60:
            return f"{int(seconds)}s" if seconds.is_integer() else f"{seconds:.1f}s"
    total_seconds = js_round(total_ms / 1000)
    minutes, seconds_left = divmod(total_seconds, 60)
    return f"{minutes}m" if seconds_left == 0 else f"{minutes}m{seconds_left}s"


def format_number(value: float) -> str:
    """Print a count as JavaScript does: `4`, not `4.0`; `2.5` stays `2.5`."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def format_count(value: float) -> str:
    """Print a count in a progress bar: integers as is, anything else with one decimal."""
    if isinstance(value, int) or value.is_integer():
        return str(int(value))
    return f"{value:.1f}"


@dataclasses.dataclass(frozen=True, slots=True)
class Symbols:
    """The marks printed in front of a step line."""

    start: str
    """A step started (plain) or a pipeline part is running."""
    complete: str
    """A step completed."""
    fail: str
    """A step failed."""
    skip: str
    """A step was skipped or cancelled."""
    pending: str
    """A step has not started yet."""


SYMBOL_SETS: Mapping[SymbolsName, Symbols] = {
    "ascii": Symbols(start="->", complete="ok", fail="fail", skip="-", pending="."),
    "unicode": Symbols(start="→", complete="✓", fail="✗", skip="–", pending="○"),
    "emoji": Symbols(start="⏳", complete="✅", fail="❌", skip="⏭️", pending="▫️"),
}

_ANSI_RESET = "\x1b[0m"
_STYLES = {
    "pipeline": "\x1b[1;36m",
    "start": "\x1b[36m",
    "description": "\x1b[2m",
    "complete": "\x1b[32m",
    "fail": "\x1b[31m",
    "skip": "\x1b[33m",
}


@dataclasses.dataclass(frozen=True, slots=True)
class Theme:
    """Symbols plus colour painting, both decided once per reporter."""

    symbols: Symbols
    """The symbol set in use."""
    color: bool
    """Whether ANSI colour codes are written."""
    unicode: bool
    """Whether box drawing, block bars, braille spinners and `…` may be printed."""

    def paint(self, style: str, text: str) -> str:
        """Wrap `text` in the ANSI codes of `style` when colour is on.

        Styles: `pipeline`, `start`, `description`, `complete`, `fail`, `skip`.
        """
        if not self.color or not text:
            return text
        return f"{_STYLES[style]}{text}{_ANSI_RESET}"

    @property
    def ellipsis(self) -> str:
        """`…` on Unicode terminals, `...` otherwise."""
        return "…" if self.unicode else "..."


def stream_is_tty(stream: TextIO) -> bool:
    """Whether `stream` is attached to a terminal (False for closed or fake streams)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def stream_is_utf8(stream: TextIO) -> bool:
    """Whether `stream` encodes text as UTF-8."""
    encoding = getattr(stream, "encoding", None)
    if not isinstance(encoding, str):
        return False
    return encoding.lower().replace("_", "-") in ("utf-8", "utf8")


def color_enabled(env: Mapping[str, str], is_tty: bool) -> bool:
    """Decide colour from the environment and the stream.

    `FORCE_COLOR` set to anything but `0` forces colour on (and `0` off); otherwise colour
    is on only when `NO_COLOR` is not set, the stream is a TTY and `TERM` is not `dumb`.
    """
    force = env.get("FORCE_COLOR")
    if force is not None:
        return force != "0"
    return "NO_COLOR" not in env and is_tty and env.get("TERM") != "dumb"


def interactive_allowed(env: Mapping[str, str], is_tty: bool) -> bool:
    """Whether auto mode may redraw frames: a TTY, `TERM` not `dumb`, and not in CI.

    `CI` counts as unset when it is missing, empty, `0` or `false`.
    """
    in_ci = env.get("CI", "") not in ("", "0", "false")
    return is_tty and env.get("TERM") != "dumb" and not in_ci
