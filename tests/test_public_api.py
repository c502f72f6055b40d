"""The public namespaces: every `__all__` is sorted, complete and documented."""

from __future__ import annotations

import importlib
import inspect
import types

import pytest

PUBLIC_MODULES = [
    "tubeless",
    "tubeless.agent",
    "tubeless.cli",
    "tubeless.errors",
    "tubeless.mcp",
    "tubeless.pipeline",
    "tubeless.progress",
    "tubeless.schema",
    "tubeless.testing",
    "tubeless.trace",
    "tubeless.trace.otel",
]


def _isort_key(name: str) -> tuple[int, str]:
    if name.isupper():
        return (0, name)
    return (1, name) if name[:1].isupper() else (2, name)


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_all_is_sorted_and_unique(name: str) -> None:
    """`__all__` lists each name once: constants, then classes, then functions, each sorted."""
    module = importlib.import_module(name)
    exported = list(module.__all__)
    assert exported == sorted(set(exported), key=_isort_key)


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_all_is_complete(name: str) -> None:
    """Every public attribute of a package is exported, and every export exists."""
    module = importlib.import_module(name)
    for exported in module.__all__:
        assert hasattr(module, exported), f"{name}.{exported} is listed but missing"
    public = {
        attr
        for attr, value in vars(module).items()
        if not attr.startswith("_")
        and not isinstance(value, types.ModuleType)
        and getattr(value, "__module__", name).startswith("tubeless")
        and attr not in {"annotations"}
    }
    missing = sorted(public - set(module.__all__))
    assert not missing, f"{name} has public names outside __all__: {missing}"


def _documented(value: object) -> bool:
    if inspect.isclass(value) or inspect.isfunction(value) or inspect.ismethod(value):
        return bool(inspect.getdoc(value))
    return True


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_every_export_is_documented(name: str) -> None:
    """Every exported class and function has a docstring, and so do public methods."""
    module = importlib.import_module(name)
    assert inspect.getdoc(module), f"{name} has no module docstring"
    for exported in module.__all__:
        value = getattr(module, exported)
        assert _documented(value), f"{name}.{exported} has no docstring"
        if inspect.isclass(value):
            for attr, member in vars(value).items():
                if attr.startswith("_") or not callable(member):
                    continue
                assert inspect.getdoc(member), f"{name}.{exported}.{attr} has no docstring"


def test_everyday_names_at_top_level() -> None:
    """The everyday names are importable from `tubeless` itself."""
    import tubeless

    for name in (
        "create_steps",
        "define_pipeline",
        "require_outputs",
        "define_tool",
        "define_agent",
        "ToolError",
        "AgentLimits",
        "define_project",
        "define_pipeline_command",
        "PipelineExecutionError",
        "PipelineDefinitionError",
    ):
        assert hasattr(tubeless, name), name


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_exports_show_a_public_module(name: str) -> None:
    """Every exported class and function names a public module that exports it."""
    module = importlib.import_module(name)
    for exported in module.__all__:
        value = getattr(module, exported)
        if not (inspect.isclass(value) or inspect.isfunction(value)):
            continue
        home = value.__module__
        assert home in PUBLIC_MODULES, f"{name}.{exported} shows module {home}"
        assert getattr(importlib.import_module(home), value.__qualname__) is value


def test_everyday_classes_read_as_their_package() -> None:
    """`tubeless.Pipeline` shows `tubeless.pipeline`, not the private module defining it."""
    import tubeless
    import tubeless.trace

    assert tubeless.Pipeline.__module__ == "tubeless.pipeline"
    assert repr(tubeless.Pipeline) == "<class 'tubeless.pipeline.Pipeline'>"
    assert tubeless.define_tool.__module__ == "tubeless.agent"
    assert tubeless.Diagnostic.__module__ == "tubeless.errors"
    assert tubeless.trace.SqliteTraceStore.__module__ == "tubeless.trace"
