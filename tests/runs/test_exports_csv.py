"""The CSV export's numbers: positional, never localised, and null (or a non-finite float)
as an empty cell, as the JSONL has them."""

from __future__ import annotations

import csv
import io
import json

import pytest

from runs.exports import export_stream
from runs.models import RunItem
from tests.runs.test_exports_agree import _two_lane_run
from tests.runs.test_exports_hostile import _upload

pytestmark = pytest.mark.django_db(transaction=True)


def test_csv_numbers_are_positional_and_null_is_empty_as_in_jsonl(personas):
    run = _two_lane_run(personas)
    _upload(
        personas,
        run,
        [
            {
                "deployment": "ci",
                "case_key": "c0",
                "final_output": "answer-0",
                "metrics": {"cost_usd": 0.0000123},
            },
            {"deployment": "ci", "case_key": "c1", "final_output": "nope", "metrics": {"cost_usd": 2.5e-07}},
        ],
    )
    RunItem.objects.filter(run=run, lane__deployment_name="ci", case_key="c1").update(latency_ms=float("nan"))
    rows = list(csv.DictReader(io.StringIO("".join(export_stream(run, "csv")), newline="")))
    lines = [json.loads(line) for line in "".join(export_stream(run, "jsonl")).splitlines()]
    assert [(r["cost_usd"], r["score"], r["latency_ms"]) for r in rows[:2]] == [
        ("0.0000123", "1.0", ""),
        ("0.00000025", "0.0", ""),
    ]
    assert [(line["cost_usd"], line["latency_ms"]) for line in lines[:2]] == [
        (0.0000123, None),
        (2.5e-07, None),
    ]
    assert rows[2]["score"] == rows[2]["outcome_class"] == rows[2]["cost_usd"] == ""  # pending: nulls
    assert lines[2]["score"] is lines[2]["outcome_class"] is lines[2]["cost_usd"] is None
