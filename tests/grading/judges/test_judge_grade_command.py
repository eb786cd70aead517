"""``manage.py grade --judge-provider openai --judge-base-url http://127.0.0.1:<port>/v1``:
judges, n_wise, model claims and critique offline, against the fake provider."""

from __future__ import annotations

import json
import os
from io import StringIO
from pathlib import Path

import yaml
from django.core.management import call_command

from tests.fakes.judge_provider import blocks, by_mode, content, rank, verdict

ROOT = Path(__file__).resolve().parents[3]
DEMO = ROOT / "examples" / "packs" / "demo"
DEMO_ARGS = (
    str(DEMO / "pack.yaml"),
    "--input-set",
    "replies",
    "--results",
    str(DEMO / "results" / "replies.jsonl"),
)


def run_grade(*args: str, env: dict[str, str] | None = None) -> tuple[int, dict]:
    out, err = StringIO(), StringIO()
    saved = dict(os.environ)
    os.environ.update(env or {})
    try:
        call_command("grade", *args, "--json", stdout=out, stderr=err)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return code, json.loads(out.getvalue())


def claims_answer(body):
    source_id, text = blocks(body)[0]
    first = text.split(".")[0] + "."
    other = blocks(body)[1][0]
    return {
        "claims": [
            {
                "claim": first,
                "type": "factual",
                "span": [0, len(first)],
                "supported": True,
                "citations": [{"id": other}],
            },
            {"claim": "not in the text", "type": "quality", "span": [0, 3], "citations": []},
        ]
    }


def critique_answer(body):
    return {
        "suggestions": [
            {"assertion": "answer-correct", "reason": "passes on 14 of 28 cases; add a tolerance"},
            {"assertion": "no-such-assertion", "reason": "dropped"},
        ],
        "overall": "one weak assertion",
    }


def test_demo_pack_with_judges_claims_and_critique(fake):
    from tests.fakes.judge_provider import verdict as v

    fake.default = by_mode(
        rubric=v({"score": 4, "reasoning": "clear and correct"}),
        claims=v(claims_answer, cite=False),
        critique=v(critique_answer, cite=False),
    )
    code, doc = run_grade(
        *DEMO_ARGS,
        "--judge-provider",
        "openai",
        "--judge-base-url",
        fake.base_url,
        "--judge-api-key",
        "k",
    )
    judged = [e for c in doc["cases"] for e in c["grading"]["expectations"] if e["key"] == "reply-quality"]
    assert judged and {e["status"] for e in judged} == {"PASSED"}
    assert {e["score"] for e in judged} == {0.75}
    assert all(e["evidence_refs"] for e in judged)
    rubric_calls = sum(1 for b in fake.requests if "(mode: rubric)" in b["messages"][0]["content"])
    assert rubric_calls == 3 * len(judged)
    llm_claims = [cl for c in doc["cases"] for cl in c["grading"]["claims"] if cl["source"] == "llm"]
    assert llm_claims and all(cl["verified"] is True and cl["type"] == "factual" for cl in llm_claims)
    suggestions = doc["eval_feedback"]["suggestions"]
    llm = [s for s in suggestions if s["source"] == "llm"]
    assert llm and all(s["assertion"] == "answer-correct" for s in llm)  # the unknown one is dropped
    assert doc["judge_usage"]["calls"] == fake.calls
    assert doc["judge_usage"]["cost_usd"] > 0  # claude-haiku-4-5 is in the default price table
    assert code in (0, 1)


def test_env_variables_select_the_provider(fake):
    fake.default = by_mode(rubric=verdict({"score": 1}), other=content("{}"))
    code, doc = run_grade(
        *DEMO_ARGS,
        env={"AGENTCLASH_JUDGE_PROVIDER": "openai", "AGENTCLASH_JUDGE_BASE_URL": fake.base_url},
    )
    judged = [e for c in doc["cases"] for e in c["grading"]["expectations"] if e["key"] == "reply-quality"]
    assert {e["status"] for e in judged} == {"FAILED"} and fake.calls > 0
    assert "authorization" not in fake.headers[0]  # no key given, none sent


def small_pack(tmp_path, judge: dict, lines: list[dict], *, cases: int = 1, dims=None) -> list[str]:
    pack = {
        "pack": {"slug": "nw", "name": "NW", "family": "reasoning"},
        "version": {
            "number": 1,
            "execution_mode": "native",
            "evaluation_spec": {
                "name": "nw-v1",
                "version_number": 1,
                "judge_mode": "hybrid",
                "validators": [
                    {"key": "any", "type": "contains", "target": "final_output", "expected_from": "literal:"}
                ],
                "llm_judges": [judge],
                "scorecard": {
                    "dimensions": dims or [{"key": "j", "source": "llm_judge", "judge_key": judge["key"]}],
                    "pass_threshold": 0.5,
                },
            },
        },
        "challenges": [
            {
                "key": "cap",
                "title": "Capital",
                "category": "qa",
                "difficulty": "easy",
                "instructions": "Name the capital of France.",
            }
        ],
        "input_sets": [
            {
                "key": "default",
                "name": "Default",
                "cases": [
                    {"challenge_key": "cap", "case_key": f"c{i}", "payload": {"q": "France"}}
                    for i in range(cases)
                ],
            }
        ],
    }
    (tmp_path / "pack.yaml").write_text(yaml.safe_dump(pack))
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return [str(tmp_path / "pack.yaml"), "--results", str(tmp_path / "r.jsonl")]


def test_provider_down_grades_every_case_with_infra_errors(fake, tmp_path):
    base = fake.base_url
    fake.stop()
    judge = {
        "key": "ok",
        "mode": "assertion",
        "assertion": "names Paris",
        "model": "gpt-4o-mini",
        "max_retries": 1,
    }
    args = small_pack(
        tmp_path, judge, [{"case_key": f"c{i}", "final_output": "Paris"} for i in range(5)], cases=5
    )
    code, doc = run_grade(*args, "--judge-provider", "openai", "--judge-base-url", base)
    judged = [e for c in doc["cases"] for e in c["grading"]["expectations"] if e["key"] == "ok"]
    assert len(judged) == 5 and {(e["status"], e["outcome_class"]) for e in judged} == {
        ("ERROR", "infra_error")
    }
    assert "not sent" in judged[-1]["evidence"]  # the breaker stops calling a provider that is down
    assert {c["grading"]["status"] for c in doc["cases"]} == {"ERROR"} and code == 1


def test_bad_base_url_is_a_usage_error():
    code, doc = run_grade(
        *DEMO_ARGS,
        "--judge-provider",
        "openai",
        "--judge-base-url",
        "ftp://x",
    )
    assert code == 2 and doc["error"]["field"] == "judge_base_url"


def test_n_wise_offline_ranks_deployments(fake, tmp_path):
    judge = {
        "key": "best",
        "mode": "n_wise",
        "model": "gpt-4o-mini",
        "samples": 2,
        "prompt": "Which answer names the capital of France?",
    }
    lines = [
        {"deployment": "good", "case_key": "c0", "final_output": "Paris"},
        {"deployment": "bad", "case_key": "c0", "final_output": "Berlin"},
    ]
    args = small_pack(tmp_path, judge, lines)

    def order(body, path):
        found = dict(blocks(body))
        paris = next(bid.split("/")[0] for bid, t in found.items() if t == "Paris")
        return rank(lambda labels: [paris] + [x for x in labels if x != paris])(body, path)

    fake.default = by_mode(n_wise=order, other=content("{}"))
    code, doc = run_grade(
        *args,
        "--judge-provider",
        "openai",
        "--judge-base-url",
        fake.base_url,
    )
    by_dep = {c["deployment"]: c["grading"] for c in doc["cases"]}
    best = {d: next(e for e in g["expectations"] if e["key"] == "best") for d, g in by_dep.items()}
    assert best["good"]["score"] == 1.0 and best["bad"]["score"] == 0.0
    assert by_dep["good"]["status"] == "PASSED" and by_dep["bad"]["status"] == "FAILED"
    assert sum(1 for b in fake.requests if "(mode: n_wise)" in b["messages"][0]["content"]) == 2
    ranking_usage = by_dep["good"]["judge_usage"]["calls"] + by_dep["bad"]["judge_usage"]["calls"]
    assert ranking_usage >= 2


def test_flaky_judge_across_repetitions_and_budget_in_eval_feedback(fake, tmp_path):
    judge = {
        "key": "ok",
        "mode": "assertion",
        "assertion": "names Paris",
        "model": "gpt-4o-mini",
        "samples": 1,
    }
    lines = [{"case_key": "c0", "repetition": r, "final_output": "Paris"} for r in (1, 2)]
    lines += [{"case_key": "c1", "repetition": r, "final_output": "Paris"} for r in (1, 2)]
    args = small_pack(tmp_path, judge, lines, cases=2)
    answers = iter([True, False, True, True])

    def flip(body):
        return {"pass": next(answers)}

    fake.default = by_mode(assertion=verdict(flip), other=content("{}"))
    code, doc = run_grade(*args, "--judge-provider", "openai", "--judge-base-url", fake.base_url)
    statuses = [
        next(e for e in c["grading"]["expectations"] if e["key"] == "ok")["status"] for c in doc["cases"]
    ]
    assert statuses == ["PASSED", "FAILED", "PASSED", "PASSED"]
    found = {s["finding"]: s for s in doc["eval_feedback"]["suggestions"]}
    flaky = found["unstable_across_repeats"]
    assert flaky["assertion"] == "ok" and "1 lane/case pair" in flaky["reason"] and "c0" in flaky["reason"]


def test_budget_exhausted_listed_in_eval_feedback(fake, tmp_path):
    judge = {"key": "ok", "mode": "assertion", "assertion": "names Paris", "model": "acme/unpriced-model"}
    args = small_pack(tmp_path, judge, [{"case_key": "c0", "final_output": "Paris"}])
    pack = yaml.safe_load((tmp_path / "pack.yaml").read_text())
    pack["version"]["evaluation_spec"]["scorecard"]["judge_limits"] = {"max_calls_usd": 1.0}
    (tmp_path / "pack.yaml").write_text(yaml.safe_dump(pack))
    fake.default = by_mode(assertion=verdict({"pass": True}), other=content("{}"))
    code, doc = run_grade(*args, "--judge-provider", "openai", "--judge-base-url", fake.base_url)
    result = next(e for e in doc["cases"][0]["grading"]["expectations"] if e["key"] == "ok")
    assert result["reason_code"] == "judge_budget_exhausted" and "no price known" in result["evidence"]
    assert any(s["finding"] == "budget_exhausted" for s in doc["eval_feedback"]["suggestions"])
    assert sum(1 for b in fake.requests if "(mode: assertion)" in b["messages"][0]["content"]) == 0
