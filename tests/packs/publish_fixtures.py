"""Pack bundles shared by the publish, API, draft, CLI and view tests (spec/pack-format.md §14)."""

from __future__ import annotations

import json

from tests.packs.bundle_helpers import zip_bytes as make_zip  # the tests' one zip writer


def mental_math(
    *,
    slug: str = "mental-math",
    name: str = "Mental Math",
    family: str = "reasoning",
    number: int = 1,
    description: str | None = None,
    extra_case: bool = False,
    asset_artifact_id: str | None = None,
) -> str:
    """Example A of pack-format §14: valid, no warnings. Options change its bytes."""
    description_line = f"  description: {json.dumps(description)}\n" if description is not None else ""
    assets = ""
    if asset_artifact_id:
        assets = (
            "  assets:\n"
            f"    - {{key: gold, kind: dataset, path: gold/answers.json, artifact_id: {asset_artifact_id}}}\n"
        )
    extra = ""
    if extra_case:
        extra = (
            "      - challenge_key: word-problem\n"
            "        case_key: apples\n"
            '        payload: {question: "Three bags of 12 apples: how many apples?"}\n'
            "        expectations: [{key: result, kind: number, value: 36}]\n"
        )
    return (
        "# Example A: each case graded on its own.\n"
        f"pack:\n  slug: {slug}\n  name: {name}\n  family: {family}\n{description_line}"
        "version:\n"
        f"  number: {number}\n"
        "  execution_mode: prompt_eval\n"
        f"{assets}"
        "  evaluation_spec:\n"
        "    name: mental-math-v1\n"
        "    version_number: 1\n"
        "    judge_mode: deterministic\n"
        "    validators:   # case.expectations.result resolves against each graded case\n"
        "      - {key: answer, type: numeric_match, target: final_output, expected_from: case.expectations.result,\n"
        "         config: {extract_number: true, absolute_tolerance: 0.001}}\n"
        "    metrics:\n"
        "      - {key: completed, type: boolean, collector: run_completed_successfully}\n"
        "      - {key: failures, type: numeric, collector: run_failure_count}\n"
        "    scorecard:\n"
        "      pass_threshold: 1\n"
        "      dimensions:\n"
        "        - {key: correctness, source: validators, validators: [answer], weight: 0.9}\n"
        "        - {key: reliability, source: reliability, weight: 0.1}\n"
        "challenges:\n"
        "  - {key: word-problem, title: Solve an arithmetic word problem, category: arithmetic, difficulty: easy,\n"
        '     instructions: "{{question}}\\nReply with the final number only."}\n'
        "input_sets:\n"
        "  - key: smoke\n"
        "    name: Smoke\n"
        "    cases:\n"
        "      - challenge_key: word-problem\n"
        "        case_key: crates\n"
        '        payload: {question: "One crate holds 24 apples. How many apples fill 7 crates?"}\n'
        "        expectations: [{key: result, kind: number, value: 168}]\n"
        "      - challenge_key: word-problem\n"
        "        case_key: train\n"
        '        payload: {question: "A train covers 90 km in 1.5 hours. What is its speed in km/h?"}\n'
        "        expectations: [{key: result, kind: number, value: 60}]\n"
        f"{extra}"
    )


INVOICE_PACK = """\
pack: {slug: invoice-totals, name: Invoice Totals, family: tool-use}
version:
  number: 1
  execution_mode: native
  tool_policy: {allowed_tool_kinds: [file, data], allow_shell: false, max_tool_calls: 12}
  assets:
    - {key: invoices, kind: dataset, path: data/invoices.json, media_type: application/json}
  evaluation_spec:
    name: invoice-totals-v1
    version_number: 1
    judge_mode: deterministic
    post_execution_checks:
      - {key: report, type: file_capture, path: report.json}
    validators:
      - key: query-then-write
        type: tool_call_assertion
        target: tool_calls
        config: {ordered_tools: [query_json, write_file], order_mode: subsequence}
      - key: total-correct
        type: postcondition
        target: file:report
        config: {condition: json_path_match, json_path: $.total, value: 1280.5}
      - {key: names-customer, type: contains, target: final_output, expected_from: case.expectations.customer}
    metrics:
      - {key: calls, type: numeric, collector: run_tool_call_count}
    scorecard:
      strategy: hybrid
      pass_threshold: 0.8
      dimensions:
        - {key: trajectory, source: validators, validators: [query-then-write], gate: true, pass_threshold: 1}
        - {key: output, source: validators, validators: [total-correct, names-customer], weight: 0.8}
        - {key: efficiency, source: metric, metric: calls, better_direction: lower,
           normalization: {target: 2, max: 12}, weight: 0.2}
challenges:
  - key: sum-open-invoices
    title: Total one customer's open invoices
    category: data-lookup
    difficulty: medium
    instructions: |
      data/invoices.json lists invoices. Sum the open ones for customer {{customer_id}},
      write {"customer": <name>, "total": <sum>} to report.json, then reply with the name.
    artifact_refs: [{key: invoices}]
input_sets:
  - key: default
    name: Default
    cases:
      - challenge_key: sum-open-invoices
        case_key: c-104
        payload: {customer_id: C-104}
        expectations: [{key: customer, kind: text, value: Harbor Tools Ltd}]
"""

INVOICES_JSON = json.dumps(
    [
        {"id": "I-1", "customer_id": "C-104", "customer": "Harbor Tools Ltd", "open": True, "amount": 1000.5},
        {"id": "I-2", "customer_id": "C-104", "customer": "Harbor Tools Ltd", "open": True, "amount": 280},
        {"id": "I-3", "customer_id": "C-104", "customer": "Harbor Tools Ltd", "open": False, "amount": 99},
    ]
).encode()


def invoice_zip(invoices: bytes = INVOICES_JSON) -> bytes:
    return make_zip({"pack.yaml": INVOICE_PACK, "data/invoices.json": invoices})


INVALID_PACK = "pack: {slug: demo, name: Demo}\nversion:\n  number: 0\n"
MALFORMED_YAML = "pack: {slug: demo\nversion: [\n"
