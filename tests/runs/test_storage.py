"""How run results are stored on PostgreSQL."""

from __future__ import annotations

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db


def test_large_result_columns_are_compressed_with_lz4():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'"
        )
        if not cursor.fetchone()[0]:
            pytest.skip("this PostgreSQL was built without lz4")
        cursor.execute(
            "SELECT c.relname || '.' || a.attname, a.attcompression FROM pg_attribute a"
            " JOIN pg_class c ON c.oid = a.attrelid"
            " WHERE (c.relname, a.attname) IN (('runs_runitem', 'grade'), ('runs_runitem', 'evidence'),"
            " ('runs_graderevision', 'grade'), ('runs_run', 'case_findings'))"
        )
        assert dict(cursor.fetchall()) == {
            "runs_runitem.grade": "l",
            "runs_runitem.evidence": "l",
            "runs_graderevision.grade": "l",
            "runs_run.case_findings": "l",
        }
