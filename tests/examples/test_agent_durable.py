"""The durable example in a real child process, killed with SIGKILL and resumed until done.

After every kill the checkpoint is read from the SQLite file (outside any lease): its
budgets never go down, and every `append` it shows running must come back as an
interrupted call. Once a run completes: each effect is in the file exactly once, every
line names a different call (an unsafe call ran at most once), and the answer is right.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tubeless import SqliteCheckpointStore

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "agent_durable.py"
COUNT = 6
EFFECTS = [f"effect-{index}" for index in range(1, COUNT + 1)]
RUN_LIMIT = 40
"""Runs per trial at most (kills included): a trial that never completes fails."""


class Trial:
    """One execution: a store, an effects file, and what every kill left behind."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.store_path = directory / "checkpoints.db"
        self.effects = directory / "effects.txt"
        self.key = f"effects:{self.effects}"
        self.spent: list[tuple[int, int]] = []
        self.running_appends: set[str] = set()

    def start(self, work_seconds: float = 0.01) -> subprocess.Popen[str]:
        environment = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "AGENT_DURABLE_STORE": str(self.store_path),
            "AGENT_DURABLE_WORK_SECONDS": str(work_seconds),
        }
        return subprocess.Popen(
            [sys.executable, str(EXAMPLE), "--effects", str(self.effects), "--count", str(COUNT)],
            cwd=self.directory,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )

    def checkpoint(self) -> dict[str, Any] | None:
        if not self.store_path.exists():
            return None
        text = SqliteCheckpointStore(self.store_path).read(self.key)
        return None if text is None else json.loads(text)

    def after_kill(self) -> None:
        """Check budgets never went down; remember the appends that were running."""
        document = self.checkpoint()
        if document is None or document["agent"] is None:
            return
        node = document["agent"]
        spent = (node["spent"]["calls"], node["spent"]["decisions"])
        if self.spent:
            assert spent >= self.spent[-1], "a budget went down across a kill"
        self.spent.append(spent)
        for entry in (node["turn"] or {}).get("calls", []):
            if entry["tool"] == "append" and entry["status"] == "running":
                self.running_appends.add(entry["id"])

    def kill(self, process: subprocess.Popen[str]) -> None:
        process.send_signal(signal.SIGKILL)
        process.wait(30)
        assert process.stdout is not None
        process.stdout.close()
        self.after_kill()

    def finish(self) -> str:
        """Run without killing until the execution completes; return its answer line."""
        for _ in range(RUN_LIMIT):
            process = self.start()
            output, _ = process.communicate(timeout=120)
            if process.returncode == 0:
                return output.strip()
        raise AssertionError("the execution never completed")

    def check(self, answer: str) -> None:
        lines = self.effects.read_text("utf-8").splitlines()
        names = [line.split(" ")[0] for line in lines]
        calls = [line.split(" ")[1] for line in lines]
        assert sorted(names) == EFFECTS, "every effect exactly once"
        assert len(set(calls)) == len(calls), "an unsafe call ran twice"
        document = self.checkpoint()
        assert document is not None
        node = document["agent"]
        result = node["result"]
        assert set(result["interrupted"]) == self.running_appends
        assert sorted(result["effects"]) == EFFECTS
        shown = ", ".join(result["interrupted"]) or "none"
        assert answer == f"{COUNT} effects, each once (interrupted: {shown})"
        final = (node["spent"]["calls"], node["spent"]["decisions"])
        assert all(final >= spent for spent in self.spent)
        # Every effect's append (or an interrupted one's inspection) and the last read.
        assert final[0] >= COUNT + 1
        assert node["execution"]["calls"] == final[0]


def run_trial(directory: Path, rng: random.Random, kills: int) -> None:
    trial = Trial(directory)
    for _ in range(kills):
        process = trial.start()
        time.sleep(rng.uniform(0.0, 0.6))
        if process.poll() is not None:
            assert process.stdout is not None
            process.stdout.close()
            break
        trial.kill(process)
    trial.check(trial.finish())


def test_a_kill_while_an_append_runs_surfaces_as_interrupted(tmp_path: Path) -> None:
    """Deterministic: kill once the journal shows an `append` running, then resume."""
    trial = Trial(tmp_path)
    process = trial.start(work_seconds=60.0)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        document = trial.checkpoint()
        node = (document or {}).get("agent") or {}
        entries = (node.get("turn") or {}).get("calls", [])
        if any(entry["status"] == "running" for entry in entries):
            break
        time.sleep(0.02)
    trial.kill(process)
    assert trial.running_appends, "no append was running when the process was killed"
    trial.check(trial.finish())


@pytest.mark.parametrize("seed", range(4))
def test_killed_at_random_points_it_completes_each_effect_once(tmp_path: Path, seed: int) -> None:
    run_trial(tmp_path, random.Random(seed), kills=4)


@pytest.mark.slow
def test_fifty_random_kill_trials(tmp_path: Path) -> None:
    rng = random.Random(20261204)
    for index in range(50):
        directory = tmp_path / f"trial-{index}"
        directory.mkdir()
        run_trial(directory, rng, kills=rng.randint(1, 6))
