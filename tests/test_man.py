"""`man/tubeless.1` is generated from the real parser and must not drift from it."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

pytest.importorskip("argparse_manpage")

from tubeless.cli._man import SECTIONS, release_date

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "man" / "tubeless.1"


def test_the_committed_man_page_matches_the_parser(tmp_path: Path) -> None:
    """Regenerating the page with `python -m tubeless.cli._man` gives the committed bytes."""
    target = tmp_path / "tubeless.1"
    subprocess.run(
        [sys.executable, "-m", "tubeless.cli._man", str(target), str(ROOT / "CHANGELOG.md")],
        check=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert target.read_text(encoding="utf-8") == PAGE.read_text(encoding="utf-8"), (
        "man/tubeless.1 is out of date: run `python -m tubeless.cli._man man/tubeless.1`"
    )


def test_the_page_renders_every_command_and_option() -> None:
    """groff renders a section per command and every option with its sentence of help."""
    groff = shutil.which("groff")
    if groff is None:
        pytest.skip("groff is not installed")
    rendered = subprocess.run(
        [groff, "-man", "-Tascii", str(PAGE)],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    text = re.sub(r".\x08", "", rendered)
    flat = " ".join(re.sub(r"-\n\s*", "", text).split())
    for command in ("list", "inspect", "plan", "graph", "run", "history"):
        assert f"COMMAND 'tubeless {command}'" in flat
    for option in (
        "--export NAME",
        "--project PATH",
        "--target ID",
        "--step ID",
        "--dry-run",
        "--explain",
        "--json",
        "--direction DIRECTION",
        "--descriptions",
        "--markdown",
        "--trace PATH",
        "--store PATH",
        "--events",
        "RUN_ID",
    ):
        assert option in flat, option
    assert "Append the run's trace records to the SQLite store at PATH (created" in flat
    assert "or to the PostgreSQL database at a postgresql:// URL" in flat
    assert "Exit codes: 0 success" in flat
    for heading, _ in SECTIONS:
        assert f"\n{heading}\n" in text, heading
    assert "tubeless.pipeline_tool(pipeline, description=...) registers" in flat


def test_the_page_is_dated_by_the_release_not_a_fixed_day() -> None:
    """The header names the installed version and its CHANGELOG release date."""
    version = metadata.version("tubeless-pipelines")
    date = release_date((ROOT / "CHANGELOG.md").read_text(encoding="utf-8"), version)
    header = PAGE.read_text(encoding="utf-8").splitlines()[0]
    assert header == (
        f'.TH TUBELESS "1" "{date.replace("-", chr(92) + "-")}" '
        f'"tubeless\\-pipelines {version}" "tubeless manual"'
    )
    assert "2025" not in header
    changelog = "## [Unreleased]\n\n## [0.2.0] - 2026-03-04\n\n## [0.1.0] - 2026-01-02\n"
    assert release_date(changelog, "0.1.0") == "2026-01-02"
    assert release_date(changelog, "0.2.0") == "2026-03-04"
    assert release_date(changelog, "0.3.0.dev1") == "unreleased"
    assert release_date(changelog, "0.3.0") == "unreleased"


@pytest.mark.slow
def test_the_built_wheel_installs_the_page_under_share_man(tmp_path: Path) -> None:
    """Building the wheel generates the page from the parser and ships it as man1/tubeless.1.

    The build reads `[build_manpages]` in `setup.cfg`; the page it makes differs from the
    committed one only in its date (the build's, not the changelog's).
    """
    pytest.importorskip("wheel")
    import zipfile

    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "setup.cfg", "MANIFEST.in", "README.md", "CHANGELOG.md"):
        shutil.copy(ROOT / name, source / name)
    for folder in ("tubeless", "man"):
        shutil.copytree(
            ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__")
        )
    out = tmp_path / "out"
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(out),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    (wheel,) = out.glob("tubeless_pipelines-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        pages = [name for name in archive.namelist() if name.endswith("/share/man/man1/tubeless.1")]
        assert pages == [f"{wheel.name.split('-py3')[0]}.data/data/share/man/man1/tubeless.1"]
        page = archive.read(pages[0]).decode("utf-8").splitlines()
    committed = PAGE.read_text(encoding="utf-8").splitlines()
    assert page[0].startswith('.TH TUBELESS "1" ')
    assert page[1:] == committed[1:]
