"""PostgreSQL: the large JSON columns of run results are compressed with lz4, not pglz.

Each graded item writes a grade of about 3.5 kB (compressed to about 2 kB) and an evidence
document; with pglz the server spent about 16 us compressing each grade, with lz4 about
2 us, and lz4 decompresses faster for the scoring pass and the result pages (the stored
size grows about 10%). New values only: rows written before keep pglz, and both read the
same. Skipped where the server was built without lz4 (SQLite has no such setting).
"""

from django.db import migrations

COLUMNS = (
    ("runs_runitem", "grade"),
    ("runs_runitem", "evidence"),
    ("runs_graderevision", "grade"),
    ("runs_run", "case_findings"),
)


def _lz4_available(schema_editor) -> bool:
    if schema_editor.connection.vendor != "postgresql":
        return False
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'"
        )
        row = cursor.fetchone()
    return bool(row and row[0])


def _set(method: str):
    def apply(apps, schema_editor):
        if not _lz4_available(schema_editor):
            return
        for table, column in COLUMNS:
            schema_editor.execute(f'ALTER TABLE "{table}" ALTER COLUMN "{column}" SET COMPRESSION {method}')

    return apply


class Migration(migrations.Migration):
    dependencies = [("runs", "0005_claim_function")]

    operations = [migrations.RunPython(_set("lz4"), _set("default"), elidable=False)]
