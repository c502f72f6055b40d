"""The README's Python examples run as written."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_blocks_run() -> None:
    """Each fenced Python block of README.md runs without error and prints what it claims."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text("utf-8"), re.S)
    assert blocks
    outputs = [
        subprocess.run(
            [sys.executable, "-c", block], capture_output=True, text=True, check=True, timeout=60
        ).stdout
        for block in blocks
    ]
    assert outputs[0].strip() == "HELLO"
    typed = outputs[1].splitlines()
    assert json.loads(typed[0]) == {"id": "leg-0", "tool": "distance", "ok": True, "value": 200}
    assert json.loads(typed[1])["error"]["code"] == "SAME_CITY"
    assert typed[2] == "cancelled"
    assert "completed 10" in outputs[2]


ROOT = README.parent


def _readme() -> str:
    return " ".join(README.read_text("utf-8").split())


def test_readme_says_install_from_a_checkout_while_unpublished() -> None:
    """The README does not promise `pip install tubeless-pipelines`, which fails today."""
    text = _readme()
    assert "pip install tubeless-pipelines`" not in text
    assert "It is not on PyPI yet: install it from a checkout, `pip install .`" in text


def test_readme_says_what_sleep_does_on_cancel() -> None:
    """`context.sleep` raises `RunCancelledError` when the run is cancelled, as documented."""
    import threading

    import pytest

    from tubeless.errors import RunCancelledError
    from tubeless.pipeline import create_steps, define_pipeline

    assert "`context.sleep(seconds)` ends early by raising `RunCancelledError`" in _readme()
    stop = threading.Event()
    seen: list[str] = []

    def nap(inputs: object, context: object) -> None:
        stop.set()
        try:
            context.sleep(30)  # type: ignore[attr-defined]
        except RunCancelledError:
            seen.append("raised")
            raise

    pipeline = define_pipeline(id="nap", steps=[create_steps().step("nap", run=nap)])
    run = pipeline.run(None, context={"signal": stop})
    assert (run.status, seen) == ("cancelled", ["raised"])
    with pytest.raises(RunCancelledError):
        pipeline.run_or_raise(None, context={"signal": stop})


def test_the_process_pool_snippet_guards_its_main_code() -> None:
    """The process-pool snippet starts the pool under `if __name__ == "__main__":`."""
    block = re.search(r"```py\n(import concurrent\.futures.*?)```", README.read_text("utf-8"), re.S)
    assert block is not None
    code = block.group(1)
    assert 'if __name__ == "__main__":' in code
    assert code.index('if __name__ == "__main__":') < code.index("ProcessPoolExecutor(")


def test_examples_that_export_a_command_run_as_programs() -> None:
    """`python examples/agent.py --question ...` prints the answer, as the README says."""
    assert 'python examples/agent.py --question "hello tubeless"' in _readme()
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "agent.py"), "--question", "hello tubeless"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert (done.returncode, done.stdout) == (0, "14 characters; HELLO; TUBELESS\n"), done.stderr
    for example in sorted((ROOT / "examples").glob("*.py")):
        source = example.read_text("utf-8")
        if "define_pipeline_command(" in source:
            assert 'if __name__ == "__main__":' in source, example.name


def test_readme_documents_execution_key() -> None:
    """`define_pipeline_command(execution_key=True)` is named where `--execution-key` is."""
    assert "`define_pipeline_command(agent, execution_key=True)`" in _readme()
