"""Tests for one command-line parameter: numbers, help text, descriptor and resolution."""

from __future__ import annotations

import pytest

from tubeless.cli._commands._flags import ABSENT, CliParameter, flag_for, parse_number


@pytest.mark.parametrize(
    ("key", "flag"),
    [("question", "question"), ("maxItems", "max-items"), ("max_items", "max-items"),
     ("HTTPPort", "httpport"), ("v2Name", "v2-name")],
)  # fmt: skip
def test_flags_are_kebab_case_of_keys(key: str, flag: str) -> None:
    """camelCase humps and underscores become hyphens, in lower case."""
    assert flag_for(key) == flag


def test_numbers_are_read_and_checked() -> None:
    """Integers stay integers, decimals are floats, and bounds are enforced."""
    assert parse_number("3", integer=True, minimum=1, maximum=5) == 3
    assert parse_number("2.0", integer=True, minimum=None, maximum=None) == 2
    assert parse_number("-1.5", integer=False, minimum=None, maximum=None) == -1.5
    for text, reason in (
        ("x", "must be a number"),
        ("nan", "must be a number"),
        ("inf", "must be a number"),
        ("1.5", "must be an integer"),
        ("0", "must be at least 1"),
        ("6", "must be at most 5"),
    ):
        with pytest.raises(ValueError, match=reason):
            parse_number(text, integer=True, minimum=1, maximum=5)


def test_help_is_one_sentence_with_the_constraints() -> None:
    """Help joins the description with integer, bounds, default and env, ending in a stop."""
    parameter = CliParameter(
        key="count", flag="count", type="number", integer=True, minimum=1, maximum=3,
        default=2, description="How many.", env="COUNT",
    )  # fmt: skip
    assert parameter.help() == (
        "How many (an integer; at least 1; at most 3; default: 2; environment variable COUNT)."
    )
    required = CliParameter(key="name", flag="name", type="string", description="100% yours")
    assert required.help() == "100%% yours (required)."


def test_the_descriptor_uses_the_reference_field_names() -> None:
    """`to_dict()` is read-only and names fields key, flag, type, required, multiple, ..."""
    parameter = CliParameter(
        key="mode", flag="mode", type="string", choices=("a", "b"), default="a",
        description="Mode.", env="MODE", short="m",
    )  # fmt: skip
    descriptor = parameter.to_dict()
    assert descriptor == {
        "key": "mode",
        "flag": "mode",
        "type": "string",
        "required": False,
        "multiple": False,
        "positional": False,
        "choices": ("a", "b"),
        "default": "a",
        "description": "Mode.",
        "environment": "MODE",
        "short": "m",
    }
    with pytest.raises(TypeError):
        descriptor["key"] = "other"


def test_values_come_from_argv_then_environment_then_default() -> None:
    """The command line wins, then the environment variable, then the default."""
    parameter = CliParameter(key="n", flag="n", type="number", default=1, env="N")
    errors: list[str] = []
    assert parameter.resolve(5, {"N": "3"}, errors) == 5
    assert parameter.resolve(None, {"N": "3"}, errors) == 3
    assert parameter.resolve(None, {}, errors) == 1
    assert errors == []


def test_absent_values_depend_on_the_kind() -> None:
    """Booleans default to false, optional lists to [], optionals are absent; required errs."""
    errors: list[str] = []
    assert CliParameter(key="b", flag="b", type="boolean").resolve(None, {}, errors) is False
    repeat = CliParameter(key="r", flag="r", type="string", multiple=True, optional=True)
    assert repeat.resolve(None, {}, errors) == []
    optional = CliParameter(key="o", flag="o", type="string", optional=True)
    assert optional.resolve(None, {}, errors) is ABSENT
    assert errors == []
    required = CliParameter(key="q", flag="q", type="string", env="Q")
    assert required.resolve(None, {}, errors) is ABSENT
    assert errors == ["Missing required option --q."]


def test_bad_environment_values_are_reported_without_the_value() -> None:
    """Errors name the variable and the rule, never the variable's content."""
    errors: list[str] = []
    CliParameter(key="n", flag="n", type="number", integer=True, env="N").resolve(
        None, {"N": "secret-1"}, errors
    )
    CliParameter(key="b", flag="b", type="boolean", env="B").resolve(None, {"B": "secret"}, errors)
    CliParameter(key="s", flag="s", type="string", choices=("a",), env="S").resolve(
        None, {"S": "secret"}, errors
    )
    assert errors == [
        "Environment variable N must be a number.",
        "Environment variable B must be true or false.",
        "Environment variable S must be one of: a.",
    ]
    assert not any("secret" in error for error in errors)
