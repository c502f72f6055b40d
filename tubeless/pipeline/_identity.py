"""Definition identity: the frozen snapshot of a pipeline and its two fingerprints.

The fingerprints themselves are computed in `tubeless._fingerprint`, which trace readers
share to reject edited snapshots.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from tubeless._fields import OMIT_NONE, wire, wire_dict
from tubeless._fingerprint import (
    MISMATCH_WORDS,
    identity_mismatch,
    recomputed_identity,
    snapshot_identity,
)
from tubeless._frozen import freeze_json, thaw
from tubeless.errors import DefinitionIdentityError
from tubeless.pipeline._plan import dry_run_kind
from tubeless.pipeline._steps import Step


@dataclasses.dataclass(frozen=True, slots=True)
class DefinitionIdentity:
    """The identity of a pipeline definition."""

    version: int
    """Identity algorithm version: 1, or 2 when iteration is involved."""
    structural_fingerprint: str
    """`sha256:` hash of the graph's structure."""
    definition_id: str
    """`sha256:` hash of the structure, `implementation_version` and children's ids."""
    implementation_version: str | None = None
    """The author's version of handlers, schemas and prompts."""

    def to_dict(self) -> dict[str, Any]:
        """Return the wire form `{version, structuralFingerprint, definitionId, ...}`."""
        return wire_dict(self)


@dataclasses.dataclass(frozen=True, slots=True)
class DefinitionSnapshot:
    """A deeply frozen description of a pipeline definition, without handlers."""

    identity: DefinitionIdentity
    """The definition's identity."""
    steps: tuple[Mapping[str, Any], ...] = dataclasses.field(metadata=wire(convert=thaw))
    """One read-only entry per step, in execution order."""
    target_ids: tuple[str, ...]
    """Declared targets, sorted."""
    required_finalizer_step_ids: tuple[str, ...] | None = dataclasses.field(metadata=OMIT_NONE)
    """Steps a `require_outputs` finalizer needs, sorted."""
    options_validated: bool
    """Whether options pass through a schema."""
    result_validated: bool
    """Whether the final result passes through a schema."""

    def to_dict(self) -> dict[str, Any]:
        """Return the wire form (plain dicts and lists)."""
        return wire_dict(self)


def _step_entry(step: Step) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "id": step.id,
        "dependencies": sorted(dep.id for dep in step.depends_on),
        "optionalDependencies": sorted(dep.id for dep in step.optional_depends_on),
        "skipAfterFailureOf": sorted(dep.id for dep in step.skip_after_failure_of),
        "dryRun": dry_run_kind(step),
        "runtimeSkipPossible": step.skip is not None,
        "outputValidated": step.output_schema is not None,
    }
    if step.nested is not None:
        entry["nestedPipeline"] = step.nested.to_dict()
    if step.annotation is not None:
        entry[step.annotation.key] = thaw(step.annotation.data)
    return entry


def compute_identity(
    entries: Sequence[Mapping[str, Any]],
    target_ids: Sequence[str],
    required: Sequence[str] | None,
    flags: tuple[bool, bool],
    implementation_version: str | None,
) -> DefinitionIdentity:
    """Compute the identity of a snapshot's content."""
    identity = snapshot_identity(entries, target_ids, required, flags, implementation_version)
    return DefinitionIdentity(
        identity["version"],
        identity["structuralFingerprint"],
        identity["definitionId"],
        implementation_version,
    )


def build_snapshot(
    order: Sequence[Step],
    target_ids: Sequence[str],
    required: Sequence[str] | None,
    flags: tuple[bool, bool],
    implementation_version: str | None,
) -> DefinitionSnapshot:
    """Build the frozen snapshot (with identity) of a compiled pipeline."""
    entries = [_step_entry(step) for step in order]
    identity = compute_identity(entries, target_ids, required, flags, implementation_version)
    return DefinitionSnapshot(
        identity=identity,
        steps=tuple(freeze_json(entry) for entry in entries),
        target_ids=tuple(sorted(target_ids)),
        required_finalizer_step_ids=None if required is None else tuple(sorted(required)),
        options_validated=flags[0],
        result_validated=flags[1],
    )


def decode_snapshot(data: Mapping[str, Any]) -> DefinitionSnapshot:
    """Rebuild a snapshot from its wire form, checking it against its recorded identity.

    Raises:
        DefinitionIdentityError: when the content does not match the recorded fingerprints
            (an edited snapshot) or the data is malformed.
    """
    try:
        computed = recomputed_identity(data)
        mismatch = identity_mismatch(data, computed)
        entries = [dict(entry) for entry in data["steps"]]
        required = data.get("requiredFinalizerStepIds")
        flags = (bool(data["optionsValidated"]), bool(data["resultValidated"]))
    except (KeyError, TypeError, AttributeError) as error:
        raise DefinitionIdentityError(f"Malformed definition snapshot: {error!r}") from error
    if mismatch is not None:
        words = MISMATCH_WORDS[mismatch]
        raise DefinitionIdentityError(f"Definition snapshot does not match its {words}")
    identity = DefinitionIdentity(
        computed["version"],
        computed["structuralFingerprint"],
        computed["definitionId"],
        computed.get("implementationVersion"),
    )
    return DefinitionSnapshot(
        identity=identity,
        steps=tuple(freeze_json(entry) for entry in entries),
        target_ids=tuple(sorted(data["targetIds"])),
        required_finalizer_step_ids=None if required is None else tuple(sorted(required)),
        options_validated=flags[0],
        result_validated=flags[1],
    )
