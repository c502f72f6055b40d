"""The command line: pipeline commands, projects, live progress and `python -m tubeless`."""

from tubeless.cli._command import PipelineCommand, define_pipeline_command
from tubeless.cli._exit import ExitCode, exit_code_for
from tubeless.cli._project import Project, define_project
from tubeless.cli._workbench import main
from tubeless.cli._workbench_parser import get_parser
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
