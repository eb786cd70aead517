"""The example packs (pack-format §14 and the demo): valid with no warnings, accepted by the
JSON Schema, reproducible zips, and recorded results that ``grade`` scores."""

from __future__ import annotations

import json
import sys
from io import StringIO
from pathlib import Path

import jsonschema
import pytest
import yaml
from django.core.management import call_command

from packs.bundle.archive import bundle_from_directory, is_zip
from packs.bundle.schema import pack_json_schema
from tests.packs.bundle_helpers import check

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "packs"
PACKS = sorted(p.name for p in EXAMPLES.iterdir() if (p / "pack.yaml").is_file())


def test_every_example_is_here():
    assert PACKS == ["demo", "invoice-totals", "mental-math", "release-notes"]


@pytest.mark.parametrize("name", PACKS)
def test_each_example_is_valid_with_no_warnings_even_under_strict(name):
    report = check(bundle_from_directory(EXAMPLES / name), strict=True)
    assert report.to_body() == {"valid": True, "errors": [], "warnings": []}


@pytest.mark.parametrize("name", PACKS)
def test_each_example_passes_the_json_schema(name):
    document = yaml.safe_load((EXAMPLES / name / "pack.yaml").read_text())
    jsonschema.Draft202012Validator(pack_json_schema()).validate(document)


def test_the_spec_examples_are_copied_verbatim_from_pack_format_14():
    spec = (
        (Path("/work/shared/spec/pack-format.md")).read_text()
        if Path("/work/shared/spec/pack-format.md").exists()
        else None
    )
    if spec is None:
        pytest.skip("the shared spec is not mounted")
    blocks = spec.split("## 14.")[1].split("## 15.")[0].split("```yaml\n")[1:]
    texts = [block.split("```")[0] for block in blocks]
    for name, text in zip(["mental-math", "invoice-totals", "release-notes"], texts, strict=True):
        assert (EXAMPLES / name / "pack.yaml").read_text() == text


def test_the_invoice_example_is_a_zip_with_its_dataset_and_the_committed_zip_is_reproducible():
    data = bundle_from_directory(EXAMPLES / "invoice-totals")
    assert is_zip(data)
    assert (EXAMPLES / "invoice-totals.zip").read_bytes() == data
    report = check(data)
    assert report.valid and report.warnings == []
    assert set(report.files) == {"data/invoices.json"}
    invoices = json.loads(report.files["data/invoices.json"])
    open_total = sum(i["amount"] for i in invoices if i["customer_id"] == "C-104" and i["status"] == "open")
    assert open_total == 1280.5  # the postcondition's value


def test_the_build_script_rebuilds_the_same_zips():
    sys.path.insert(0, str(EXAMPLES))
    try:
        import build_zips  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(EXAMPLES))
    built = build_zips.build_all()
    assert set(built) == {"invoice-totals.zip"}
    assert built["invoice-totals.zip"] == (EXAMPLES / "invoice-totals.zip").read_bytes()


def test_the_demo_has_several_challenges_each_with_its_own_multi_case_set():
    report = check(bundle_from_directory(EXAMPLES / "demo"))
    bundle = report.bundle
    assert bundle.pack.slug == "agent-workbench-demo"
    assert len(bundle.challenges) >= 3
    challenges = [{c.challenge_key for c in s.cases} for s in bundle.input_sets]
    assert all(len(keys) == 1 for keys in challenges)
    assert len({next(iter(keys)) for keys in challenges}) == len(bundle.input_sets) == len(bundle.challenges)
    assert all(3 <= len(s.cases) <= 6 for s in bundle.input_sets)
    spec = bundle.version.evaluation_spec
    types = {v.type for v in spec.validators}
    assert {"tool_trajectory", "skills_trajectory", "postcondition"} <= types
    assert spec.rules is not None and spec.rules.job and spec.rules.tasks and spec.rules.allowed_tools
    assert spec.post_execution_checks[0].type == "file_capture"
    assert spec.judge_mode == "hybrid" and spec.llm_judges


def test_the_demo_split_results_are_the_combined_results_per_input_set():
    report = check(bundle_from_directory(EXAMPLES / "demo"))
    lines = (EXAMPLES / "demo" / "results.jsonl").read_text().splitlines(keepends=True)
    for input_set in report.bundle.input_sets:
        challenge = input_set.cases[0].challenge_key
        expected = "".join(line for line in lines if json.loads(line)["challenge_key"] == challenge)
        assert (EXAMPLES / "demo" / "results" / f"{input_set.key}.jsonl").read_text() == expected
    rows = [json.loads(line) for line in lines]
    assert {r["deployment"] for r in rows} == {"careful", "sloppy"}
    cases = {c.effective_key for s in report.bundle.input_sets for c in s.cases}
    assert {(r["deployment"], r["case_key"]) for r in rows} == {
        (d, c) for d in ("careful", "sloppy") for c in cases
    }


def grade(*args: str) -> tuple[int, dict]:
    out = StringIO()
    try:
        call_command("grade", *args, "--json", stdout=out, stderr=StringIO())
        code = 0
    except SystemExit as exc:
        code = exc.code
    return code, json.loads(out.getvalue())


def statuses(document: dict) -> dict[tuple[str, str], str]:
    return {(c["deployment"], c["case_key"]): c["grading"]["status"] for c in document["cases"]}


def test_grading_mental_math_results():
    code, doc = grade(
        str(EXAMPLES / "mental-math"), "--results", str(EXAMPLES / "mental-math" / "results.jsonl")
    )
    assert code == 1  # sloppy fails two cases
    assert doc["pack"] == {"slug": "mental-math", "number": 1}
    assert doc["input_set"] == "smoke"
    assert statuses(doc) == {
        ("careful", "crates"): "PASSED",
        ("careful", "train"): "PASSED",
        ("careful", "change"): "PASSED",
        ("sloppy", "crates"): "FAILED",  # "7 crates hold 168 apples.": the leftmost number is 7
        ("sloppy", "train"): "FAILED",
        ("sloppy", "change"): "PASSED",
    }
    lanes = {lane["deployment"]: lane for lane in doc["lanes"]}
    assert lanes["careful"]["pass_rate"] == 1.0
    assert lanes["sloppy"]["counts"]["FAILED"] == 2


def test_grading_the_invoice_zip_results():
    code, doc = grade(
        str(EXAMPLES / "invoice-totals.zip"), "--results", str(EXAMPLES / "invoice-totals" / "results.jsonl")
    )
    assert code == 1
    assert statuses(doc) == {("careful", "c-104"): "PASSED", ("sloppy", "c-104"): "FAILED"}
    careful = next(c for c in doc["cases"] if c["deployment"] == "careful")["grading"]
    by_key = {e["key"]: e for e in careful["expectations"]}
    assert by_key["total-correct"]["status"] == "PASSED"
    assert by_key["query-then-write"]["status"] == "PASSED"


def test_grading_release_notes_without_a_judge_provider():
    code, doc = grade(
        str(EXAMPLES / "release-notes"), "--results", str(EXAMPLES / "release-notes" / "results.jsonl")
    )
    assert code == 1
    assert statuses(doc) == {("careful", "v1-4"): "PASSED", ("sloppy", "v1-4"): "FAILED"}
    careful = next(c for c in doc["cases"] if c["deployment"] == "careful")["grading"]
    judge = next(e for e in careful["expectations"] if e["key"] == "faithful")
    assert (judge["status"], judge["reason_code"]) == ("NOT_EVALUATED", "no_judge_provider")


@pytest.mark.parametrize(
    ("input_set", "expected"),
    [
        (
            "ledger",
            {
                "ledger-acme": "FAILED",
                "ledger-bolt": "FAILED",
                "ledger-cinder": "PASSED",
                "ledger-delta": "FAILED",
            },
        ),
        (
            "triage",
            {
                "triage-outage": "PASSED",
                "triage-export": "FAILED",
                "triage-logo": "FAILED",
                "triage-sso": "PASSED",
            },
        ),
        ("config", {"config-pool": "FAILED", "config-timeout": "FAILED", "config-ttl": "FAILED"}),
        ("replies", {"reply-late": "FAILED", "reply-damaged": "PASSED", "reply-wrong-size": "FAILED"}),
    ],
)
def test_grading_the_demo_per_input_set(input_set, expected):
    demo = EXAMPLES / "demo"
    code, doc = grade(
        str(demo), "--input-set", input_set, "--results", str(demo / "results" / f"{input_set}.jsonl")
    )
    assert code == 1
    assert doc["input_set"] == input_set
    got = statuses(doc)
    assert {case: status for (dep, case), status in got.items() if dep == "sloppy"} == expected
    careful = {case: status for (dep, case), status in got.items() if dep == "careful"}
    # The careful agent passes everything but one rounding slip (6.12 instead of 6.13).
    assert all(s == "PASSED" for c, s in careful.items() if c != "reply-wrong-size")
    if input_set == "replies":
        assert careful["reply-wrong-size"] == "FAILED"


def test_the_demo_guard_and_rules_catch_the_sloppy_shortcuts():
    demo = EXAMPLES / "demo"
    _, doc = grade(str(demo), "--input-set", "triage", "--results", str(demo / "results" / "triage.jsonl"))
    logo = next(c for c in doc["cases"] if (c["deployment"], c["case_key"]) == ("sloppy", "triage-logo"))[
        "grading"
    ]
    guard = next(e for e in logo["expectations"] if e["key"] == "rules.allowed_tools")
    assert guard["status"] == "FAILED" and "bash" in guard["evidence"]
    _, doc = grade(str(demo), "--input-set", "config", "--results", str(demo / "results" / "config.jsonl"))
    pool = next(c for c in doc["cases"] if (c["deployment"], c["case_key"]) == ("sloppy", "config-pool"))[
        "grading"
    ]
    destructive = next(e for e in pool["expectations"] if e["key"] == "rules.tasks[0]")
    assert destructive["status"] == "FAILED"
    assert pool["gates"]["compliance"] == "failed"


def test_the_demo_shows_a_claims_ledger():
    """The README's case page has a claims ledger; no demo answer claimed anything, so the
    demo never showed one. The careful agent's ledger-acme answer says it wrote result.json,
    and its write_file call verifies that."""
    demo = EXAMPLES / "demo"
    _, doc = grade(str(demo), "--input-set", "ledger", "--results", str(demo / "results" / "ledger.jsonl"))
    acme = next(c for c in doc["cases"] if (c["deployment"], c["case_key"]) == ("careful", "ledger-acme"))[
        "grading"
    ]
    assert [(c["kind"], c["verified"]) for c in acme["claims"]] == [("file_saved", True)]
    assert acme["status"] == "PASSED"
