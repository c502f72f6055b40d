"""`slot_init`: a frozen, slotted dataclass keeps its constructor's every behaviour."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
from typing import Any

import pytest

from tubeless._frozen import slot_init
from tubeless.trace import RunEvent


def _event_class() -> Any:
    """A fresh frozen, slotted dataclass; `_Fast` is one given `slot_init`."""

    @dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
    class Event:
        kind: str
        path: tuple[str, ...]
        turn: int | None = None
        code: str | None = None

    return Event


_Generated = _event_class()
_Fast = slot_init(_event_class())


def _outcome(cls: type, *args: Any, **kwargs: Any) -> tuple[str, str]:
    try:
        made = cls(*args, **kwargs)
    except TypeError as error:
        return "TypeError", str(error).replace(cls.__name__, "C")
    return "made", repr(made).replace(cls.__name__, "C")


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        ((), {"kind": "a", "path": ("x",)}),
        ((), {"kind": "a", "path": ("x",), "turn": 3, "code": "E"}),
        ((), {"kind": "a"}),
        ((), {"kind": "a", "path": (), "bogus": 1}),
        (("a",), {"path": ()}),
        ((), {"kind": "a", "path": (), "turn": None}),
    ],
)
def test_slot_init_behaves_as_the_generated_init(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    assert _outcome(_Fast, *args, **kwargs) == _outcome(_Generated, *args, **kwargs)


def test_slot_init_keeps_signature_equality_hash_and_frozenness() -> None:
    assert str(inspect.signature(_Fast)) == str(inspect.signature(_Generated))
    assert _Fast.__init__.__qualname__ == _Generated.__init__.__qualname__
    one, two = _Fast(kind="a", path=("x",), turn=1), _Fast(kind="a", path=("x",), turn=1)
    assert one == two and hash(one) == hash(two) and one != _Fast(kind="a", path=("x",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        one.kind = "b"
    assert dataclasses.replace(one, code="E").code == "E"
    assert copy.deepcopy(one) == one
    # The run events a stream makes are built this way, and still pickle.
    event = RunEvent(kind="run.started", run_id="r", path=("a",), at=1)
    assert RunEvent.__init__.__qualname__ == "RunEvent.__init__"
    assert pickle.loads(pickle.dumps(event)) == event
    assert event.to_dict() == {"kind": "run.started", "runId": "r", "path": ["a"], "at": 1}


def test_slot_init_refuses_what_it_would_not_do_as_the_generated_init() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Counted:
        count: int = 0

    @dataclasses.dataclass(frozen=True, slots=True)
    class Listed:
        items: list[int] = dataclasses.field(default_factory=list)

    @dataclasses.dataclass(frozen=True, slots=True)
    class Checked:
        name: str

        def __post_init__(self) -> None:
            raise AssertionError("slot_init would skip this")

    @dataclasses.dataclass(frozen=True)
    class Unslotted:
        name: str

    for cls in (Counted, Listed, Checked, Unslotted):
        with pytest.raises(TypeError, match="slot_init"):
            slot_init(cls)
