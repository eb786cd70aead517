"""Fault: the publishing connection is terminated (``pg_terminate_backend``) mid-transaction.

The publish has already inserted its version, challenges, input set and cases inside its
transaction when another connection kills its backend. Nothing may be left half-written:
no Pack, PackVersion, Challenge, InputSet, Case or Asset row, and the next publish of the
same bytes creates the version normally.
"""

from __future__ import annotations

import psycopg
import pytest
from django.db import InterfaceError, OperationalError, connection

from packs import services
from packs.models import Artifact, Asset, Case, Challenge, InputSet, Pack, PackVersion
from packs.services import publish as publish_module
from tests.packs.publish_fixtures import mental_math

pytestmark = pytest.mark.django_db(transaction=True)


def _other_connection() -> psycopg.Connection:
    s = connection.settings_dict
    return psycopg.connect(
        host=s.get("HOST") or "127.0.0.1",
        port=s.get("PORT") or 5432,
        user=s.get("USER") or "postgres",
        dbname=s["NAME"],
        autocommit=True,
        connect_timeout=10,
    )


def _row_counts() -> dict[str, int]:
    return {
        model.__name__: model.objects.count()
        for model in (Pack, PackVersion, Challenge, InputSet, Case, Asset, Artifact)
    }


def test_killed_connection_during_publish_leaves_nothing_and_the_retry_succeeds(personas, monkeypatch):
    if connection.vendor != "postgresql":
        pytest.skip("pg_terminate_backend needs PostgreSQL")
    before = _row_counts()
    original = publish_module._insert_sets_and_cases
    seen: dict[str, object] = {}

    def insert_then_kill(**kwargs):
        result = original(**kwargs)
        # The cases are inserted (uncommitted) in this backend's open transaction.
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid(), count(*) FROM packs_case")
            pid, pending = cursor.fetchone()
        seen["pending_cases"] = pending
        with _other_connection() as killer:
            killed = killer.execute("SELECT pg_terminate_backend(%s)", [pid]).fetchone()[0]
        seen["killed"] = killed
        return result

    monkeypatch.setattr(publish_module, "_insert_sets_and_cases", insert_then_kill)
    with pytest.raises((OperationalError, InterfaceError)):
        services.pack_version_publish(
            workspace=personas.workspace, data=mental_math().encode(), user=personas.owner
        )
    assert seen["killed"] is True
    assert seen["pending_cases"] > before["Case"]  # rows were written, uncommitted, when it died

    connection.close()  # the dead backend; the next query opens a new one
    assert _row_counts() == before

    monkeypatch.setattr(publish_module, "_insert_sets_and_cases", original)
    result = services.pack_version_publish(
        workspace=personas.workspace, data=mental_math().encode(), user=personas.owner
    )
    assert result.created and not result.already_published
    assert result.version.number == 1
    assert (
        Case.objects.filter(input_set__version=result.version).count()
        == seen["pending_cases"] - before["Case"]
    )
    assert PackVersion.objects.filter(pack__slug="mental-math").count() == 1
