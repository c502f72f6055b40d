"""Fitting outside text into trace records: every string cut, every error within budget.

A run builds records from exception messages, schema issues, log lines and fan-out
failures, all of which may be huge or hold lone surrogates. What is cut here always
passes the trace rules, so no record of a run is dropped for its size.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tubeless.trace._rules import (
    TRACE_CAUSE_DEPTH_LIMIT,
    TRACE_FAN_OUT_CAUSE_DEPTH_LIMIT,
    TRACE_MESSAGE_LIMIT,
    json_bytes,
)

__all__ = ["TRACE_ERROR_BYTE_BUDGET", "bounded_error", "bounded_text"]

TRACE_ERROR_BYTE_BUDGET = 512 * 1024
"""An error object is cut to at most this many bytes of JSON: half a record."""

_STRING_LIMIT = 4096
_CAUSE_STRING_LIMIT = 2048
_FAN_OUT_STRING_LIMIT = 1024
_LIST_LIMIT = 128
_PATH_PART_LIMIT = 256
_PATH_LIMIT = 32


def bounded_text(text: str, limit: int) -> str:
    """`text` cut to `limit` characters (`…` marks a cut), lone surrogates escaped."""
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    if not text.isascii():
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
        if len(text) > limit:  # the escapes made it longer
            text = text[: limit - 1] + "…"
    return text


def _bounded_cause(cause: Mapping[str, Any], depth: int, limit: int) -> dict[str, Any]:
    out: dict[str, Any] = {"message": bounded_text(cause["message"], limit)}
    for key in ("name", "sourceCode"):
        if key in cause:
            out[key] = bounded_text(cause[key], min(limit, _FAN_OUT_STRING_LIMIT))
    if "cause" in cause and depth > 1:
        out["cause"] = _bounded_cause(cause["cause"], depth - 1, limit)
    return out


def _bounded_issue(issue: Mapping[str, Any]) -> dict[str, Any]:
    bounded: dict[str, Any] = {
        "message": bounded_text(issue["message"], _STRING_LIMIT) or "Invalid value"
    }
    path = issue.get("path")
    if path:
        bounded["path"] = [
            bounded_text(part, _PATH_PART_LIMIT) if isinstance(part, str) else part
            for part in path[:_PATH_LIMIT]
        ]
    return bounded


def _bounded_fan_out(fan_out: Mapping[str, Any]) -> dict[str, Any]:
    depth, limit = TRACE_FAN_OUT_CAUSE_DEPTH_LIMIT, _FAN_OUT_STRING_LIMIT
    out = dict(fan_out)
    out["failures"] = [
        {
            **failure,
            "key": bounded_text(failure["key"], limit),
            "error": _bounded_cause(failure["error"], depth, limit),
        }
        for failure in fan_out["failures"]
    ]
    if "schedulerError" in fan_out:
        out["schedulerError"] = _bounded_cause(fan_out["schedulerError"], depth, limit)
    return out


def _fitting(items: list[dict[str, Any]], room: int) -> tuple[list[dict[str, Any]], int]:
    """The leading `items` whose JSON fits in `room` bytes, and the room left."""
    kept = []
    for item in items:
        size = json_bytes(item) + 1  # and its comma
        if size > room:
            break
        kept.append(item)
        room -= size
    return kept, room


def _fit(out: dict[str, Any]) -> None:
    """Keep the issues, then the fan-out failures, that fit the budget; else drop the cause.

    Each part is measured once, so cutting a huge error costs about the budget, not the
    error's size.
    """
    issues, fan_out = out.pop("issues", None), out.pop("fanOut", None)
    room = TRACE_ERROR_BYTE_BUDGET - json_bytes(out)
    if room < 0:
        out.pop("cause", None)
        room = TRACE_ERROR_BYTE_BUDGET - json_bytes(out)
    if issues is not None:
        out["issues"], room = _fitting(issues, room - len(',"issues":[]'))
    if fan_out is not None:
        failures = fan_out["failures"]
        kept, room = _fitting(failures, room - json_bytes({**fan_out, "failures": []}))
        fan_out["failures"] = kept
        fan_out["omittedFailureCount"] += len(failures) - len(kept)
        out["fanOut"] = fan_out


def bounded_error(error: Mapping[str, Any]) -> dict[str, Any]:
    """Return the wire form of an error cut to the trace limits and the error budget.

    Messages keep at most 16384 characters, causes 16 links of 2048-character messages,
    issues 128 of 4096-character messages with paths of 32 parts of 256 characters;
    fan-out strings 1024 characters. Within `TRACE_ERROR_BYTE_BUDGET` bytes, the message
    and cause come first (the cause is dropped if even they do not fit), then as many
    issues as fit, then as many fan-out failures (the rest counted in
    `omittedFailureCount`).
    """
    out = dict(error)
    out["message"] = bounded_text(error.get("message", ""), TRACE_MESSAGE_LIMIT)
    if "stack" in error:
        out["stack"] = bounded_text(error["stack"], TRACE_MESSAGE_LIMIT)
    if "sourceCode" in error:
        out["sourceCode"] = bounded_text(error["sourceCode"], _STRING_LIMIT)
    if "cause" in error:
        out["cause"] = _bounded_cause(error["cause"], TRACE_CAUSE_DEPTH_LIMIT, _CAUSE_STRING_LIMIT)
    if error.get("issues") is not None:
        out["issues"] = [_bounded_issue(issue) for issue in error["issues"][:_LIST_LIMIT]]
    if error.get("fanOut") is not None:
        out["fanOut"] = _bounded_fan_out(error["fanOut"])
    _fit(out)
    return out
