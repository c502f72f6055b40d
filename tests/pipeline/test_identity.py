"""Definition identity: snapshots, the two fingerprints, and decoding stored snapshots."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest

from tubeless.errors import DefinitionIdentityError
from tubeless.pipeline import (
    create_steps,
    decode_snapshot,
    define_pipeline,
    fingerprint,
    require_outputs,
)

_SHA = re.compile(r"^sha256:[0-9a-f]{64}$")


def _value(value: Any) -> Any:
    return lambda inputs, context: value


def _single(
    *,
    version: str | None = None,
    name: str | None = None,
    handler: int = 1,
    dry_run: str | None = None,
) -> Any:
    step = create_steps()
    a = step("a", name=name, description=name, dry_run=dry_run, run=_value(handler))
    return define_pipeline(
        id="identity",
        implementation_version=version,
        steps=[a],
        targets=[a],
        finalize=require_outputs([a], lambda outputs, context: outputs["a"]),
    )


def _parent(child: Any) -> Any:
    wrapper = create_steps().from_pipeline("child", pipeline=child)
    return define_pipeline(id="parent", steps=[wrapper])


def test_identity_hashes_are_sha256() -> None:
    """Both hashes are `sha256:<64 lowercase hex>` and version 1 for a plain graph."""
    identity = _single().definition.identity

    assert identity.version == 1
    assert _SHA.match(identity.structural_fingerprint)
    assert _SHA.match(identity.definition_id)
    assert identity.implementation_version is None
    assert identity.to_dict() == {
        "version": 1,
        "structuralFingerprint": identity.structural_fingerprint,
        "definitionId": identity.definition_id,
    }


def test_implementation_version_changes_only_the_definition_id() -> None:
    """A new `implementation_version` keeps the fingerprint and changes the definition id."""
    original = _single().definition.identity
    updated = _single(version="build:two").definition.identity

    assert updated.structural_fingerprint == original.structural_fingerprint
    assert updated.definition_id != original.definition_id
    assert updated.implementation_version == "build:two"
    assert updated.to_dict()["implementationVersion"] == "build:two"


def test_presentation_and_handlers_do_not_change_identity() -> None:
    """Names, descriptions and handler code are not part of the definition."""
    assert _single(name="Renamed", handler=2).definition == _single().definition


def test_dry_run_policy_changes_the_structural_fingerprint() -> None:
    """A step's dry-run kind is structure."""
    assert (
        _single(dry_run="skip").definition.identity.structural_fingerprint
        != _single().definition.identity.structural_fingerprint
    )


def test_edges_targets_finalizer_and_order_are_fingerprinted() -> None:
    """Each edge kind, the targets, the finalizer's requirements and execution order count."""
    step = create_steps()
    a = step("a", run=_value(1))
    b = step("b", run=_value(2))

    def with_edge(kind: str) -> str:
        c = step(
            "c",
            depends_on=[a] if kind == "required" else [],
            optional_depends_on=[a] if kind == "optional" else [],
            skip_after_failure_of=[a] if kind == "gate" else [],
            run=_value(3),
        )
        return define_pipeline(id="edges", steps=[a, b, c]).definition.identity.definition_id

    assert len({with_edge(kind) for kind in ("none", "required", "optional", "gate")}) == 4
    base = define_pipeline(id="edges", steps=[a, b], targets=[])
    changed = [
        define_pipeline(id="edges", steps=[b, a], targets=[]),
        define_pipeline(id="edges", steps=[a, b], targets=[a]),
        define_pipeline(
            id="edges",
            steps=[a, b],
            targets=[],
            finalize=require_outputs([a], lambda outputs, context: 0),
        ),
    ]
    fingerprints = {p.definition.identity.structural_fingerprint for p in changed}
    assert base.definition.identity.structural_fingerprint not in fingerprints
    assert len(fingerprints) == 3


def test_target_order_does_not_matter() -> None:
    """Targets are a set: their order changes neither snapshot nor identity."""
    step = create_steps()
    a = step("a", run=_value(1))
    b = step("b", run=_value(2))

    assert (
        define_pipeline(id="t", steps=[a, b], targets=[b, a]).definition
        == define_pipeline(id="t", steps=[a, b], targets=[a, b]).definition
    )


def test_default_targets_equal_the_explicit_ones() -> None:
    """Omitted targets and finalizer resolve to the same definition as the explicit ones."""
    step = create_steps()
    load = step("load", run=_value(1))
    publish = step("publish", depends_on=[load], run=_value(2))
    defaults = define_pipeline(id="defaults", steps=[publish, load])
    explicit = define_pipeline(
        id="defaults",
        steps=[publish, load],
        targets=[publish],
        finalize=lambda outputs, context: outputs["publish"],
    )

    assert [entry["id"] for entry in defaults.definition.steps] == ["load", "publish"]
    assert defaults.definition.target_ids == ("publish",)
    assert defaults.definition == explicit.definition


def test_key_order_is_irrelevant() -> None:
    """Fingerprints hash key-sorted JSON, and a decoded snapshot may list keys in any order."""
    assert fingerprint({"a": 1, "b": [1, {"y": 2, "x": 3}]}) == fingerprint(
        {"b": [1, {"x": 3, "y": 2}], "a": 1}
    )
    data = _single(version="v1").definition.to_dict()
    reordered = json.loads(json.dumps(data, sort_keys=True))
    reordered["steps"] = [dict(reversed(list(entry.items()))) for entry in reordered["steps"]]
    reordered = dict(reversed(list(reordered.items())))

    assert decode_snapshot(reordered).identity == _single(version="v1").definition.identity


def test_child_implementation_version_changes_only_the_parent_definition_id() -> None:
    """A nested child's new version reaches the parent's definition id, not its fingerprint."""
    one = _parent(_single(version="one")).definition.identity
    two = _parent(_single(version="two")).definition.identity

    assert one.structural_fingerprint == two.structural_fingerprint
    assert one.definition_id != two.definition_id
    assert one.implementation_version is None


def test_child_structure_changes_the_parent_fingerprint() -> None:
    """A structural change inside the child changes the parent's structural fingerprint."""
    plain = _parent(_single()).definition.identity
    skipping = _parent(_single(dry_run="skip")).definition.identity

    assert plain.structural_fingerprint != skipping.structural_fingerprint


def test_fan_out_concurrency_is_structure() -> None:
    """A fan-out's static concurrency is part of the parent's fingerprint."""

    def fan_out(concurrency: int) -> str:
        wrapper = create_steps().for_each_pipeline(
            "child",
            pipeline=_single(),
            items=lambda inputs, context: [1],
            key=lambda item, index: str(item),
            concurrency=concurrency,
        )
        pipeline = define_pipeline(id="parent", steps=[wrapper])
        return pipeline.definition.identity.structural_fingerprint

    assert fan_out(1) != fan_out(2)


def test_iteration_uses_identity_version_two() -> None:
    """An iterate wrapper, or a child that has one, makes the identity version 2."""
    repeat = create_steps().iterate_pipeline(
        "repeat",
        pipeline=_single(),
        max_iterations=3,
        initial_state=lambda inputs, context: 0,
        transition=lambda result, state, context: {"kind": "finish", "result": result},
        controls={"max_concurrency": 2},
    )
    looping = define_pipeline(id="looping", steps=[repeat])
    entry = looping.definition.to_dict()["steps"][0]

    assert looping.definition.identity.version == 2
    assert entry["nestedPipeline"]["mode"] == "iterate"
    assert entry["nestedPipeline"]["maxIterations"] == 3
    assert entry["nestedPipeline"]["controls"] == {"maxConcurrency": 2}
    assert _parent(looping).definition.identity.version == 2


def test_snapshot_is_deeply_frozen_and_round_trips() -> None:
    """The snapshot cannot be changed, and its wire form decodes back to an equal snapshot."""
    pipeline = _parent(_single(version="v"))
    snapshot = pipeline.definition
    entry = snapshot.steps[0]

    with pytest.raises(TypeError):
        entry["id"] = "changed"  # type: ignore[index]
    assert isinstance(entry["dependencies"], tuple)
    data = snapshot.to_dict()
    assert json.loads(json.dumps(data)) == data
    assert decode_snapshot(data) == snapshot
    assert data["steps"][0]["nestedPipeline"]["identity"] == (
        _single(version="v").definition.identity.to_dict()
    )


def test_decode_rejects_an_edited_snapshot() -> None:
    """Changing the content of a stored snapshot breaks its structural fingerprint."""
    data = _single().definition.to_dict()
    edited = copy.deepcopy(data)
    edited["steps"][0]["dryRun"] = "skip"

    with pytest.raises(DefinitionIdentityError, match="structural fingerprint") as caught:
        decode_snapshot(edited)
    assert caught.value.code == "TUBELESS_DEFINITION_IDENTITY_INVALID"


def test_decode_rejects_a_changed_implementation_version() -> None:
    """Changing the recorded implementation version breaks the definition id."""
    data = _single(version="one").definition.to_dict()
    data["identity"]["implementationVersion"] = "two"

    with pytest.raises(DefinitionIdentityError, match="definition id"):
        decode_snapshot(data)


def test_decode_rejects_malformed_data() -> None:
    """Missing fields are reported as a malformed snapshot."""
    data = _single().definition.to_dict()
    del data["targetIds"]

    with pytest.raises(DefinitionIdentityError, match="Malformed definition snapshot"):
        decode_snapshot(data)


def test_runs_and_plans_share_the_definition() -> None:
    """A run records the definition's identity whatever its controls."""
    pipeline = _single(version="git:abc")
    run = pipeline.run(controls={"dry_run": True, "step_ids": ["a"]})

    assert run.definition_identity == pipeline.definition.identity
    assert run.to_dict()["definitionIdentity"]["implementationVersion"] == "git:abc"
