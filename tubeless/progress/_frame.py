"""Fitting, laying out and repainting the interactive reporter's frame."""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from collections.abc import Callable, Sequence

__all__ = [
    "FrameWriter",
    "Row",
    "beside_log_pane",
    "fit_line",
    "visible_width",
    "window_rows",
]

SGR = re.compile(r"\x1b\[[0-9;]*m")
_RESET = "\x1b[0m"
_CLEAR_DOWN = "\x1b[J"
_CLEAR_LINE_END = "\x1b[K"
HIDE_CURSOR = "\x1b[?25l"
SHOW_CURSOR = "\x1b[?25h"
# Synchronized output (DEC private mode 2026): terminals that know it show the enclosed
# bytes as one frame, the others ignore it.
_SYNC_START = "\x1b[?2026h"
_SYNC_END = "\x1b[?2026l"
_ZERO_WIDTH = "\u200d\ufe0e\ufe0f"


@dataclasses.dataclass(frozen=True, slots=True)
class Row:
    """One line of the frame."""

    text: str
    """The painted text (may hold SGR colour codes, never other escapes)."""
    live: bool = False
    """Whether the row shows a spinner; tall frames keep the last live row in view."""


def _char_width(char: str) -> int:
    if unicodedata.category(char) in ("Mn", "Me", "Mc") or char in _ZERO_WIDTH:
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def visible_width(text: str) -> int:
    """Terminal columns taken by `text`, ignoring SGR colour codes."""
    return sum(_char_width(char) for char in SGR.sub("", text))


def fit_line(text: str, columns: int, unicode: bool) -> str:
    """Cut `text` so it fits in `columns - 1` cells, ending with an ellipsis when cut.

    Stopping short of the last column means a line never wraps on its own. Colour codes
    are kept, and a reset is added before the ellipsis when the line held any.
    """
    if columns <= 1:
        return text
    max_width = columns - 1
    if visible_width(text) <= max_width:
        return text
    ellipsis = "…" if unicode else "." * min(3, max_width)
    target = max(0, max_width - visible_width(ellipsis))
    pieces: list[str] = []
    width = 0
    styled = False
    index = 0
    while index < len(text):
        match = SGR.match(text, index)
        if match is not None:
            pieces.append(match.group())
            styled = True
            index = match.end()
            continue
        char_width = _char_width(text[index])
        if width + char_width > target:
            break
        pieces.append(text[index])
        width += char_width
        index += 1
    return "".join(pieces) + (_RESET if styled else "") + ellipsis


def _pad(text: str, width: int, unicode: bool) -> str:
    fitted = fit_line(text, width + 1, unicode)
    return fitted + " " * max(0, width - visible_width(fitted))


def beside_log_pane(
    lines: Sequence[str], pane: Sequence[str], columns: int, unicode: bool
) -> list[str]:
    """Lay the frame out on the left and a bordered `Logs` pane on the right.

    The pane takes 40% of the width (at most 60 columns); every row stays one column
    short of the terminal width.
    """
    pane_width = min(60, columns * 2 // 5)
    left_width = columns - pane_width - 3
    horizontal, vertical = ("─", "│") if unicode else ("-", "|")
    top_left, top_right, bottom_left, bottom_right = "╭╮╰╯" if unicode else "++++"
    boxed = [
        f"{top_left}{horizontal} Logs {horizontal * (pane_width - 9)}{top_right}",
        *(f"{vertical} {_pad(line, pane_width - 4, unicode)} {vertical}" for line in pane),
        f"{bottom_left}{horizontal * (pane_width - 2)}{bottom_right}",
    ]
    combined: list[str] = []
    for index in range(max(len(lines), len(boxed))):
        left = lines[index] if index < len(lines) else ""
        if index < len(boxed):
            combined.append(f"{_pad(left, left_width, unicode)}  {boxed[index]}")
        else:
            combined.append(fit_line(left, left_width + 1, unicode))
    return combined


def window_rows(rows: Sequence[Row], height: int, ellipsis: str) -> list[str]:
    """Pick the rows of a frame taller than the terminal, around the last live row.

    The first row (the header) always stays; hidden rows are counted by
    `… N rows above` / `… N rows below` markers, so the result has fewer than `height`
    rows.
    """
    texts = [row.text for row in rows]
    if height < 5:
        return [texts[0], f"  {ellipsis} {len(texts) - 1} rows omitted"][: max(0, height - 1)]
    available = height - 4
    focus = max((index for index, row in enumerate(rows) if row.live), default=0)
    start = max(1, min(len(texts) - available, focus - available // 2))
    end = start + available
    visible = [texts[0]]
    if start > 1:
        visible.append(f"  {ellipsis} {start - 1} rows above")
    visible.extend(texts[start:end])
    if end < len(texts):
        visible.append(f"  {ellipsis} {len(texts) - end} rows below")
    return visible


class FrameWriter:
    """Repaint a block of lines in place at the bottom of a terminal's output."""

    def __init__(self, write: Callable[[str], None]) -> None:
        self._write = write
        self._painted: list[str] = []
        self._cursor_hidden = False

    def redraw(self, lines: Sequence[str], columns: int, above: str | None = None) -> None:
        """Replace the painted frame with `lines`, in one write.

        Args:
            lines: the new frame, each line already fitted to the terminal width.
            columns: the terminal width now, to count rows of lines that a resize wrapped.
            above: scrolling text (ending with a newline) to print above the new frame.
        """
        rows = self._painted_rows(columns)
        chunk = f"\x1b[{rows}F" if rows > 0 else ""
        if above is not None:
            # Scrolling text cannot overwrite rows in place, so it starts on a cleared region.
            chunk += (_CLEAR_DOWN if rows > 0 else "") + above
        chunk += "".join(f"{line}{_CLEAR_LINE_END}\n" for line in lines)
        if above is None and rows > 0:
            chunk += _CLEAR_DOWN
        self._painted = list(lines)
        if not chunk:
            return
        hide = ""
        if lines and not self._cursor_hidden:
            hide = HIDE_CURSOR
            self._cursor_hidden = True
        self._write(f"{_SYNC_START}{hide}{chunk}{_SYNC_END}")

    def undo(self, columns: int) -> str:
        """What erases the painted frame and shows the cursor again (nothing is written).

        For a process about to die with the frame still up: the rows go, so no stale
        spinner stays on screen, and the cursor comes back.
        """
        rows = self._painted_rows(columns)
        erase = f"\x1b[{rows}F{_CLEAR_DOWN}" if rows > 0 else ""
        return f"{_SYNC_END}{erase}{SHOW_CURSOR if self._cursor_hidden else ''}"

    def show_cursor(self) -> None:
        """Show the cursor again if a frame hid it."""
        if self._cursor_hidden:
            self._write(SHOW_CURSOR)
            self._cursor_hidden = False

    def _painted_rows(self, columns: int) -> int:
        rows = 0
        for line in self._painted:
            rows += 1
            column = 0
            for char in SGR.sub("", line):
                width = _char_width(char)
                if columns > 0 and column + width > columns:
                    rows += 1
                    column = 0
                column += width
        return rows
