"""`PostgresTraceStore` specifics: its table, append-only rows, what PostgreSQL refuses."""

from __future__ import annotations

from typing import Any

import pytest

from tubeless.errors import TraceRecordError, TraceStoreError
from tubeless.trace import PostgresTraceStore


def _log(message: str, run_id: str = "run") -> dict[str, Any]:
    return {
        "version": 3,
        "name": "pipeline.log",
        "pipelineId": "p",
        "runId": run_id,
        "timestampMs": 1,
        "payload": {"level": "log", "message": message},
    }


def test_read_only_refuses_a_database_without_a_store(postgres_url: str) -> None:
    """Reading a database that holds no trace store is a `TraceStoreError`; nothing is made."""
    with pytest.raises(TraceStoreError, match="no trace store"):
        PostgresTraceStore(postgres_url, read_only=True)
    with pytest.raises(TraceStoreError, match="no trace store"):
        PostgresTraceStore(postgres_url, read_only=True)


def test_another_schema_version_is_refused(postgres_url: str, postgres_server: Any) -> None:
    """A store written by another schema version is refused, read-only or not."""
    PostgresTraceStore(postgres_url).close()
    postgres_server.execute(postgres_url, "UPDATE tubeless_schema SET version = 9")
    for read_only in (False, True):
        with pytest.raises(TraceStoreError, match="version 9"):
            PostgresTraceStore(postgres_url, read_only=read_only)


def test_a_nul_character_in_a_text_column_is_refused(postgres_url: str) -> None:
    """PostgreSQL text cannot hold NUL: the record is refused and the store stays usable."""
    with PostgresTraceStore(postgres_url) as store:
        with pytest.raises(TraceRecordError, match="NUL"):
            store.export(_log("fine", run_id="a\x00b"))
        store.export(_log("nul \x00 in the payload is JSON-escaped"))
        (record,) = store.events()
    assert record["payload"]["message"] == "nul \x00 in the payload is JSON-escaped"


def test_an_unreachable_server_is_a_store_error() -> None:
    """A URL nobody answers is a coded `TraceStoreError`, raised at once."""
    with pytest.raises(TraceStoreError) as raised:
        PostgresTraceStore("postgresql://postgres@127.0.0.1:1/none")
    assert raised.value.code == "TUBELESS_TRACE_STORE_INVALID"
    assert "PostgresTraceStore" not in str(raised.value)


def test_the_repr_hides_the_password(postgres_url: str) -> None:
    """A password in the URL never shows in the store's repr."""
    url = postgres_url.replace("postgres@", "postgres:secret@")
    with PostgresTraceStore(url) as store:
        assert "secret" not in repr(store) and "***" in repr(store)


def test_a_terminated_connection_is_reopened_and_no_record_is_lost(
    postgres_url: str, postgres_server: Any
) -> None:
    """`pg_terminate_backend` between batches: the next commit reconnects and stores all."""
    terminate = (
        "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE application_name = 'tubeless-trace' AND datname = current_database()) t"
    )
    with PostgresTraceStore(postgres_url) as store:
        for index in range(100):
            store.export(_log(str(index)))
            if index == 70:
                assert postgres_server.execute(postgres_url, terminate)[0][0] == 1
        messages = [record["payload"]["message"] for record in store.events()]
    assert messages == [str(index) for index in range(100)]
