"""Definition identity: the frozen snapshot of a pipeline and its two fingerprints.

`structuralFingerprint` hashes what the graph is (steps, dependency sets, dry-run kinds,
validation flags, nested pipelines' structure, annotations such as agent limits);
`definitionId` adds the author's `implementation_version` and the children's ids. Both are
`sha256:<hex>` over compact JSON with sorted keys, so key order never matters.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

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
        out: dict[str, Any] = {
            "version": self.version,
            "structuralFingerprint": self.structural_fingerprint,
            "definitionId": self.definition_id,
        }
        if self.implementation_version is not None:
            out["implementationVersion"] = self.implementation_version
        return out


@dataclasses.dataclass(frozen=True, slots=True)
class DefinitionSnapshot:
    """A deeply frozen description of a pipeline definition, without handlers."""

    identity: DefinitionIdentity
    """The definition's identity."""
    steps: tuple[Mapping[str, Any], ...]
    """One read-only entry per step, in execution order."""
    target_ids: tuple[str, ...]
    """Declared targets, sorted."""
    required_finalizer_step_ids: tuple[str, ...] | None
    """Steps a `require_outputs` finalizer needs, sorted."""
    options_validated: bool
    """Whether options pass through a schema."""
    result_validated: bool
    """Whether the final result passes through a schema."""

    def to_dict(self) -> dict[str, Any]:
        """Return the wire form (plain dicts and lists)."""
        out: dict[str, Any] = {
            "identity": self.identity.to_dict(),
            "steps": thaw(self.steps),
            "targetIds": list(self.target_ids),
        }
        if self.required_finalizer_step_ids is not None:
            out["requiredFinalizerStepIds"] = list(self.required_finalizer_step_ids)
        out["optionsValidated"] = self.options_validated
        out["resultValidated"] = self.result_validated
        return out


def fingerprint(value: Any) -> str:
    """Return `sha256:<hex>` of the compact, key-sorted JSON of `value`."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


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


def _version(entries: Sequence[Mapping[str, Any]]) -> int:
    for entry in entries:
        nested = entry.get("nestedPipeline")
        if nested and (nested["mode"] == "iterate" or nested["identity"]["version"] >= 2):
            return 2
    return 1


def _structural_entry(entry: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(entry)
    nested = entry.get("nestedPipeline")
    if nested is not None:
        reduced = dict(nested)
        child = nested["identity"]
        reduced["identity"] = {
            "version": child["version"],
            "structuralFingerprint": child["structuralFingerprint"],
        }
        out["nestedPipeline"] = reduced
    return out


def _child_identity(entry: Mapping[str, Any]) -> dict[str, Any] | None:
    nested = entry.get("nestedPipeline")
    return None if nested is None else dict(nested["identity"])


def compute_identity(
    entries: Sequence[Mapping[str, Any]],
    target_ids: Sequence[str],
    required: Sequence[str] | None,
    flags: tuple[bool, bool],
    implementation_version: str | None,
) -> DefinitionIdentity:
    """Compute the identity of a snapshot's content."""
    version = _version(entries)
    structural: dict[str, Any] = {
        "version": version,
        "steps": [_structural_entry(entry) for entry in entries],
        "targetIds": sorted(target_ids),
        "optionsValidated": flags[0],
        "resultValidated": flags[1],
    }
    if required is not None:
        structural["requiredFinalizerStepIds"] = sorted(required)
    structural_fingerprint = fingerprint(structural)
    definition: dict[str, Any] = {
        "version": version,
        "structuralFingerprint": structural_fingerprint,
        "children": [_child_identity(entry) for entry in entries],
    }
    if implementation_version is not None:
        definition["implementationVersion"] = implementation_version
    return DefinitionIdentity(
        version, structural_fingerprint, fingerprint(definition), implementation_version
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
        recorded = data["identity"]
        entries = [dict(entry) for entry in data["steps"]]
        required = data.get("requiredFinalizerStepIds")
        flags = (bool(data["optionsValidated"]), bool(data["resultValidated"]))
        identity = compute_identity(
            entries, data["targetIds"], required, flags, recorded.get("implementationVersion")
        )
    except (KeyError, TypeError, AttributeError) as error:
        raise DefinitionIdentityError(f"Malformed definition snapshot: {error!r}") from error
    if identity.structural_fingerprint != recorded.get("structuralFingerprint"):
        raise DefinitionIdentityError(
            "Definition snapshot does not match its structural fingerprint"
        )
    if identity.definition_id != recorded.get("definitionId") or identity.version != recorded.get(
        "version"
    ):
        raise DefinitionIdentityError("Definition snapshot does not match its definition id")
    return DefinitionSnapshot(
        identity=identity,
        steps=tuple(freeze_json(entry) for entry in entries),
        target_ids=tuple(sorted(data["targetIds"])),
        required_finalizer_step_ids=None if required is None else tuple(sorted(required)),
        options_validated=flags[0],
        result_validated=flags[1],
    )
