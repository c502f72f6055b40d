"""The tubeless pytest plugin: a cassette per test, recorded once and replayed after.

Installed with tubeless as the `pytest11` entry point `tubeless`, so pytest loads it by
itself (without the installed package, load it with `-p tubeless.pytest_plugin`). It gives:

- the fixture `tubeless_cassette`: a `tubeless.testing.Cassette` at
  `cassettes/<test module>/<test name>.json` beside the test file, in `auto` mode (replay
  when the file exists, else record);
- the option `--tubeless-record`: every `tubeless_cassette` records again (mode `record`).

This is the only module of tubeless that imports pytest.
"""

from __future__ import annotations

import pathlib
import re

import pytest

from tubeless.testing import Cassette

_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-\[\]]+")


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add `--tubeless-record`."""
    parser.getgroup("tubeless").addoption(
        "--tubeless-record",
        action="store_true",
        default=False,
        help="record every tubeless_cassette again instead of replaying it",
    )


def cassette_path(test_file: pathlib.Path, test_name: str) -> pathlib.Path:
    """Where a test's cassette lives: `cassettes/<module>/<test name>.json` beside it.

    Characters that are unsafe in a file name (from parametrize ids) become `_`.
    """
    return test_file.parent / "cassettes" / test_file.stem / f"{_UNSAFE.sub('_', test_name)}.json"


@pytest.fixture
def tubeless_cassette(request: pytest.FixtureRequest) -> Cassette:
    """A cassette for this test, beside its file; `--tubeless-record` records it again."""
    record = bool(request.config.getoption("tubeless_record"))
    path = cassette_path(pathlib.Path(request.node.path), request.node.name)
    return Cassette(path, mode="record" if record else "auto")
