"""`tubeless list`, `inspect`, `plan` and `graph`: views that never run a step."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tubeless.cli._commands._options import run_controls
from tubeless.cli._exit import ExitCode
from tubeless.cli._program._sources import PROJECT_FILE, load_project, resolve_target
from tubeless.pipeline import render_plan

__all__ = ["handle_graph", "handle_inspect", "handle_list", "handle_plan"]


def _print(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def _ids(values: Any) -> str:
    return ", ".join(values) if values else "none"


def _source(arguments: argparse.Namespace) -> tuple[Any, str | None]:
    target = resolve_target(arguments.source, arguments.export, arguments.project, Path.cwd())
    return target.plan_source(), target.registered_id


def handle_list(arguments: argparse.Namespace) -> int:
    """List the project's pipelines: `<id>[<TAB><name>]` per line, or JSON."""
    path = Path.cwd() / (arguments.project or PROJECT_FILE)
    project = load_project(path)
    if arguments.json:
        document: dict[str, Any] = {"id": project.id, "name": project.name}
        if project.description is not None:
            document["description"] = project.description
        document["pipelines"] = list(project.pipeline_ids)
        document["project"] = str(path)
        _print(_json(document))
        return ExitCode.SUCCESS
    lines = []
    for pipeline in project.pipelines:
        name = getattr(pipeline, "name", None)
        lines.append(f"{pipeline.id}\t{name}\n" if name else f"{pipeline.id}\n")
    _print("".join(lines))
    return ExitCode.SUCCESS


def handle_inspect(arguments: argparse.Namespace) -> int:
    """Print identity, targets, steps and the default plan (explain off), or JSON."""
    source, registered_id = _source(arguments)
    plan = source.plan()
    if arguments.json:
        document: dict[str, Any] = {}
        if registered_id is not None:
            document["commandId"] = registered_id
        document.update(
            pipelineId=source.id,
            targetIds=list(source.target_ids),
            stepIds=list(source.step_ids),
            plan=plan.to_dict(),
        )
        _print(_json(document))
        return ExitCode.SUCCESS
    lines = [f"Command {registered_id}"] if registered_id is not None else []
    lines += [
        f"Pipeline {source.id}",
        f"Targets: {_ids(source.target_ids)}",
        f"Exact steps: {_ids(source.step_ids)}",
        render_plan(plan, explain=False),
    ]
    _print("\n".join(lines) + "\n")
    return ExitCode.SUCCESS


def handle_plan(arguments: argparse.Namespace) -> int:
    """Print the plan for the selection (exit 5 when the plan has errors)."""
    source, _ = _source(arguments)
    selection = {
        "dry_run": arguments.dry_run,
        "step_ids": arguments.step,
        "targets": arguments.target,
    }
    plan = source.plan(run_controls(selection))
    if arguments.json:
        _print(_json(plan.to_dict()))
    else:
        _print(render_plan(plan, explain=arguments.explain) + "\n")
    return ExitCode.SUCCESS if plan.ok else ExitCode.PLANNING


def handle_graph(arguments: argparse.Namespace) -> int:
    """Print the Mermaid flowchart, ending in exactly one newline."""
    source, _ = _source(arguments)
    chart = source.to_mermaid(arguments.direction, arguments.descriptions).rstrip("\n") + "\n"
    _print(f"```mermaid\n{chart}```\n" if arguments.markdown else chart)
    return ExitCode.SUCCESS
