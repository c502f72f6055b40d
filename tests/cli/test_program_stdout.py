"""Tests for diverting stdout to stderr while a trace owns stdout."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import os, subprocess, sys
    from tubeless.cli._program._stdout import diverted_stdout

    print("before")
    with diverted_stdout() as trace:
        print("python print")
        os.write(1, b"raw write\\n")
        subprocess.run([sys.executable, "-c", "print('child process')"], check=True)
        trace.write("trace line\\n")
    print("after")
    """
)


@pytest.mark.slow
def test_everything_but_the_trace_goes_to_stderr() -> None:
    """Prints, raw writes and child processes reach stderr; only the trace reaches stdout."""
    completed = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120, check=True
    )
    assert completed.stdout == "before\ntrace line\nafter\n"
    assert completed.stderr == "python print\nraw write\nchild process\n"


def test_without_file_descriptors_only_sys_stdout_is_swapped(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Streams without descriptors (as under capture) fall back to swapping `sys.stdout`."""
    import io

    from tubeless.cli._program._stdout import diverted_stdout

    fake_out, fake_err = io.StringIO(), io.StringIO()
    original = (sys.stdout, sys.stderr)
    sys.stdout, sys.stderr = fake_out, fake_err
    try:
        with diverted_stdout() as trace:
            print("to stderr")
            trace.write("to stdout\n")
    finally:
        sys.stdout, sys.stderr = original
    assert (fake_out.getvalue(), fake_err.getvalue()) == ("to stdout\n", "to stderr\n")
