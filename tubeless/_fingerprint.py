"""Definition fingerprints over wire-form snapshots: pure functions on plain data.

Definitions compute them (`tubeless.pipeline`) and trace readers verify stored snapshots
with them (`tubeless.trace`), so they live below both. `structuralFingerprint` hashes what
the graph is (steps, dependency sets, dry-run kinds, validation flags, nested pipelines'
structure, annotations such as agent limits); `definitionId` adds the author's
`implementation_version` and the children's ids. Both are `sha256:<hex>` over compact JSON
with sorted keys, so key order never matters.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any


def fingerprint(value: Any) -> str:
    """Return `sha256:<hex>` of the compact, key-sorted JSON of `value`."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


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


def snapshot_identity(
    entries: Sequence[Mapping[str, Any]],
    target_ids: Sequence[str],
    required: Sequence[str] | None,
    flags: tuple[bool, bool],
    implementation_version: str | None,
) -> dict[str, Any]:
    """Return the identity (wire form) of a snapshot's content.

    Args:
        entries: the snapshot's step entries, in execution order.
        target_ids: declared targets (any order).
        required: steps a `require_outputs` finalizer needs, or `None`.
        flags: `(options_validated, result_validated)`.
        implementation_version: the author's version, or `None` (then omitted).
    """
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
    identity: dict[str, Any] = {
        "version": version,
        "structuralFingerprint": fingerprint(structural),
    }
    definition: dict[str, Any] = {
        **identity,
        "children": [_child_identity(entry) for entry in entries],
    }
    if implementation_version is not None:
        definition["implementationVersion"] = implementation_version
    identity["definitionId"] = fingerprint(definition)
    if implementation_version is not None:
        identity["implementationVersion"] = implementation_version
    return identity


def recomputed_identity(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """Return the identity a wire-form snapshot's content gives (its own `identity` aside).

    Raises:
        KeyError, TypeError, AttributeError: when the snapshot is malformed.
    """
    recorded = snapshot["identity"]
    return snapshot_identity(
        [dict(entry) for entry in snapshot["steps"]],
        snapshot["targetIds"],
        snapshot.get("requiredFinalizerStepIds"),
        (bool(snapshot["optionsValidated"]), bool(snapshot["resultValidated"])),
        recorded.get("implementationVersion"),
    )


MISMATCH_WORDS = {
    "structuralFingerprint": "structural fingerprint",
    "definitionId": "definition id",
}
"""How messages name each identity field a snapshot can fail to match."""


def identity_mismatch(snapshot: Mapping[str, Any], computed: Mapping[str, Any]) -> str | None:
    """Return the identity field `snapshot` records wrongly, or `None` when all match.

    The field is `structuralFingerprint` when the structure was edited (checked first),
    else `definitionId` (an edited implementation version, child id or identity version).
    """
    recorded = snapshot["identity"]
    if computed["structuralFingerprint"] != recorded.get("structuralFingerprint"):
        return "structuralFingerprint"
    if any(computed[key] != recorded.get(key) for key in ("definitionId", "version")):
        return "definitionId"
    return None
