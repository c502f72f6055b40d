"""Tests for fitting, laying out and repainting the interactive frame."""

from __future__ import annotations

from tubeless.progress._frame import (
    FrameWriter,
    Row,
    beside_log_pane,
    fit_line,
    visible_width,
    window_rows,
)


def test_visible_width_ignores_colour_and_counts_wide_characters() -> None:
    """Colour codes take no cells, CJK and emoji take two, combining marks none."""
    assert visible_width("\x1b[31mabc\x1b[0m") == 3
    assert visible_width("日本") == 4
    assert visible_width("✅") == 2
    assert visible_width("e\u0301") == 1


def test_fit_line_keeps_short_lines() -> None:
    """A line that fits in `columns - 1` cells is returned unchanged."""
    assert fit_line("abcd", 5, unicode=True) == "abcd"
    assert fit_line("abcdef", 0, unicode=True) == "abcdef"


def test_fit_line_cuts_with_an_ellipsis() -> None:
    """Long lines end in `…` (or `...` in ASCII) and stay one cell short of the edge."""
    assert fit_line("abcdefghij", 6, unicode=True) == "abcd…"
    assert fit_line("abcdefghij", 6, unicode=False) == "ab..."
    assert fit_line("日本語テキスト", 6, unicode=True) == "日本…"


def test_fit_line_keeps_colour_and_resets_before_the_ellipsis() -> None:
    """Cutting a coloured line keeps its codes and closes them before the ellipsis."""
    assert fit_line("\x1b[32mPipeline interactive-test\x1b[0m", 25, unicode=True) == (
        "\x1b[32mPipeline interactive-te\x1b[0m…"
    )


def test_beside_log_pane_lays_out_both_columns() -> None:
    """The frame sits left, the bordered pane right, every row one cell short of the edge."""
    lines = beside_log_pane(["Pipeline p", "  ⠋ step"], ["first", "✗ second"], 120, unicode=True)
    assert [visible_width(line) for line in lines] == [119, 119, 119, 119]
    assert lines[0].startswith("Pipeline p ")
    assert lines[0].endswith("  ╭─ Logs " + "─" * 39 + "╮")
    assert lines[1].endswith("│ first" + " " * 39 + " │")
    assert lines[2].endswith("│ ✗ second" + " " * 36 + " │")
    assert lines[3].endswith("╰" + "─" * 46 + "╯")


def test_beside_log_pane_in_ascii_with_a_longer_frame() -> None:
    """ASCII borders, and frame rows below the pane are fitted to the left column."""
    frame = ["header", "row 1", "row 2", "x" * 200]
    lines = beside_log_pane(frame, ["log"], 120, unicode=False)
    assert lines[0].endswith("+- Logs " + "-" * 39 + "+")
    assert lines[2].endswith("+" + "-" * 46 + "+")
    assert lines[3] == "x" * 66 + "..."


def rows(count: int, live: set[int]) -> list[Row]:
    return [Row(f"row {index}", live=index in live) for index in range(count)]


def test_window_rows_centres_the_last_live_row() -> None:
    """A tall frame keeps the header and a window around the last spinner, with markers."""
    visible = window_rows(rows(42, {1, 22}), 10, "…")
    assert visible == [
        "row 0",
        "  … 18 rows above",
        "row 19",
        "row 20",
        "row 21",
        "row 22",
        "row 23",
        "row 24",
        "  … 17 rows below",
    ]


def test_window_rows_at_the_ends() -> None:
    """Near the top only a `below` marker shows; near the bottom only an `above` marker."""
    top = window_rows(rows(20, {1}), 10, "...")
    bottom = window_rows(rows(20, {19}), 10, "...")
    assert top == ["row 0", *(f"row {index}" for index in range(1, 7)), "  ... 13 rows below"]
    assert bottom == ["row 0", "  ... 13 rows above", *(f"row {index}" for index in range(14, 20))]


def test_window_rows_on_tiny_terminals() -> None:
    """Under five rows, only the header and a count of omitted rows remain."""
    assert window_rows(rows(9, set()), 4, "…") == ["row 0", "  … 8 rows omitted"]
    assert window_rows(rows(9, set()), 2, "…") == ["row 0"]


def test_frame_writer_repaints_in_place() -> None:
    """The first frame hides the cursor; later frames move up over the old one and clear."""
    chunks: list[str] = []
    writer = FrameWriter(chunks.append)
    writer.redraw(["a", "b"], 80)
    writer.redraw(["c"], 80)
    writer.redraw(["d"], 80, above="log line\n")
    writer.show_cursor()
    writer.show_cursor()
    assert chunks == [
        "\x1b[?2026h\x1b[?25la\x1b[K\nb\x1b[K\n\x1b[?2026l",
        "\x1b[?2026h\x1b[2Fc\x1b[K\n\x1b[J\x1b[?2026l",
        "\x1b[?2026h\x1b[1F\x1b[Jlog line\nd\x1b[K\n\x1b[?2026l",
        "\x1b[?25h",
    ]


def test_frame_writer_counts_rows_wrapped_by_a_resize() -> None:
    """After the terminal narrows, a painted line that now wraps counts as several rows."""
    chunks: list[str] = []
    writer = FrameWriter(chunks.append)
    writer.redraw(["x" * 30, "y"], 80)
    writer.redraw([], 10)
    assert chunks[-1] == "\x1b[?2026h\x1b[4F\x1b[J\x1b[?2026l"


def test_frame_writer_without_a_frame_writes_nothing() -> None:
    """An empty frame over nothing writes nothing, and the cursor was never hidden."""
    chunks: list[str] = []
    writer = FrameWriter(chunks.append)
    writer.redraw([], 80)
    writer.show_cursor()
    assert chunks == []
