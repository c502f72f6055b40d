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
_FAN_OUT_STRING_LIMIT = 1024
_LIST_LIMIT = 128


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
            bounded_text(part, _STRING_LIMIT) if isinstance(part, str) else part
            for part in path[:_LIST_LIMIT]
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


def _fit(out: dict[str, Any]) -> None:
    """Drop issues, then fan-out failures, then the cause, until `out` fits the budget."""
    size = json_bytes(out)
    issues = out.get("issues")
    while issues and size > TRACE_ERROR_BYTE_BUDGET:
        size -= json_bytes(issues.pop()) + 1
    fan_out = out.get("fanOut")
    failures = [] if fan_out is None else fan_out["failures"]
    while failures and size > TRACE_ERROR_BYTE_BUDGET:
        size -= json_bytes(failures.pop()) + 1
        fan_out["omittedFailureCount"] += 1  # type: ignore[index]
    if size > TRACE_ERROR_BYTE_BUDGET:
        out.pop("cause", None)


def bounded_error(error: Mapping[str, Any]) -> dict[str, Any]:
    """Return the wire form of an error cut to the trace limits and the error budget.

    Messages keep at most 16384 characters, causes 16 links of 4096-character messages,
    issues 128 of 4096-character messages and paths; fan-out strings 1024 characters.
    When the whole is still over `TRACE_ERROR_BYTE_BUDGET` bytes, issues and then fan-out
    failures are dropped from the end (counted in `omittedFailureCount`), then the cause.
    """
    out = dict(error)
    out["message"] = bounded_text(error.get("message", ""), TRACE_MESSAGE_LIMIT)
    if "stack" in error:
        out["stack"] = bounded_text(error["stack"], TRACE_MESSAGE_LIMIT)
    if "sourceCode" in error:
        out["sourceCode"] = bounded_text(error["sourceCode"], _STRING_LIMIT)
    if "cause" in error:
        out["cause"] = _bounded_cause(error["cause"], TRACE_CAUSE_DEPTH_LIMIT, _STRING_LIMIT)
    if error.get("issues") is not None:
        out["issues"] = [_bounded_issue(issue) for issue in error["issues"][:_LIST_LIMIT]]
    if error.get("fanOut") is not None:
        out["fanOut"] = _bounded_fan_out(error["fanOut"])
    _fit(out)
    return out
