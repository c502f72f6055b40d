"""Record an agent run's decisions and outcomes to a file, and replay them without a model.

`Cassette` is what users hold and pass as `context={"cassette": ...}`; a `CassetteSession` is one
run's use of it (opened by the outermost agent, shared by every agent of the tree through
the run context); a `Tape` is one agent invocation's view of the session, at its path. The
document's shape and checks live in `_cassette_document.py`; this module reads and writes
the file (atomically: a temporary file, then `os.replace`).
"""

from __future__ import annotations

import contextlib
import copy
import os
import pathlib
import tempfile
import threading
from collections.abc import Iterator
from typing import Any, Literal, NoReturn

from tubeless._frozen import FrozenDict, freeze_json
from tubeless._quote import quote
from tubeless.agent._cassette_document import (
    CassetteDocument,
    RecordedTurn,
    canonical,
    document_of,
    plain_json,
)
from tubeless.errors import CassetteError, ReplayDivergedError

CassetteMode = Literal["auto", "record", "replay"]
CassetteTools = Literal["live", "replay"]
_SHOWN = 400
"""How many characters of a recorded or live value a divergence message shows."""


class Cassette:
    """A recorded agent run, kept in a JSON file: record it once, replay it in tests.

    Pass it as `context={"cassette": cassette}`. Recording, every agent of the run's tree
    runs as usual and each validated decision (per agent path and turn) and each tool
    outcome is written to `path` when the run completes (a run that fails, is cancelled or
    waits for approval writes nothing; so do plans and dry runs). Replaying, `decide` is
    never called: each agent takes its recorded decisions; tools run live and must return
    what was recorded, or, with `tools="replay"`, are not run at all. A run that leaves its
    recording fails with `ReplayDivergedError` (`TUBELESS_REPLAY_DIVERGED`).

    The file holds decisions and outcomes only (no credentials, request or response bodies,
    timings or run ids), in stable key order: review it and commit it with the test.

    One cassette serves one run at a time; run it again to replay (in `auto` mode) or to
    record again (in `record` mode).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        mode: CassetteMode = "auto",
        tools: CassetteTools = "live",
    ) -> None:
        """Describe a cassette; nothing is read or written until a run uses it.

        Args:
            path: the JSON file (its folder is made when the recording is written).
            mode: `"record"` runs and writes the file; `"replay"` plays it and needs it;
                `"auto"` replays when the file exists, else records.
            tools: `"live"` runs tools while replaying and compares their outcomes with the
                recording (catches tool drift); `"replay"` uses the recorded outcomes.

        Raises:
            CassetteError: `TUBELESS_CASSETTE_INVALID` for an unknown mode or tools value.
        """
        if mode not in ("auto", "record", "replay"):
            raise CassetteError(f"Cassette mode must be auto, record or replay, got {quote(mode)}")
        if tools not in ("live", "replay"):
            raise CassetteError(f"Cassette tools must be live or replay, got {quote(tools)}")
        self.path = pathlib.Path(path)
        """The cassette file."""
        self.mode: CassetteMode = mode
        """`"auto"`, `"record"` or `"replay"`."""
        self.tools: CassetteTools = tools
        """`"live"` or `"replay"`."""
        self.document: CassetteDocument | None = None
        """What the last completed run recorded or replayed (`None` before one)."""
        self._lock = threading.Lock()
        self._session: CassetteSession | None = None

    def __repr__(self) -> str:
        return f"Cassette({str(self.path)!r}, mode={self.mode!r}, tools={self.tools!r})"

    def load(self) -> CassetteDocument:
        """Read and check the file.

        Raises:
            CassetteError: `TUBELESS_CASSETTE_INVALID` when it is missing or malformed.
        """
        try:
            text = self.path.read_text("utf-8")
        except FileNotFoundError:
            raise CassetteError(
                f"Cassette {quote(str(self.path))} does not exist: record it first "
                "(mode='record' or 'auto', or pytest --tubeless-record)"
            ) from None
        except (OSError, UnicodeDecodeError) as error:
            raise CassetteError(
                f"Cassette {quote(str(self.path))} cannot be read: {type(error).__name__}"
            ) from error
        return CassetteDocument.from_text(text)

    def _replays(self) -> bool:
        return self.mode == "replay" or (self.mode == "auto" and self.path.exists())

    @contextlib.contextmanager
    def session(self) -> Iterator[CassetteSession]:
        """One agent invocation's share of the run's session (internal).

        The outermost invocation opens the session; when it ends without an error the
        recording is written, or the replay checked for recorded turns it never reached.
        """
        with self._lock:
            session = self._session
            if session is None:
                replaying = self.load() if self._replays() else None
                session = self._session = CassetteSession(replaying, self.tools)
            session.depth += 1
        failed = True
        try:
            yield session
            failed = False
        finally:
            with self._lock:
                session.depth -= 1
                last = session.depth == 0
                if last:
                    self._session = None
            if last and not failed:
                self.document = session.finish(self)

    def write(self, document: CassetteDocument) -> None:
        """Write `document` to the file atomically (a temporary file, then a rename).

        Raises:
            CassetteError: `TUBELESS_CASSETTE_INVALID` when the file cannot be written.
        """
        text = document.to_text()
        folder = self.path.parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(
                prefix=f".{self.path.name}.", suffix=".tmp", dir=folder
            )
            try:
                with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as stream:
                    stream.write(text)
                    stream.flush()
                    os.fsync(stream.fileno())
                os.replace(temporary, self.path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
                raise
        except OSError as error:
            raise CassetteError(
                f"Cassette {quote(str(self.path))} cannot be written: {type(error).__name__}"
            ) from error


class CassetteSession:
    """One run's use of a cassette, shared by every agent of the tree (thread-safe)."""

    def __init__(self, replaying: CassetteDocument | None, tools: CassetteTools) -> None:
        self.replaying = replaying
        self.tools = tools
        self.depth = 0
        self._lock = threading.Lock()
        self._decisions: dict[tuple[str, int], Any] = {}
        self._outcomes: dict[tuple[str, int], list[Any]] = {}
        self._used: set[tuple[str, int]] = set()
        self.divergence: ReplayDivergedError | None = None

    def refuse_resumed(self, path: str, resumed: bool) -> None:
        """A cassette holds a run from its first turn: a durable execution that resumes
        from its journal would record (or replay) only its tail."""
        if resumed:
            raise CassetteError(
                "A cassette records or replays an agent run from its first turn, but this "
                f"durable execution of {quote(path)} resumes from its journal: use a new "
                "execution key"
            )

    def tape(self, path: str) -> Tape:
        """The view of this session for the agent at `path`."""
        return Tape(self, path)

    def diverged(self, path: str, turn: int | None, call: str | None, text: str) -> NoReturn:
        """Keep the first divergence (a subagent's may be wrapped on its way up) and raise."""
        error = ReplayDivergedError(path, turn, call, text)
        with self._lock:
            self.divergence = self.divergence or error
        raise error

    def recorded_turn(self, path: str, turn: int) -> RecordedTurn:
        """The recorded turn at `path`, or a divergence naming what is missing."""
        assert self.replaying is not None
        agent = self.replaying.agent(path)
        if agent is None:
            self.diverged(path, turn, None, "the cassette has no agent at this path")
        if turn > len(agent.turns):
            self.diverged(
                path, turn, None, f"the cassette has no decision here ({len(agent.turns)} turns)"
            )
        with self._lock:
            self._used.add((path, turn))
        return agent.turns[turn - 1]

    def record_decision(self, path: str, turn: int, decision: Any) -> None:
        """Keep a validated decision, with a slot for each of its calls' outcomes."""
        plain = plain_json(decision, f"decision of agent {quote(path)} turn {turn}")
        calls = plain.get("calls", ())
        with self._lock:
            if (path, turn) in self._decisions:
                raise CassetteError(
                    f"Two agents of the run share the path {quote(path)}: record them in "
                    "separate runs"
                )
            self._decisions[path, turn] = plain
            self._outcomes[path, turn] = [None] * len(calls)

    def record_outcome(self, path: str, turn: int, index: int, outcome: Any) -> None:
        """Keep a call's outcome in its decision-order slot."""
        plain = plain_json(outcome, f"outcome of agent {quote(path)} turn {turn}")
        with self._lock:
            self._outcomes[path, turn][index] = plain

    def finish(self, cassette: Cassette) -> CassetteDocument:
        """End a run that completed: write the recording, or check the replay used it all."""
        if self.divergence is not None:
            raise self.divergence
        if self.replaying is not None:
            for agent in self.replaying.agents:
                for turn in agent.turns:
                    if (agent.path, turn.turn) not in self._used:
                        self.diverged(
                            agent.path, turn.turn, None, "the run never reached this turn"
                        )
            return self.replaying
        recorded: dict[str, dict[int, RecordedTurn]] = {}
        for (path, number), decision in self._decisions.items():
            outcomes = self._outcomes[path, number]
            if any(outcome is None for outcome in outcomes):
                raise CassetteError(f"Agent {quote(path)} turn {number} has calls without outcomes")
            recorded.setdefault(path, {})[number] = RecordedTurn(
                turn=number, decision=decision, outcomes=tuple(outcomes)
            )
        document = document_of(recorded)
        cassette.write(document)
        return document


class Tape:
    """One agent invocation's view of the run's cassette session, at its path (internal)."""

    __slots__ = ("_session", "path", "replaying")

    def __init__(self, session: CassetteSession, path: str) -> None:
        self._session = session
        self.path = path
        """The agent's path from the root."""
        self.replaying = session.replaying is not None
        """Whether decisions come from the cassette instead of `decide`."""

    def decision(self, turn: int) -> Any:
        """The recorded decision of `turn` (a fresh copy: the harness checks it anew)."""
        return copy.deepcopy(self._session.recorded_turn(self.path, turn).decision)

    def record_decision(self, turn: int, decision: Any) -> None:
        """Keep a validated decision (recording only)."""
        if not self.replaying:
            self._session.record_decision(self.path, turn, decision)

    def replayed_outcome(self, turn: int, call_id: str, tool: str) -> FrozenDict | None:
        """The recorded outcome of a call, when tools replay too; else `None` (run it)."""
        if not self.replaying or self._session.tools != "replay":
            return None
        outcome = self._recorded_outcome(turn, call_id, tool)
        frozen: FrozenDict = freeze_json(outcome)
        return frozen

    def settle(self, turn: int, index: int, outcome: FrozenDict) -> None:
        """Record a live outcome, or check it against the recorded one."""
        session = self._session
        if not self.replaying:
            session.record_outcome(self.path, turn, index, outcome)
            return
        recorded = self._recorded_outcome(turn, outcome["id"], outcome["tool"])
        live = plain_json(outcome, f"outcome of call {quote(outcome['id'])}")
        if canonical(live) != canonical(recorded):
            session.diverged(
                self.path,
                turn,
                outcome["id"],
                f"tool {quote(outcome['tool'])} returned {quote(canonical(live), _SHOWN)}, "
                f"recorded {quote(canonical(recorded), _SHOWN)}",
            )

    def _recorded_outcome(self, turn: int, call_id: str, tool: str) -> Any:
        session = self._session
        recorded = session.recorded_turn(self.path, turn)
        for outcome in recorded.outcomes:
            if outcome["id"] == call_id:
                if outcome["tool"] != tool:
                    session.diverged(
                        self.path,
                        turn,
                        call_id,
                        f"the call went to tool {quote(tool)}, recorded {quote(outcome['tool'])}",
                    )
                return outcome
        return session.diverged(
            self.path, turn, call_id, "the cassette has no outcome for this call"
        )
