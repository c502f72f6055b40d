"""The installed distribution's version, read from its metadata when first asked for."""

from __future__ import annotations

import functools

DISTRIBUTION = "tubeless-pipelines"
"""The name tubeless is installed under (`tubeless` on PyPI is an unrelated project)."""


@functools.cache
def package_version() -> str:
    """Return the installed version of `tubeless-pipelines`, `0+unknown` when not installed.

    `importlib.metadata` is imported here, on the first call, so `import tubeless` does
    not pay for it.
    """
    from importlib import metadata

    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "0+unknown"  # run from a source tree that was never installed
