"""Fuzzing what an agent can send against the write path on PostgreSQL: every reply is either
graded and stored (cleaned as ``runs.storable`` says) or reported as a bad line with a
message; nothing raises, nothing is half-written. Replies go in as trace-import lines, which
take the dispatcher's path from evidence to ``record_results``."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runs.models import RunItem
from runs.services.deployments import deployment_create
from runs.services.trace_import import run_import_results
from runs.storable import TOO_DEEP
from tests.fuzzing import fuzz_settings
from tests.runs.runfactory import create_run, publish

pytestmark = pytest.mark.django_db(transaction=True)

any_text = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()), max_size=12)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | any_text,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(any_text, children, max_size=3),
    max_leaves=10,
)


def _cleaned(value, depth=0):
    if isinstance(value, str):
        return "".join("\ufffd" if c == "\x00" or 0xD800 <= ord(c) <= 0xDFFF else c for c in value)
    if isinstance(value, list | dict) and depth >= 247:
        return TOO_DEEP
    if isinstance(value, list):
        return [_cleaned(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {_cleaned(k): _cleaned(v, depth + 1) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _same(a, b):
    """Equal, numbers by value (jsonb writes 1e16 as 10000000000000000)."""
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool | type(None)):
        return not isinstance(b, bool) and (
            a == b if isinstance(a, int) and isinstance(b, int) else float(a) == float(b)
        )
    return a == b and type(a) is type(b)


def test_any_reply_is_graded_and_stored_or_reported(personas):
    version = publish(personas.workspace, cases=1)
    dep = deployment_create(workspace=personas.workspace, name="ci", kind="trace_import").deployment

    @fuzz_settings(40)
    @given(
        final=st.one_of(any_text, json_values),
        extra=json_values,
        metrics=st.dictionaries(
            st.sampled_from(
                ["input_tokens", "output_tokens", "total_tokens", "cost_usd", "latency_ms", "ttft_ms"]
            ),
            st.integers() | st.floats() | any_text,
        ),
        depth=st.one_of(st.integers(0, 300), st.sampled_from([600, 900, 940, 960, 975, 990, 1200, 5000])),
    )
    def check(final, extra, metrics, depth):
        run = create_run(personas.workspace, version, [dep])
        reply = {"case_key": "c0", "final_output": final, "extra": extra, "metrics": metrics}
        # NaN, infinities and lone surrogates as Python writes them; the deep part as text
        # (json.dumps itself cannot write ~1,000 levels)
        line = json.dumps(reply)[:-1] + ', "deep": ' + "[" * depth + '"leaf"' + "]" * depth + "}"
        outcome = run_import_results(run=run, data=line.encode())
        if outcome.accepted != 1:  # nested too deeply to read: a bad line with a message
            assert len(outcome.bad_lines) == 1 and outcome.bad_lines[0]["message"], outcome.bad_lines
            assert RunItem.objects.get(run=run).grade is None
            return
        item = RunItem.objects.get(run=run)
        assert item.grade and item.grade["status"]
        run.refresh_from_db()
        assert run.status == "completed"  # scored: its sums stayed finite
        response = item.evidence["response"]
        assert _same(response["extra"], _cleaned(extra, 2)), (response["extra"], extra)
        deep = response["deep"]
        levels = 0
        while isinstance(deep, list):
            levels, deep = levels + 1, deep[0]
        assert (levels, deep) == (depth, "leaf") or (deep == TOO_DEEP and levels < depth)

    check()
