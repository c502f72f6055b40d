"""Public classes and functions show the public module they are imported from.

`tubeless.Pipeline` is defined in `tubeless.pipeline._define`; reprs, `help()`, pickles
and error messages should name `tubeless.pipeline` instead, as trio's and numpy's do.
Each public module calls `show_public_module` once, after its `__all__`.
"""

from __future__ import annotations

import types
from collections.abc import Iterable, Mapping


def _private(module: str) -> bool:
    return module.startswith("tubeless.") and any(
        part.startswith("_") for part in module.split(".")
    )


def show_public_module(module: str, names: Iterable[str], namespace: Mapping[str, object]) -> None:
    """Set `__module__` to `module` on each named class or function defined privately.

    Names already showing a public module keep it: `tubeless.Pipeline` reads
    `tubeless.pipeline`, the subpackage that claimed it first.
    """
    for name in names:
        value = namespace.get(name)
        if isinstance(value, (type, types.FunctionType)) and _private(value.__module__):
            value.__module__ = module
