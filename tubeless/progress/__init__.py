"""Live progress of a run, drawn from its trace records: plain lines or a redrawn frame."""

from tubeless._public import show_public_module as _show_public_module
from tubeless.progress._create import create_reporter
from tubeless.progress._reporter import PipelineReporter, ReporterLog
from tubeless.progress._restore import restore_terminals
from tubeless.progress._terminal import (
    format_duration,
    sanitize_terminal_log,
    sanitize_terminal_text,
)

__all__ = [
    "PipelineReporter",
    "ReporterLog",
    "create_reporter",
    "format_duration",
    "restore_terminals",
    "sanitize_terminal_log",
    "sanitize_terminal_text",
]

_show_public_module(__name__, __all__, globals())
