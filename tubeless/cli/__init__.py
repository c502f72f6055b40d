"""The command line: pipeline commands, projects, live progress and `python -m tubeless`."""

from tubeless._public import show_public_module as _show_public_module
from tubeless.cli._commands._command import PipelineCommand, define_pipeline_command
from tubeless.cli._exit import ExitCode, exit_code_for
from tubeless.cli._program._main import main
from tubeless.cli._program._parser import get_parser
from tubeless.cli._project import Project, define_project
from tubeless.errors import CliHelpRequested, CliLoadError, CliUsageError, CliValidationError
from tubeless.progress import (
    PipelineReporter,
    ReporterLog,
    create_reporter,
    format_duration,
    sanitize_terminal_text,
)

__all__ = [
    "CliHelpRequested",
    "CliLoadError",
    "CliUsageError",
    "CliValidationError",
    "ExitCode",
    "PipelineCommand",
    "PipelineReporter",
    "Project",
    "ReporterLog",
    "create_reporter",
    "define_pipeline_command",
    "define_project",
    "exit_code_for",
    "format_duration",
    "get_parser",
    "main",
    "sanitize_terminal_text",
]

_show_public_module(__name__, __all__, globals())
