"""`tubeless.__version__`: the installed distribution's version, read lazily."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

import pytest

import tubeless


def test_version_is_the_installed_distributions() -> None:
    """`__version__` is the version `tubeless-pipelines` was installed with."""
    assert tubeless.__version__ == metadata.version("tubeless-pipelines")
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        tubeless.nothing_here  # type: ignore[attr-defined]  # noqa: B018


@pytest.mark.slow
def test_importing_tubeless_does_not_read_package_metadata() -> None:
    """`importlib.metadata` is imported when `__version__` is first read, not before."""
    code = (
        "import sys, tubeless\n"
        "assert 'importlib.metadata' not in sys.modules\n"
        "print(tubeless.__version__)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert done.stdout.strip() == metadata.version("tubeless-pipelines")
