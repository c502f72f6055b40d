"""Tests for `define_pipeline_command` and `PipelineCommand`, in process."""

from __future__ import annotations

import argparse
import io
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from tubeless.cli import (
    CliHelpRequested,
    CliUsageError,
    CliValidationError,
    PipelineCommand,
    define_pipeline_command,
)
from tubeless.errors import PipelineExecutionError, RunCancelledError
from tubeless.pipeline import create_steps, define_pipeline

OPTIONS = {
    "type": "object",
    "properties": {
        "question": {"type": "string", "description": "What to ask"},
        "limit": {"type": "integer", "minimum": 1, "default": 2},
        "loud": {"type": "boolean"},
        "label": {"type": "string"},
    },
    "required": ["question"],
}


def _pipeline(run: Any = None, *, name: str | None = "Asker", options: Any = OPTIONS) -> Any:
    steps = create_steps(options)

    def ask(inputs: Any, context: Any) -> Any:
        context.log.info(f"asking {context.options['question']}")
        return {"answer": context.options["question"].upper(), "dry_run": context.dry_run}

    first = steps.step("ask", run=run or ask)
    second = steps.step("tidy", depends_on=[first], run=lambda inputs, context: inputs["ask"])
    return define_pipeline(
        id="asker", name=name, description="Ask a question.", steps=[first, second]
    )


def _quiet(**config: Any) -> PipelineCommand:
    config.setdefault("reporter", {"stream": io.StringIO(), "mode": "plain"})
    return define_pipeline_command(config.pop("pipeline", None) or _pipeline(), **config)


def test_a_command_exposes_its_pipeline_and_descriptor() -> None:
    """Name, description, ids and a read-only descriptor come from the pipeline."""
    pipeline = _pipeline()
    command = define_pipeline_command(pipeline)
    assert (command.pipeline, command.id, command.name) == (pipeline, "asker", "Asker")
    assert command.description == "Ask a question."
    assert (command.step_ids, command.target_ids) == (("ask", "tidy"), ("tidy",))
    assert define_pipeline_command(_pipeline(name=None)).name == "asker"
    descriptor = command.descriptor
    assert descriptor["name"] == "Asker"
    keys = [parameter["key"] for parameter in descriptor["parameters"]]
    assert keys == [
        "question", "limit", "loud", "label",
        "dry_run", "step_ids", "targets", "continue_on_error", "max_concurrency",
    ]  # fmt: skip
    with pytest.raises(TypeError):
        descriptor["name"] = "x"


def test_plan_and_graph_need_no_arguments() -> None:
    """`plan` and `to_mermaid` are the pipeline's, without parsing."""
    command = define_pipeline_command(_pipeline())
    assert command.plan({"targets": ["tidy"]}).ok
    assert command.to_mermaid("LR").startswith("flowchart LR\n")


def test_parse_gives_domain_values_then_controls() -> None:
    """Parsed values keep the schema's names; absent optional values are left out."""
    command = define_pipeline_command(_pipeline())
    assert command.parse(["--question", "why"]) == {
        "question": "why",
        "limit": 2,
        "loud": False,
        "dry_run": False,
        "step_ids": [],
        "targets": [],
        "continue_on_error": False,
        "max_concurrency": 1,
    }
    values = command.parse(
        ["--question=how", "--label", "x", "--loud", "--dry-run", "--step", "ask",
         "--max-concurrency", "3", "--continue-on-error"]
    )  # fmt: skip
    assert values["label"] == "x"
    assert (values["loud"], values["dry_run"], values["step_ids"]) == (True, True, ["ask"])
    assert (values["max_concurrency"], values["continue_on_error"]) == (3, True)
    assert command.parse(["--question", "q", "--no-loud"])["loud"] is False


def test_parse_raises_help_usage_and_validation_errors() -> None:
    """Help is an exception; unparsable argv is a usage error; rules are validation errors."""
    command = define_pipeline_command(
        _pipeline(), validate=lambda values: ["Too loud."] if values["loud"] else []
    )
    with pytest.raises(CliHelpRequested) as helped:
        command.parse(["--help"])
    assert helped.value.help_text.startswith("usage: Asker [-h] --question QUESTION")
    for argv in (["--question"], ["--question", "q", "--nope"], ["--ques", "q"], []):
        with pytest.raises(CliUsageError) as usage:
            command.parse(argv)
        assert isinstance(usage.value, CliValidationError)
        assert usage.value.help_text.startswith("usage: Asker")
    with pytest.raises(CliValidationError) as rejected:
        command.parse(["--question", "q", "--loud", "--step", "ask", "--target", "tidy"])
    assert rejected.value.errors == ("--step and --target cannot be used together.", "Too loud.")


def test_environment_variables_back_flags() -> None:
    """An `env` override fills a flag that argv leaves out; a required flag may come from it."""
    command = define_pipeline_command(
        _pipeline(), overrides={"question": {"env": "ASK"}, "limit": {"env": "LIMIT"}}
    )
    values = command.parse([], env={"ASK": "from env", "LIMIT": "7"})
    assert (values["question"], values["limit"]) == ("from env", 7)
    with pytest.raises(CliValidationError) as rejected:
        command.parse([], env={"LIMIT": "0"})
    assert rejected.value.errors == (
        "Missing required option --question.",
        "Environment variable LIMIT must be at least 1.",
    )


def test_execute_maps_options_and_controls_and_prints_the_summary(capsys: Any) -> None:
    """`map_options` gets the domain values only; controls reach the run; summary on stdout."""
    seen: list[dict[str, Any]] = []

    def map_options(values: dict[str, Any]) -> dict[str, Any]:
        seen.append(values)
        return {"question": values["question"] + "?"}

    command = _quiet(
        map_options=map_options, summarize=lambda value, values: [value["answer"], "done"]
    )
    value = command.run(["--question", "why", "--dry-run"])
    assert value == {"answer": "WHY?", "dry_run": True}
    assert seen == [{"question": "why", "limit": 2, "loud": False}]
    assert capsys.readouterr().out == "WHY?\ndone\n"


def test_hooks_run_in_context_reporter_configured_order() -> None:
    """The caller's hooks run before the reporter's, the configured hooks after them."""
    stream = io.StringIO()
    order: list[tuple[str, bool]] = []
    command = define_pipeline_command(
        _pipeline(),
        reporter={"stream": stream, "mode": "plain"},
        hooks={
            "on_pipeline_start": lambda record: order.append(("configured", bool(stream.tell())))
        },
    )
    context_hooks = {
        "on_pipeline_start": lambda record: order.append(("context", bool(stream.tell())))
    }
    command.run(["--question", "q"], context={"hooks": context_hooks})
    assert order == [("context", False), ("configured", True)]
    assert "Pipeline asker: starting (2 steps, dryRun=false)" in stream.getvalue()
    assert "asking q" in stream.getvalue()


def test_a_failed_run_raises_and_prints_no_summary(capsys: Any) -> None:
    """A failing step raises `PipelineExecutionError` and the summary is not printed."""

    def broken(inputs: Any, context: Any) -> Any:
        raise RuntimeError("no answer")

    command = _quiet(pipeline=_pipeline(broken), summarize=lambda value, values: ["never"])
    with pytest.raises(PipelineExecutionError):
        command.run(["--question", "q"])
    assert capsys.readouterr().out == ""


def test_without_a_reporter_logs_go_to_stderr(capsys: Any) -> None:
    """`reporter=False` prints no progress; step logs still reach stderr."""
    command = define_pipeline_command(_pipeline(), reporter=False)
    command.run(["--question", "q"])
    captured = capsys.readouterr()
    assert captured.err == "asking q\n"


def test_explicit_params_with_configure() -> None:
    """`configure` adds the arguments (inference is off) and `map_options` maps them."""

    def configure(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--text", required=True, help="The question.")
        parser.add_argument("--times", type=int, default=1)

    command = _quiet(
        configure=configure, map_options=lambda values: {"question": values["text"] * 2}
    )
    assert command.run(["--text", "ab"])["answer"] == "ABAB"
    assert command.parse(["--text", "x"])["times"] == 1
    described = {item["key"]: item for item in command.descriptor["parameters"]}
    assert described["text"]["required"] is True
    assert described["times"]["type"] == "number"
    assert "question" not in described


def test_parser_is_fresh_each_time() -> None:
    """`.parser` builds a new parser, so changing one does not change the command."""
    command = define_pipeline_command(_pipeline())
    first = command.parser
    first.add_argument("--extra")
    assert command.parser is not first
    with pytest.raises(CliUsageError):
        command.parse(["--question", "q", "--extra", "x"])


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"configure": lambda parser: None}, "configure= defines explicit params and requires"),
        ({"configure": lambda parser: None, "map_options": dict, "overrides": {"question": {}}},
         "Flag overrides require inferred pipeline flags"),
        ({"configure": lambda parser: parser.add_argument("--step"), "map_options": dict},
         "conflicting argument"),
        ({"configure": lambda parser: parser.add_argument("--x", dest="targets"),
          "map_options": dict}, "reserved parameter"),
        ({"overrides": {"question": {"flag": "dry-run"}}}, "--dry-run is a reserved flag"),
        ({"overrides": {"question": {"flag": "limit"}}},
         'Duplicate --limit flag: both "question" and "limit"'),
        ({"overrides": {"loud": {"flag": "label"}}}, "Duplicate --label flag"),
        ({"name": " "}, "name must be a non-blank string"),
    ],
)  # fmt: skip
def test_contradictory_definitions_are_refused(config: dict[str, Any], message: str) -> None:
    """Reserved or duplicate flags and contradictory arguments raise `ValueError`."""
    with pytest.raises(ValueError, match=message):
        define_pipeline_command(_pipeline(), **config)


def test_reserved_option_names_are_refused() -> None:
    """An option called `targets` or `maxConcurrency` collides with a run control."""
    for key in ("targets", "maxConcurrency"):
        options = {"type": "object", "properties": {key: {"type": "string"}}}
        with pytest.raises(ValueError, match="reserved"):
            define_pipeline_command(_pipeline(options=options))


def test_options_schema_without_json_schema_cannot_be_inferred() -> None:
    """A validator without JSON Schema needs explicit params."""
    from tubeless.schema import validator

    pipeline = _pipeline(options=validator(lambda value: value))
    with pytest.raises(ValueError, match="Cannot infer CLI flags for pipeline options"):
        define_pipeline_command(pipeline)


def test_wrong_argument_types_are_refused() -> None:
    """A non-pipeline, a non-callable callback or a bad reporter raise `TypeError`."""
    with pytest.raises(TypeError, match="needs a pipeline"):
        define_pipeline_command(object())
    with pytest.raises(TypeError, match="summarize must be callable"):
        define_pipeline_command(_pipeline(), summarize="x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Unknown reporter options: speed"):
        define_pipeline_command(_pipeline(), reporter={"speed": 1})


def test_main_returns_exit_codes(capsys: Any) -> None:
    """`main` returns 0, 0 for help, 4 for bad arguments and 6 for a failed run."""
    command = _quiet(summarize=lambda value, values: [value["answer"]])
    assert command.main(["--question", "q"]) == 0
    assert capsys.readouterr().out == "Q\n"
    assert command.main(["-h"]) == 0
    assert capsys.readouterr().out.startswith("usage: Asker")
    assert command.main(["--limit", "0", "--question", "q"]) == 4
    err = capsys.readouterr().err
    assert err.startswith("Error: Argument --limit: must be at least 1, got '0'.\n\nusage: Asker")

    def broken(inputs: Any, context: Any) -> Any:
        raise RuntimeError("no answer")

    assert _quiet(pipeline=_pipeline(broken)).main(["--question", "q"]) == 6
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == (
        "Error: execution at step ask [TUBELESS_STEP_FAILED] (RuntimeError): no answer"
    )
    assert lines[1].startswith("  raised at ") and lines[1].endswith(" in broken")
    assert f"{Path(__file__).name}:" in lines[1]
    assert lines[2:] == ["  (TUBELESS_TRACEBACK=1 shows the traceback)"]


def test_main_returns_130_after_ctrl_c(capsys: Any) -> None:
    """A SIGINT during `main` cancels the run through its signal and gives 130."""

    def interrupted(inputs: Any, context: Any) -> Any:
        os.kill(os.getpid(), signal.SIGINT)
        context.signal.wait()
        raise RunCancelledError("cancelled")

    previous = signal.getsignal(signal.SIGINT)
    assert _quiet(pipeline=_pipeline(interrupted)).main(["--question", "q"]) == 130
    assert signal.getsignal(signal.SIGINT) is previous
    err = capsys.readouterr().err
    assert err.count("SIGINT received; cancelling pipeline work.\n") == 1
    assert "Error: execution at step ask [TUBELESS_RUN_CANCELLED]: cancelled" in err
