"""Tests for inferring command-line flags from an options JSON Schema."""

from __future__ import annotations

from typing import Any

import pytest

from tubeless.cli._commands._flags import NO_DEFAULT
from tubeless.cli._commands._schema_flags import infer_parameters


def _one(schema: dict[str, Any], required: list[str] | None = None, **overrides: Any) -> Any:
    document = {"type": "object", "properties": {"value": schema}}
    if required is not None:
        document["required"] = required
    (parameter,) = infer_parameters(document, overrides or None)
    return parameter


def test_each_property_becomes_a_kebab_case_flag_keyed_by_its_name() -> None:
    """Keys keep the property names; flags are kebab-case of camelCase and snake_case."""
    parameters = infer_parameters(
        {
            "type": "object",
            "properties": {"maxItems": {"type": "integer"}, "dry_name": {"type": "string"}},
        }
    )
    assert [(p.key, p.flag) for p in parameters] == [
        ("maxItems", "max-items"),
        ("dry_name", "dry-name"),
    ]


def test_strings_with_choices_from_enum_or_const() -> None:
    """`enum` and `const` become choices; an enum without a type takes its values' type."""
    assert _one({"type": "string", "enum": ["a", "b"]}).choices == ("a", "b")
    assert _one({"const": "only"}).choices == ("only",)
    assert _one({"enum": ["x", "y"]}).type == "string"


def test_numbers_keep_integer_and_bounds() -> None:
    """`integer` and `number` give number flags with `minimum`/`maximum` as bounds."""
    integer = _one({"type": "integer", "minimum": 1, "maximum": 9})
    number = _one({"type": "number", "minimum": 0.5})
    assert (integer.type, integer.integer, integer.minimum, integer.maximum) == (
        "number", True, 1, 9,
    )  # fmt: skip
    assert (number.integer, number.minimum, number.maximum) == (False, 0.5, None)


def test_booleans_and_repeatable_arrays() -> None:
    """Booleans are boolean flags; arrays of strings or numbers are repeatable."""
    assert _one({"type": "boolean"}).type == "boolean"
    strings = _one({"type": "array", "items": {"type": "string", "enum": ["p", "q"]}})
    numbers = _one({"type": "array", "items": {"type": "integer", "minimum": 0}})
    assert (strings.multiple, strings.choices) == (True, ("p", "q"))
    assert (numbers.multiple, numbers.integer, numbers.minimum) == (True, True, 0)


def test_defaults_required_and_optional() -> None:
    """A matching default is kept; a non-boolean without default is optional unless required."""
    assert _one({"type": "string", "default": "x"}).default == "x"
    assert _one({"type": "integer", "default": 2.0}).default == 2
    assert _one({"type": "string"}).optional is True
    required = _one({"type": "string"}, required=["value"])
    assert (required.optional, required.required, required.default) == (False, True, NO_DEFAULT)
    assert _one({"type": "boolean"}).optional is False


def test_descriptions_and_overrides() -> None:
    """`description` is copied; overrides change description, flag, short and env."""
    assert _one({"type": "string", "description": "Text."}).description == "Text."
    changed = _one(
        {"type": "string"},
        value={"description": "New.", "flag": "input", "short": "i", "env": "VALUE_INPUT"},
    )
    assert (changed.description, changed.flag, changed.short, changed.env) == (
        "New.", "input", "i", "VALUE_INPUT",
    )  # fmt: skip


def test_local_references_are_followed_with_siblings_winning() -> None:
    """`$ref` into `$defs` resolves, and sibling keywords override the target."""
    schema: dict[str, Any] = {
        "$ref": "#/$defs/Options",
        "$defs": {
            "Options": {"type": "object", "properties": {"mode": {"$ref": "#/$defs/Mode"}}},
            "Mode": {"type": "string", "enum": ["a", "b"], "description": "Old."},
        },
    }
    schema["$defs"]["Options"]["properties"]["mode"]["description"] = "New."
    (mode,) = infer_parameters(schema)
    assert (mode.key, mode.choices, mode.description) == ("mode", ("a", "b"), "New.")


def test_a_required_array_stays_required() -> None:
    """A required array gives a required repeatable flag; an optional one still gives []."""
    schema = {"type": "string"}
    required = _one({"type": "array", "items": schema}, required=["value"])
    optional = _one({"type": "array", "items": schema})

    assert (required.multiple, required.required, required.optional) == (True, True, False)
    assert "required" in required.help()
    errors: list[str] = []
    assert optional.resolve(None, {}, errors) == []
    assert (optional.required, errors) == (False, [])


def test_pydantic_models_are_inferred_through_their_json_schema() -> None:
    """A pydantic model's `model_json_schema()` (with `$defs` for enums) gives flags."""
    pytest.importorskip("pydantic")
    import enum

    from pydantic import BaseModel, Field

    class Color(str, enum.Enum):
        red = "red"
        blue = "blue"

    class Options(BaseModel):
        question: str
        color: Color = Color.red
        count: int = Field(default=1, ge=1, le=5, description="How many.")
        loud: bool = False

    by_key = {p.key: p for p in infer_parameters(Options.model_json_schema())}
    assert by_key["question"].required
    assert (by_key["color"].choices, by_key["color"].default) == (("red", "blue"), "red")
    assert (by_key["count"].minimum, by_key["count"].maximum, by_key["count"].default) == (1, 5, 1)
    assert by_key["count"].description == "How many."
    assert by_key["loud"].type == "boolean"


@pytest.mark.parametrize(
    ("schema", "location", "reason"),
    [
        ({"type": "array"}, "pipeline options", "expected a flat object schema"),
        ({"type": "object", "anyOf": [{}]}, "pipeline options", "expected a flat object schema"),
        ({"$ref": "http://x/y"}, "pipeline options", "only local JSON Schema references"),
        ({"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/a"}}}, "pipeline options",
         "recursive schema"),
        ({"type": "object", "properties": {"v": {"anyOf": [{"type": "string"}]}}}, "v",
         "union and conditional schemas need an explicit mapping"),
        ({"type": "object", "properties": {"v": {"type": "object"}}}, "v",
         "expected a string, number, boolean, or repeatable scalar array"),
        ({"type": "object", "properties": {"v": {"type": ["string", "null"]}}}, "v",
         "expected a string, number, boolean, or repeatable scalar array"),
        ({"type": "object", "properties": {"v": {"type": "string", "enum": ["a", 1]}}}, "v",
         "expected string choices"),
        ({"type": "object", "properties": {"v": {"type": "array", "items": {"type": "string"},
          "default": []}}}, "v", "array defaults, tuples and unions need an explicit mapping"),
        ({"type": "object", "properties": {"v": {"type": "array", "prefixItems": []}}}, "v",
         "array defaults, tuples and unions"),
        ({"type": "object", "properties": {"v": {"type": "array", "items": {"type": "boolean"}}}},
         "v", "repeatable flags require string or number items"),
        ({"type": "object", "properties": {"v": {"type": "integer", "default": "1"}}}, "v",
         "default does not match the flag type"),
        ({"type": "object", "properties": {"v": {"type": "integer", "default": 1.5}}}, "v",
         "default does not match the flag type"),
        ({"type": "object", "properties": {"v": {"type": "number", "default": True}}}, "v",
         "default does not match the flag type"),
        ({"type": "object", "properties": {"a b": {"type": "string"}}}, "a b",
         "--a b is not a usable flag name"),
    ],
)  # fmt: skip
def test_unsupported_schemas_are_rejected_with_the_reference_message(
    schema: dict[str, Any], location: str, reason: str
) -> None:
    """Each rejection says where, why, and to supply explicit params."""
    with pytest.raises(ValueError) as caught:
        infer_parameters(schema)
    message = str(caught.value)
    assert message.startswith(f"Cannot infer CLI flags for {location}: {reason}")
    assert ". Supply explicit params" in message


def test_overrides_must_name_options_and_known_fields() -> None:
    """An override of an unknown property or field, or a bad env or short name, is refused."""
    schema = {"type": "object", "properties": {"v": {"type": "string"}}}
    with pytest.raises(ValueError, match="Cannot infer CLI flags for w: override does not name"):
        infer_parameters(schema, {"w": {"flag": "x"}})
    with pytest.raises(ValueError, match="may change only description, flag, short and env"):
        infer_parameters(schema, {"v": {"default": "x"}})
    with pytest.raises(ValueError, match="invalid environment variable name"):
        infer_parameters(schema, {"v": {"env": "NOT-VALID"}})
    with pytest.raises(ValueError, match="invalid short alias"):
        infer_parameters(schema, {"v": {"short": "h"}})
    array = {"type": "object", "properties": {"v": {"type": "array", "items": {"type": "string"}}}}
    with pytest.raises(ValueError, match="repeatable and cannot read an environment variable"):
        infer_parameters(array, {"v": {"env": "V"}})


TRIP_MODULE = """
from pydantic import BaseModel

import tubeless


class Trip(BaseModel):
    cities: list[str]


agent = tubeless.define_agent(
    id="trip",
    input_schema=Trip,
    result_schema={"type": "string"},
    initial_state=lambda trip: {"cities": trip.cities},
    decide=lambda state, context: {"kind": "finish", "result": " > ".join(state["cities"])},
    limits={"max_turns": 2, "max_calls": 2},
)
command = tubeless.define_pipeline_command(agent, reporter=False)
"""


@pytest.mark.slow
def test_a_required_list_option_is_required_on_the_command_line(cli: Any) -> None:
    """`--cities` of a required `list[str]` is required in the help and when missing."""
    pytest.importorskip("pydantic")
    cli.write("trip.py", TRIP_MODULE)

    missing = cli("run", "trip.py")
    shown = cli("run", "trip.py", "--", "--help")
    given = cli("run", "trip.py", "--", "--cities", "Oslo", "--cities", "Rome")

    assert missing.code == 4
    assert "Error: The following arguments are required: --cities." in missing.stderr
    assert "usage: trip [-h] --cities CITIES" in shown.stdout
    assert "(repeatable; required)" in shown.stdout
    assert given.code == 0, given.stderr
