"""A fixed run's trace, byte for byte: the NDJSON lines and SQLite rows never drift.

The golden files were written by the release before the record encoding moved into
`tubeless.trace._encoding`; regenerate them (`python tests/trace/test_golden.py DIR`)
only for a deliberate change of the wire format.
"""

from __future__ import annotations

import json
import re
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tubeless import create_steps, define_pipeline
from tubeless.trace import NdjsonTraceSink, SqliteTraceStore, compose_sinks

DATA = Path(__file__).parent / "data"
_UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _stable(data: bytes) -> bytes:
    """`data` with each child run's random UUID named by its order of appearance."""
    names: dict[bytes, bytes] = {}
    return _UUID.sub(lambda found: names.setdefault(found[0], b"uuid-%d" % len(names)), data)


def _clock() -> Any:
    ticks: Iterator[int] = iter(range(1_700_000_000_000, 1_800_000_000_000, 7))
    return lambda: next(ticks)


def _fixed_run(directory: Path) -> tuple[Path, Path]:
    """Run a pipeline with a log, a failure, odd text and numbers and a mapped child."""
    step = create_steps()

    def load(inputs: Any, context: Any) -> Any:
        context.log.info('héllo "q" \u2028 \\ 🙂 \x01')
        return {"text": "é\t", "big": 2**40, "small": 1.5e-7, "whole": 2.0, "items": ["a", "é"]}

    def boom(inputs: Any, context: Any) -> Any:
        raise ValueError('no "way" é')

    inner_step = create_steps()
    echo = inner_step("echo", run=lambda inputs, context: {"item": context.options})
    inner = define_pipeline(id="inner-é", steps=[echo])
    loaded = step("load", name="Löad", description="Reads.", run=load)
    fan = step.for_each_pipeline(
        "fan",
        pipeline=inner,
        items=lambda inputs, context: ["a", "é"],
        key=lambda item, index: f'item-"{item}"\\',
        map_options=lambda item, index, inputs, context: {"item": item},
        depends_on=[loaded],
    )
    failing = step("boom", depends_on=[fan], run=boom)
    pipeline = define_pipeline(id="golden-é", steps=[loaded, failing, fan])
    ndjson, sqlite = directory / "run.ndjson", directory / "run.sqlite"
    with NdjsonTraceSink(ndjson) as lines, SqliteTraceStore(sqlite) as store:
        pipeline.run(
            None,
            context={
                "tracing": compose_sinks(lines, store),
                "run_id": "golden-é:run",
                "correlation_id": "correlation-1",
                "now": _clock(),
            },
        )
    return ndjson, sqlite


def _rows(path: Path) -> bytes:
    """The store's rows, in order, as JSON text (children's UUIDs named as `_stable` does)."""
    connection = sqlite3.connect(path)
    try:
        cursor = connection.execute("SELECT * FROM pipeline_run_events ORDER BY id")
        rows = [list(row) for row in cursor.fetchall()]
    finally:
        connection.close()
    return _stable((json.dumps(rows, ensure_ascii=False, indent=1) + "\n").encode("utf-8"))


def test_a_fixed_run_writes_the_golden_bytes(tmp_path: Path) -> None:
    """The NDJSON file and the SQLite rows of a fixed run equal the golden ones exactly.

    Only the child runs' random UUIDs are named by their order of appearance.
    """
    ndjson, sqlite = _fixed_run(tmp_path)
    assert _stable(ndjson.read_bytes()) == (DATA / "golden-run.ndjson").read_bytes()
    assert _rows(sqlite) == (DATA / "golden-run.rows.json").read_bytes()


if __name__ == "__main__":
    target = Path(sys.argv[1])
    target.mkdir(parents=True, exist_ok=True)
    lines_path, rows_path = _fixed_run(target)
    (target / "golden-run.ndjson").write_bytes(_stable(lines_path.read_bytes()))
    (target / "golden-run.rows.json").write_bytes(_rows(rows_path))
