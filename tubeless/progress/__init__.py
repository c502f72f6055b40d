"""Live progress of a run, drawn from its trace records: plain lines or a redrawn frame."""

from tubeless.progress._create import create_reporter
from tubeless.progress._reporter import PipelineReporter, ReporterLog
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
    "sanitize_terminal_log",
    "sanitize_terminal_text",
]
