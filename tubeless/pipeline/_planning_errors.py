"""Planning errors: controls that cannot select a run of this pipeline. Pure."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable, Sequence

from tubeless._diagnostics import coded_diagnostic
from tubeless.errors import Diagnostic
from tubeless.pipeline._controls import RunControls
from tubeless.pipeline._graph import repeated_values


def _valid_concurrency(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 2**53 - 1


def _suggest(unknown: Sequence[str], candidates: Iterable[str]) -> str:
    pool = sorted(candidates)
    for value in unknown:
        close = difflib.get_close_matches(value, pool, n=1)
        if close:
            return f'. Did you mean "{close[0]}"?'
    return ""


def _list_error(
    code: str, pipeline_id: str, noun: str, found: Sequence[str], hint: str = ""
) -> list[Diagnostic]:
    if not found:
        return []
    message = f"Pipeline {pipeline_id} requested {noun}: {', '.join(found)}{hint}"
    return [coded_diagnostic(code, message)]


def _empty_error(code: str, pipeline_id: str, field: str, what: str) -> Diagnostic:
    return coded_diagnostic(
        code,
        f"Pipeline {pipeline_id} received an empty {field} list; omit {field} to run every "
        f"step, or pass at least one {what}",
    )


@dataclasses.dataclass(frozen=True, slots=True)
class _IdList:
    """One list of step ids that controls may pass, and the codes of its problems."""

    field: str
    """The control's name (`step_ids`, `targets`)."""
    what: str
    """What one entry is, in the message of an empty list."""
    noun: str
    """What the entries are, in the messages of repeated and unknown entries."""
    empty: str
    """The code of an empty list."""
    duplicate: str
    """The code of a list that repeats an entry."""
    unknown: str
    """The code of entries that are not step ids of the pipeline."""


_STEP_IDS = _IdList(
    field="step_ids",
    what="step id",
    noun="step ids",
    empty="TUBELESS_PLANNING_STEP_SELECTION_EMPTY",
    duplicate="TUBELESS_PLANNING_STEP_SELECTION_DUPLICATE",
    unknown="TUBELESS_PLANNING_STEP_UNKNOWN",
)
_TARGETS = _IdList(
    field="targets",
    what="target step id",
    noun="targets",
    empty="TUBELESS_PLANNING_TARGET_SELECTION_EMPTY",
    duplicate="TUBELESS_PLANNING_TARGET_SELECTION_DUPLICATE",
    unknown="TUBELESS_PLANNING_TARGET_UNKNOWN",
)


def _id_list_errors(
    ids: _IdList, pipeline_id: str, values: Sequence[str], known: set[str], hints: set[str]
) -> list[Diagnostic]:
    """An empty list, repeated entries, and entries that are not steps (with a close `hints`
    entry suggested)."""
    errors = []
    if not values:
        errors.append(_empty_error(ids.empty, pipeline_id, ids.field, ids.what))
    errors += _list_error(
        ids.duplicate, pipeline_id, f"duplicate {ids.noun}", repeated_values(values)
    )
    unknown = [value for value in values if value not in known]
    errors += _list_error(
        ids.unknown, pipeline_id, f"unknown {ids.noun}", unknown, _suggest(unknown, hints)
    )
    return errors


def _target_errors(
    pipeline_id: str, targets: Sequence[str], known: set[str], declared: set[str]
) -> list[Diagnostic]:
    errors = _id_list_errors(_TARGETS, pipeline_id, targets, known, declared)
    undeclared = [value for value in targets if value in known and value not in declared]
    errors += _list_error(
        "TUBELESS_PLANNING_TARGET_UNDECLARED", pipeline_id, "undeclared targets", undeclared
    )
    return errors


def _selection_errors(
    pipeline_id: str, controls: RunControls, known: set[str], declared: set[str]
) -> list[Diagnostic]:
    errors = []
    if controls.step_ids is not None and controls.targets is not None:
        errors.append(
            coded_diagnostic(
                "TUBELESS_PLANNING_SELECTION_CONFLICT",
                f"Pipeline {pipeline_id} cannot combine exact step_ids filtering with "
                "dependency-aware targets",
            )
        )
    if controls.step_ids is not None:
        errors += _id_list_errors(_STEP_IDS, pipeline_id, controls.step_ids, known, known)
    if controls.targets is not None:
        errors += _target_errors(pipeline_id, controls.targets, known, declared)
    return errors


def planning_errors(
    pipeline_id: str, controls: RunControls, known: set[str], declared: set[str]
) -> list[Diagnostic]:
    """Every problem with `controls` for a pipeline with these step and target ids."""
    errors: list[Diagnostic] = []
    if not _valid_concurrency(controls.max_concurrency):
        errors.append(
            coded_diagnostic(
                "TUBELESS_RUN_CONCURRENCY_INVALID",
                f"Pipeline {pipeline_id} max_concurrency must be a positive integer, got "
                f"{controls.max_concurrency!r}",
            )
        )
    return errors + _selection_errors(pipeline_id, controls, known, declared)
