"""`create_reporter`: pick the plain or the live reporter for a stream and an environment."""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import Literal, TextIO

from tubeless.progress._live import InteractiveReporter
from tubeless.progress._plain import PlainReporter
from tubeless.progress._reporter import PipelineReporter
from tubeless.progress._terminal import (
    SYMBOL_SETS,
    SymbolsName,
    Theme,
    color_enabled,
    interactive_allowed,
    stream_is_tty,
    stream_is_utf8,
)

__all__ = ["create_reporter"]


def create_reporter(
    *,
    stream: TextIO | None = None,
    mode: Literal["auto", "interactive", "plain"] = "auto",
    color: bool | None = None,
    symbols: SymbolsName | None = None,
    env: Mapping[str, str] | None = None,
    refresh_interval: float = 0.08,
    progress_bar_width: int = 20,
    clock: Callable[[], float] | None = None,
) -> PipelineReporter:
    """Build a live progress reporter for one pipeline run.

    Args:
        stream: where to print; `sys.stderr` by default.
        mode: `"plain"` prints append-only lines; `"interactive"` redraws one frame;
            `"auto"` picks interactive only for a TTY whose `TERM` is not `dumb`, outside
            CI (`CI` unset, empty, `0` or `false`).
        color: ANSI colour on or off; None decides from `FORCE_COLOR`, `NO_COLOR`, `TERM`
            and whether the stream is a TTY.
        symbols: `"ascii"`, `"unicode"` or `"emoji"`; None picks Unicode for a UTF-8 TTY
            (whose `TERM` is not `dumb`) and ASCII otherwise.
        env: the environment to read; `os.environ` by default.
        refresh_interval: seconds between repaints of the interactive frame.
        progress_bar_width: cells of the interactive progress bar (at least 4).
        clock: monotonic seconds, for elapsed times and the progress line throttle;
            `time.monotonic` by default.

    Returns:
        The reporter; give its `hooks` and `log` to the run's context and close it after.

    Raises:
        ValueError: for an unknown mode or symbol set, or a refresh interval that is not
            a positive number of seconds.
    """
    if mode not in ("auto", "interactive", "plain"):
        raise ValueError(f"Unknown reporter mode: {mode!r}")
    if symbols is not None and symbols not in SYMBOL_SETS:
        raise ValueError(f"Unknown symbol set: {symbols!r}")
    if not (math.isfinite(refresh_interval) and refresh_interval > 0):
        raise ValueError("refresh_interval must be a positive number of seconds")
    out = sys.stderr if stream is None else stream
    environment: Mapping[str, str] = os.environ if env is None else env
    tty = stream_is_tty(out)
    if symbols is None:
        capable = tty and stream_is_utf8(out) and environment.get("TERM") != "dumb"
        symbols = "unicode" if capable else "ascii"
    theme = Theme(
        symbols=SYMBOL_SETS[symbols],
        color=color_enabled(environment, tty) if color is None else color,
        unicode=symbols != "ascii",
    )
    tick = time.monotonic if clock is None else clock
    interactive = mode == "interactive" or (
        mode == "auto" and interactive_allowed(environment, tty)
    )
    if interactive:
        return InteractiveReporter(
            stream=out,
            theme=theme,
            clock=tick,
            refresh_interval=max(0.016, refresh_interval),
            progress_bar_width=max(4, int(progress_bar_width)),
        )
    return PlainReporter(stream=out, theme=theme, clock=tick)
