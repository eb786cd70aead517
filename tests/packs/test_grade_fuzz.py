"""Fuzzing ``manage.py grade``'s results file: any line, with any JSON in any field, ends as
a graded case in a document the CLI can print (JSON and text), or as a bad line with its
number and a message; nothing raises. (A repetition of 10**30 used to be accepted and then
fail the document's JSON: the command ended in a traceback.)"""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from agentclash_site.lib.cli import dumps, printable_text
from grading.engine.offline import grade_offline, offline_exit_code, render_text
from grading.engine.reader import InvalidResults
from packs.bundle import select_input_set, validate_bundle
from packs.management.commands.pack import read_bundle_or_fail
from tests.fuzzing import fuzz_settings

MENTAL = Path(__file__).resolve().parents[2] / "examples" / "packs" / "mental-math" / "pack.yaml"

any_text = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()), max_size=12)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | any_text,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(any_text, children, max_size=3),
    max_leaves=10,
)
FIELDS = {
    "case_key": st.sampled_from(["crates", "train", "change", " crates "]) | json_values,
    "challenge_key": st.sampled_from(["word-problem", "nope"]) | json_values,
    "deployment": st.sampled_from(["a", "b", ""]) | json_values,
    "repetition": st.integers() | json_values,
    "final_output": any_text | json_values,
    "messages": st.lists(
        st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "tool"]) | json_values})
        | json_values,
        max_size=3,
    )
    | json_values,
    "tool_calls": st.lists(
        st.fixed_dictionaries({"name": any_text | json_values, "arguments": any_text | json_values}),
        max_size=2,
    )
    | json_values,
    "invocations": st.lists(json_values, max_size=2) | json_values,
    "metrics": st.dictionaries(
        st.sampled_from(["input_tokens", "output_tokens", "cost_usd", "latency_ms", "ttft_ms", "model"]),
        st.integers() | st.floats() | any_text,
    )
    | json_values,
}
# Lines that get past the reader's checks more often (each hostile field alone), and any line.
graded_lines = st.fixed_dictionaries(
    {"case_key": st.sampled_from(["crates", "train", "change"]), "final_output": FIELDS["final_output"]},
    optional={
        "repetition": st.integers(min_value=1),
        "deployment": any_text,
        "metrics": FIELDS["metrics"],
        "messages": st.lists(
            st.fixed_dictionaries(
                {"role": st.sampled_from(["user", "assistant"]), "content": any_text | json_values}
            ),
            max_size=3,
        ),
        "tool_calls": st.lists(
            st.fixed_dictionaries({"name": any_text, "arguments": any_text | json_values}), max_size=2
        ),
    },
)
lines = graded_lines | st.fixed_dictionaries(
    {"case_key": FIELDS["case_key"]}, optional={k: v for k, v in FIELDS.items() if k != "case_key"}
)


def _arguments() -> dict:
    report = validate_bundle(read_bundle_or_fail(MENTAL), filename=MENTAL.name)
    assert report.valid and report.manifest is not None and report.bundle is not None
    selection = select_input_set(report.manifest, None)
    return {
        "spec": report.evaluation_spec,
        "pack_slug": report.bundle.pack.slug,
        "pack_number": report.bundle.version.number,
        "input_set_name": selection.key,
        "cases": report.grading_cases(selection.key),
    }


def test_any_results_file_is_graded_or_each_bad_line_is_named():
    arguments = _arguments()

    @fuzz_settings(150)
    @given(st.lists(lines, min_size=1, max_size=3))
    def check(objects):
        # NaN, infinities and lone surrogates as Python writes them
        data = "\n".join(json.dumps(o) for o in objects).encode("utf-8", "surrogatepass")
        try:
            document = grade_offline(**arguments, results=data, judge=None)
        except InvalidResults as exc:
            body = exc.to_dict()
            assert json.loads(dumps(body))["error"]["lines"]
            bad = body["error"]["lines"]
            assert bad and all(1 <= b["line"] <= len(objects) and b["message"] for b in bad), bad
            return
        assert json.loads(dumps(document))["cases"]
        printable_text(render_text(document)).encode()  # what stdout writes
        assert offline_exit_code(document) in (0, 1)

    check()
