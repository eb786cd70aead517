"""``manage.py grade`` exactly as spec/interfaces.md §5 pins it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from tests.packs.bundle_helpers import base_pack, dump

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "packs"
MENTAL = EXAMPLES / "mental-math"


def grade(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    out, err = StringIO(), StringIO()
    saved = dict(os.environ)
    os.environ.update(env or {})
    try:
        call_command("grade", *args, stdout=out, stderr=err)
        code = 0
    except SystemExit as exc:
        code = exc.code
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return code, out.getvalue(), err.getvalue()


def grade_json(*args: str, **kwargs) -> tuple[int, dict]:
    code, out, _ = grade(*args, "--json", **kwargs)
    return code, json.loads(out)


def result_line(case_key: str, output: str, **extra) -> str:
    return json.dumps({"case_key": case_key, "final_output": output, **extra}) + "\n"


@pytest.fixture
def mental_results(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text(
        result_line("crates", "168") + result_line("train", "60") + result_line("change", "17.85")
    )
    return path


def without_timing(value):
    if isinstance(value, dict):
        return {k: without_timing(v) for k, v in value.items() if k != "timing"}
    if isinstance(value, list):
        return [without_timing(v) for v in value]
    return value


def test_all_passing_exits_0_with_the_documented_shape(mental_results):
    code, doc = grade_json(str(MENTAL / "pack.yaml"), "--results", str(mental_results))
    assert code == 0
    assert set(doc) == {"pack", "input_set", "cases", "lanes", "eval_feedback"}
    assert doc["pack"] == {"slug": "mental-math", "number": 1}
    assert doc["input_set"] == "smoke"
    assert [(c["deployment"], c["challenge_key"], c["case_key"], c["repetition"]) for c in doc["cases"]] == [
        ("default", "word-problem", "crates", 1),
        ("default", "word-problem", "train", 1),
        ("default", "word-problem", "change", 1),
    ]
    assert all(c["grading"]["status"] == "PASSED" for c in doc["cases"])
    (lane,) = doc["lanes"]
    assert lane["deployment"] == "default"
    assert lane["counts"] == {"PASSED": 3, "FAILED": 0, "NOT_EVALUATED": 0, "UNAVAILABLE": 0, "ERROR": 0}
    assert set(doc["eval_feedback"]) == {"suggestions", "overall"}


def test_the_same_inputs_give_the_same_document_except_timing(mental_results):
    first = grade_json(str(MENTAL), "--results", str(mental_results))[1]
    second = grade_json(str(MENTAL), "--results", str(mental_results))[1]
    assert without_timing(first) == without_timing(second)


def test_a_case_without_a_line_is_unavailable_no_result(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(result_line("crates", "168"))
    code, doc = grade_json(str(MENTAL), "--results", str(path))
    assert code == 0  # nothing FAILED, one PASSED
    missing = {c["case_key"]: c["grading"] for c in doc["cases"] if c["case_key"] != "crates"}
    assert {k: (g["status"], g["reason_code"]) for k, g in missing.items()} == {
        "train": ("UNAVAILABLE", "no_result"),
        "change": ("UNAVAILABLE", "no_result"),
    }


def test_no_passed_case_exits_1(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(result_line("crates", "no idea"))
    assert grade_json(str(MENTAL), "--results", str(path))[0] == 1


def test_output_writes_the_json_and_prints_the_table(mental_results, tmp_path):
    target = tmp_path / "out.json"
    code, out, _ = grade(str(MENTAL), "--results", str(mental_results), "--output", str(target))
    assert code == 0
    assert json.loads(target.read_text())["pack"]["slug"] == "mental-math"
    assert out.startswith("Pack mental-math v1, input set smoke")


def test_an_empty_output_is_a_usage_error_not_the_table_on_stdout(mental_results):
    # `grade ... --output "$OUT"` with OUT unset printed the table and wrote no file.
    code, doc = grade_json(str(MENTAL), "--results", str(mental_results), "--output", "")
    assert code == 2
    assert (doc["error"]["code"], doc["error"]["field"]) == ("usage", "output")


def test_an_invalid_pack_exits_2_with_the_validate_body(tmp_path, mental_results):
    pack = tmp_path / "pack.yaml"
    pack.write_text("pack: {slug: demo, name: Demo}\n")
    code, doc = grade_json(str(pack), "--results", str(mental_results))
    assert code == 2
    assert set(doc) == {"valid", "errors", "warnings"}
    assert doc["valid"] is False
    code, _, err = grade(str(pack), "--results", str(mental_results))
    assert code == 2
    assert "pack.family: is required" in err


def test_several_input_sets_need_a_selector(tmp_path):
    code, doc = grade_json(str(EXAMPLES / "demo"), "--results", str(EXAMPLES / "demo" / "results.jsonl"))
    assert code == 2
    assert doc["error"]["code"] == "missing_challenge_input_set_id"
    assert doc["error"]["choices"] == ["ledger", "triage", "config", "replies"]


@pytest.mark.parametrize("selector", ["triage", "  TRIAGE ", "Ticket Triage", "ticket triage"])
def test_the_selector_is_a_key_or_exact_name_ignoring_case(selector):
    demo = EXAMPLES / "demo"
    code, doc = grade_json(
        str(demo), "--input-set", selector, "--results", str(demo / "results" / "triage.jsonl")
    )
    assert doc["input_set"] == "triage", doc
    assert code == 1


def test_an_unknown_selector_exits_2():
    code, doc = grade_json(str(MENTAL), "--input-set", "nope", "--results", str(MENTAL / "results.jsonl"))
    assert code == 2
    assert doc["error"]["code"] == "invalid_challenge_input_set_id"


def test_an_ambiguous_selector_exits_2(tmp_path, mental_results):
    doc = base_pack()
    second = json.loads(json.dumps(doc["input_sets"][0]))
    second.update(key="other", name="default")  # the first set's key, as a name
    doc["input_sets"].append(second)
    pack = tmp_path / "pack.yaml"
    pack.write_text(dump(doc))
    code, body = grade_json(str(pack), "--input-set", "Default", "--results", str(mental_results))
    assert code == 2
    assert body["error"]["code"] == "ambiguous_challenge_input_set"
    assert body["error"]["choices"] == ["default", "other"]


def test_a_pack_without_input_sets_grades_one_empty_case_per_challenge(tmp_path):
    doc = base_pack()
    del doc["input_sets"]
    doc["challenges"].append({"key": "diff", "title": "Diff", "category": "math", "difficulty": "easy"})
    pack = tmp_path / "pack.yaml"
    pack.write_text(dump(doc))
    results = tmp_path / "r.jsonl"
    results.write_text(result_line("sum", "done") + result_line("diff", "no"))
    code, body = grade_json(str(pack), "--results", str(results))
    assert body["input_set"] is None
    assert [(c["challenge_key"], c["case_key"], c["grading"]["status"]) for c in body["cases"]] == [
        ("sum", "sum", "PASSED"),
        ("diff", "diff", "FAILED"),
    ]
    assert code == 1


def test_bad_result_lines_are_all_listed_with_exit_2(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(
        "not json\n"
        + result_line("nope", "1")
        + result_line("crates", "168")
        + result_line("crates", "168")
        + json.dumps({"case_key": "train"})
        + "\n"
        + result_line("change", "x", invocations=[], tool_calls=[{"name": "a", "args": {}}])
    )
    code, doc = grade_json(str(MENTAL), "--results", str(path))
    assert code == 2
    error = doc["error"]
    assert error["code"] == "invalid_results"
    assert error["message"] == "5 bad result lines"
    assert [line["line"] for line in error["lines"]] == [1, 2, 4, 5, 6]
    code, _, err = grade(str(MENTAL), "--results", str(path))
    assert code == 2 and "line 1:" in err


def test_a_missing_results_file_is_an_io_error(tmp_path):
    code, doc = grade_json(str(MENTAL), "--results", str(tmp_path / "none.jsonl"))
    assert code == 2
    assert doc["error"]["code"] == "io_error"


def test_a_missing_pack_is_an_io_error_naming_the_pack_argument(tmp_path, mental_results):
    """The error named ``path``, the argument of ``pack validate``: grade's is PACK."""
    code, doc = grade_json(str(tmp_path / "none.yaml"), "--results", str(mental_results))
    assert code == 2
    assert (doc["error"]["code"], doc["error"]["field"]) == ("io_error", "pack")


def test_an_unknown_judge_provider_is_a_usage_error(mental_results):
    code, doc = grade_json(
        str(MENTAL), "--results", str(mental_results), env={"AGENTCLASH_JUDGE_PROVIDER": "acme"}
    )
    assert code == 2
    assert doc["error"]["code"] == "invalid_judge_provider"


def test_a_judge_flag_without_a_provider_is_a_usage_error(mental_results, monkeypatch):
    """``--judge-base-url`` without a provider was silently unused: every judge was graded
    NOT_EVALUATED (no_judge_provider) and the command exited as if the flag did its job."""
    monkeypatch.delenv("AGENTCLASH_JUDGE_PROVIDER", raising=False)
    code, doc = grade_json(
        str(MENTAL), "--results", str(mental_results), "--judge-base-url", "http://127.0.0.1:9/v1"
    )
    assert code == 2
    assert doc["error"] == {
        "code": "missing_judge_provider",
        "message": "--judge-base-url needs a judge provider: add --judge-provider openai|anthropic "
        "(or set AGENTCLASH_JUDGE_PROVIDER), or drop --judge-base-url",
        "field": "judge_provider",
    }
    # a base URL in the environment alone (a shared .env) is not an error
    code, doc = grade_json(
        str(MENTAL),
        "--results",
        str(mental_results),
        env={"AGENTCLASH_JUDGE_BASE_URL": "http://127.0.0.1:9/v1"},
    )
    assert code == 0, doc


def test_grade_touches_no_database(tmp_path, mental_results):
    env = dict(os.environ)
    env["DATABASE_URL"] = f"sqlite:///{tmp_path}/no/such/dir/db.sqlite3"
    env["CELERY_BROKER_URL"] = "memory://"
    result = subprocess.run(
        [sys.executable, "manage.py", "grade", str(MENTAL), "--results", str(mental_results), "--json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["lanes"][0]["pass_rate"] == 1.0


@pytest.mark.parametrize("as_json", [True, False])
def test_lone_surrogates_in_the_results_are_printed_as_replacement_characters(tmp_path, as_json):
    """A "\\ud800" escape in a results line parses into a lone surrogate, which neither orjson
    nor a UTF-8 stdout can write: the command ended in a traceback. It prints U+FFFD."""
    path = tmp_path / "results.jsonl"
    path.write_text(
        '{"case_key": "crates", "deployment": "agent\\ud800", "final_output": "168\\udfff"}\n'
        '{"case_key": "nope\\ud800", "final_output": "1"}\n'
    )
    good = tmp_path / "good.jsonl"
    good.write_text('{"case_key": "crates", "deployment": "agent\\ud800", "final_output": "168\\udfff"}\n')
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    for results, code in ((path, 2), (good, 0)):
        result = subprocess.run(
            [sys.executable, "manage.py", "grade", str(MENTAL), "--results", str(results)]
            + (["--json"] if as_json else []),
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == code, result.stderr[-2000:]
        assert "Traceback" not in result.stderr
        if as_json:
            doc = json.loads(result.stdout)
            if code == 2:
                assert doc["error"]["lines"][0]["message"] == "case 'nope\\ud800' is not in the input set"
            else:
                assert doc["lanes"][0]["deployment"] == "agent\ufffd"
        elif code == 0:
            assert "agent\ufffd" in result.stdout


def test_a_gzipped_results_file_grades_as_the_file_itself(tmp_path, mental_results, monkeypatch):
    """The trace-import route reads gzip; grade read the same .jsonl.gz as one bad line
    ("not UTF-8 text") and exited 2."""
    import gzip

    from packs.management.commands import grade as grade_module

    packed = tmp_path / "results.jsonl.gz"
    packed.write_bytes(gzip.compress(mental_results.read_bytes()))
    plain_code, plain = grade_json(str(MENTAL), "--results", str(mental_results))
    code, doc = grade_json(str(MENTAL), "--results", str(packed))
    assert (code, without_timing(doc)) == (plain_code, without_timing(plain)) == (0, without_timing(plain))
    packed.write_bytes(gzip.compress(mental_results.read_bytes())[:-10])
    code, doc = grade_json(str(MENTAL), "--results", str(packed))
    assert (code, doc["error"]["code"], doc["error"]["field"]) == (2, "parse_error", "results")
    monkeypatch.setattr(grade_module, "RESULTS_MAX_BYTES", 100)
    packed.write_bytes(gzip.compress(mental_results.read_bytes() + b"\n" * 1000))
    code, doc = grade_json(str(MENTAL), "--results", str(packed))
    assert (code, doc["error"]["code"]) == (2, "payload_too_large")


@pytest.mark.parametrize("pack", ["mental-math", "release-notes"])
@pytest.mark.parametrize("to_file", [False, True])
def test_the_streamed_document_is_the_document(pack, to_file, tmp_path):
    """The --json document is written case by case; byte for byte it is what dumps() made of
    the whole document."""
    from agentclash_site.lib.cli import dumps
    from grading.engine.offline import grade_offline
    from packs.bundle import validate_bundle
    from packs.management.commands.pack import read_bundle_or_fail

    pack_path = EXAMPLES / pack / "pack.yaml"
    results = EXAMPLES / pack / "results.jsonl"
    report = validate_bundle(read_bundle_or_fail(pack_path), filename="pack.yaml")
    from packs.bundle import select_input_set

    selection = select_input_set(report.manifest, None)
    whole = grade_offline(
        spec=report.evaluation_spec,
        pack_slug=report.bundle.pack.slug,
        pack_number=report.bundle.version.number,
        input_set_name=selection.key,
        cases=report.grading_cases(selection.key),
        results=results.read_bytes(),
    )
    if to_file:
        out = tmp_path / "doc.json"
        grade(str(pack_path), "--results", str(results), "--output", str(out))
        written = out.read_text()
    else:
        written = grade(str(pack_path), "--results", str(results), "--json")[1]
    assert without_timing(json.loads(written)) == without_timing(whole)
    # identical text once the timing fields (the only varying values) are the same
    timing = re.compile(r'"timing": \{[^}]*\}')
    assert timing.sub("T", written) == timing.sub("T", dumps(whole) + "\n")


def test_cases_are_written_as_they_are_graded_not_held_for_the_end(tmp_path, monkeypatch):
    """The whole --json document was built in memory and dumped at the end: 100,000 result
    lines took 1.6 GB (the document alone is 326 MB of JSON). Each case is now written once
    graded; here the output has grown between one grade and the next."""
    from grading.engine import offline

    out = StringIO()
    sizes = []
    real = offline._default_grade()

    def grade_and_look(*args, **kwargs):
        sizes.append(len(out.getvalue()))
        return real(*args, **kwargs)

    monkeypatch.setattr(offline, "_default_grade", lambda: grade_and_look)
    results = tmp_path / "r.jsonl"
    results.write_text("".join(result_line(k, "1") for k in ("crates", "train", "change")))
    with pytest.raises(SystemExit):  # exit 1: no case passed
        call_command("grade", str(MENTAL), "--results", str(results), "--json", stdout=out)
    assert len(sizes) >= 3 and sizes[-1] > sizes[0]
    assert len(json.loads(out.getvalue())["cases"]) == 3


def test_json_and_output_print_the_document_to_both(tmp_path, mental_results):
    out = tmp_path / "doc.json"
    code, printed, _ = grade(str(MENTAL), "--results", str(mental_results), "--json", "--output", str(out))
    assert code == 0
    assert json.loads(printed) == json.loads(out.read_text())
    code, printed, _ = grade(str(MENTAL), "--results", str(mental_results), "--output", str(out))
    assert code == 0 and printed.startswith("Pack mental-math v1") and json.loads(out.read_text())["cases"]
