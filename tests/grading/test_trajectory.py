"""Trajectory matchers (grading.md §4)."""

from __future__ import annotations

import pytest
from validator_helpers import run, status

from grading.engine.refs import Resolved


def traj(config: dict, response: dict, expected=None):
    return run("tool_trajectory", "", expected, config, response={"final_output": "", **response})


def calls(*spec):
    out = []
    for s in spec:
        if isinstance(s, str):
            out.append({"name": s})
        else:
            out.append(s)
    return out


@pytest.mark.parametrize(
    ("match_type", "actual", "score"),
    [
        ("EXACT", ["a", "b"], 1.0),
        ("EXACT", ["a", "b", "c"], 0.0),
        ("IN_ORDER", ["a", "x", "b"], 1.0),
        ("IN_ORDER", ["b", "a"], 0.0),
        ("ANY_ORDER", ["b", "x", "a"], 1.0),
        ("ANY_ORDER", ["a"], 0.0),
        ("any_order", ["b", "a"], 1.0),
    ],
)
def test_tool_trajectory_match_types(match_type, actual, score):
    r = traj(
        {"expected": [{"name": "a"}, {"name": "b"}], "match_type": match_type}, {"tool_calls": calls(*actual)}
    )
    assert r.score == score and r.per_invocation_scores == [score]


def test_any_order_needs_bipartite_matching_not_first_fit():
    expected = [{"name": "w", "args": {"p": 1}}, {"name": "w", "args": {"p": 1, "q": 2}}]
    actual = calls({"name": "w", "args": {"p": 1, "q": 2}}, {"name": "w", "args": {"p": 1}})
    assert traj({"expected": expected, "match_type": "ANY_ORDER"}, {"tool_calls": actual}).score == 1.0


def test_args_match_subset_exact_and_ignore():
    exp = [{"name": "w", "args": {"p": 1}}]
    actual = {"tool_calls": calls({"name": "w", "args": {"p": 1.0, "extra": True}})}
    assert traj({"expected": exp}, actual).score == 1.0
    assert traj({"expected": exp, "args_match": "exact"}, actual).score == 0.0
    assert traj({"expected": [{"name": "w", "args": {"p": 9}}], "ignore_args": True}, actual).score == 1.0
    assert traj({"expected": [{"name": "w"}]}, actual).score == 1.0  # no args: any args


def test_failed_calls_are_ignored_unless_include_failed():
    actual = {"tool_calls": calls({"name": "a", "status": "error"})}
    assert traj({"expected": [{"name": "a"}]}, actual).score == 0.0
    assert traj({"expected": [{"name": "a"}], "include_failed": True}, actual).score == 1.0


def test_empty_expected_lists():
    assert traj({"expected": [], "match_type": "IN_ORDER"}, {"tool_calls": calls("a")}).score == 1.0
    assert traj({"expected": [], "match_type": "EXACT"}, {"tool_calls": calls("a")}).score == 0.0
    assert traj({"expected": [], "match_type": "EXACT"}, {}).score == 1.0


def test_per_invocation_pairing_and_unpaired_expected_invocations():
    response = {
        "invocations": [
            {"id": "t1", "tool_calls": calls("a")},
            {"id": "t2", "tool_calls": calls("b")},
            {"id": "t3", "tool_calls": calls("c")},
        ]
    }
    r = traj({"expected": [[{"name": "a"}], [{"name": "x"}]], "threshold": 0.5}, response)
    assert r.per_invocation_scores == [1.0, 0.0]
    assert r.score == 0.5 and status(r) == "PASSED"
    assert "extra actual invocations ignored: t3" in r.evidence
    assert r.details["comparisons"][0]["invocation_id"] == "t1"
    r = traj({"expected": [[{"name": "a"}], [{"name": "b"}], [{"name": "c"}], [{"name": "d"}]]}, response)
    assert r.per_invocation_scores == [1.0, 1.0, 1.0, 0.0]


def test_expected_from_case_data():
    r = traj({}, {"tool_calls": calls("a")}, expected=Resolved(value='[{"name": "a"}]'))
    assert r.score == 1.0


def test_config_problems_then_zero_invocations():
    r = traj({"expected": "nope"}, {"tool_calls": calls("a")})
    assert (
        status(r) == "NOT_EVALUATED" and r.klass().value == "pack_error" and r.per_invocation_scores == [None]
    )
    r = traj({"expected": [{"name": "a"}], "match_type": "SOMETIMES"}, {})
    assert r.reason_code == "invalid_config_match_type" and r.score is None
    r = traj({"expected": [{"name": "a"}]}, {"invocations": []})
    assert status(r) == "NOT_EVALUATED" and r.klass().value == "unavailable"
    assert r.reason_code == "no_invocations" and r.per_invocation_scores == [] and r.score is None


def test_black_box_is_unavailable():
    from grading.engine import evidence_from_response, grade_case
    from grading.engine.types import CaseDef, GradeContext

    spec = {
        "validators": [
            {
                "key": "t",
                "type": "tool_trajectory",
                "target": "tool_calls",
                "config": {"expected": [{"name": "a"}]},
            }
        ]
    }
    ev = evidence_from_response({"final_output": "", "tool_calls": calls("a")}, evidence_level="black_box")
    r = grade_case(ev, CaseDef("c", "k"), spec, context=GradeContext(case_findings=[])).expectations[0]
    assert r.status.value == "UNAVAILABLE" and r.kind.value == "trajectory"


# skills_trajectory


def skills(config: dict, response: dict):
    return run("skills_trajectory", "", None, config, response={"final_output": "", **response})


def test_observed_uses_from_skill_tools_skill_md_reads_and_attributes():
    response = {
        "tool_calls": [
            {"name": "Skill", "args": {"skill": "pdf"}},
            {"name": "Read", "args": {"file_path": "skills/xlsx/SKILL.md"}},
            {"name": "bash", "args": {}, "attributes": {"gen_ai.skill.name": "docx"}},
            {"name": "load_skill", "args": {"name": "plugin:pptx"}},
        ]
    }
    r = skills(
        {"skills": [{"skill": "pdf"}, {"skill": "xlsx"}, {"skill": "docx"}, {"skill": "pptx"}]}, response
    )
    assert r.score == 0.75
    r = skills(
        {
            "skills": [{"skill": "pdf"}, {"skill": "xlsx"}, {"skill": "docx"}, {"skill": "pptx"}],
            "strip_plugin_prefix": True,
        },
        response,
    )
    assert r.score == 1.0
    uses = r.details["comparisons"][0]["observed_uses"]
    assert uses[1] == {"call_index": 1, "names": ["Read", "xlsx"]}


def test_requirement_shapes():
    response = {
        "tool_calls": [
            {"name": "grep", "args": {"pattern": "x", "path": "."}},
            {"name": "Skill", "args": {"skill": "grep"}},
        ]
    }
    assert skills({"skills": [{"tool": "grep", "args": {"pattern": "x"}}]}, response).score == 1.0
    assert skills({"skills": [{"tool": "grep", "args": {"pattern": "y"}}]}, response).score == 0.0
    # a bare tool name counts only with count_tool_names
    assert (
        skills(
            {"skills": ["grep"], "count_tool_names": False, "match_type": "EXACT"},
            {"tool_calls": calls("grep")},
        ).score
        == 0.0
    )
    assert skills({"skills": [{"skill": "grep"}]}, {"tool_calls": calls("grep")}).score == 0.0
    assert skills({"skills": [7]}, {"tool_calls": calls("7")}).score == 1.0


def _skill_msg(name: str) -> dict:
    return {"role": "assistant", "content": f"using {name}", "attributes": {"gen_ai.skill.name": name}}


@pytest.mark.parametrize(("match_type", "score"), [("EXACT", 1.0), ("IN_ORDER", 1.0), ("ANY_ORDER", 1.0)])
def test_skill_messages_take_their_transcript_position(match_type, score):
    # §4.2 walks the invocation in order, the skill messages included: pdf is activated before
    # the agent calls a (the tool message holding a's result comes after it), and b after a
    response = {
        "tool_calls": [{"name": "a", "args": {}}, {"name": "b", "args": {}}],
        "messages": [
            {"role": "user", "content": "go"},
            _skill_msg("pdf"),
            {"role": "tool", "content": "a's result"},
            _skill_msg("xlsx"),
            {"role": "tool", "content": "b's result"},
        ],
    }
    r = skills({"skills": ["pdf", "a", "xlsx", "b"], "match_type": match_type}, response)
    assert r.score == score
    uses = r.details["comparisons"][0]["observed_uses"]
    assert [u["names"] for u in uses] == [["pdf"], ["a"], ["xlsx"], ["b"]]
    assert [u["call_index"] for u in uses] == [None, 0, None, 1]


def test_a_result_message_naming_the_call_id_places_the_call():
    response = {
        "tool_calls": [{"name": "a", "id": "c1"}, {"name": "b", "id": "c2"}],
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "tool", "content": "b", "attributes": {"tool_call_id": "c2"}},
            _skill_msg("pdf"),
            {"role": "tool", "content": "a", "attributes": {"gen_ai.tool.call.id": "c1"}},
        ],
    }
    r = skills({"skills": ["b", "pdf", "a"], "match_type": "IN_ORDER"}, response)
    # calls stay in call order (a, b); pdf precedes a's result but follows b's
    uses = r.details["comparisons"][0]["observed_uses"]
    assert [u["names"] for u in uses] == [["pdf"], ["a"], ["b"]]


def test_skill_messages_count_in_their_own_invocation():
    response = {
        "invocations": [
            {"user_content": "one", "tool_calls": [{"name": "a"}]},
            {"user_content": "two", "tool_calls": [{"name": "b"}]},
        ],
        "messages": [
            {"role": "user", "content": "one"},
            {"role": "tool", "content": "a"},
            {"role": "user", "content": "two"},
            _skill_msg("pdf"),
            {"role": "tool", "content": "b"},
        ],
    }
    r = skills({"skills": ["pdf", "b"], "match_type": "EXACT"}, response)
    assert r.per_invocation_scores == [0.0, 1.0]
    # without one user message per invocation the message goes with the nearest call before it
    response["messages"] = [m for m in response["messages"] if m["role"] != "user"]
    r = skills({"skills": ["a", "pdf"], "match_type": "EXACT"}, response)
    assert r.per_invocation_scores == [1.0, 0.0]


def test_without_tool_messages_skill_messages_follow_the_calls():
    response = {"tool_calls": calls("a"), "messages": [{"role": "user", "content": "go"}, _skill_msg("pdf")]}
    assert skills({"skills": ["a", "pdf"], "match_type": "EXACT"}, response).score == 1.0


def test_any_order_multiset_credit():
    assert skills({"skills": ["a", "a"]}, {"tool_calls": calls("a")}).score == 0.5
    assert skills({"skills": ["a", "a"]}, {"tool_calls": calls("a", "a", "a")}).score == 1.0


def test_in_order_is_lcs_not_greedy():
    assert skills(
        {"skills": ["a", "b", "c"], "match_type": "IN_ORDER"}, {"tool_calls": calls("a", "c")}
    ).score == pytest.approx(2 / 3)
    assert skills(
        {"skills": ["a", "b", "c"], "match_type": "IN_ORDER"}, {"tool_calls": calls("c", "a", "b")}
    ).score == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    ("config", "reason"),
    [
        ({}, "invalid_config_skills"),
        ({"skills": []}, "invalid_config_skills"),
        ({"skills": "a"}, "invalid_config_skills"),
        ({"skills": [{"skill": "a", "extra": 1}]}, "invalid_config_skills"),
        ({"skills": [None]}, "invalid_config_skills"),
        ({"skills": ["a"], "match_type": "BEST"}, "invalid_config_match_type"),
    ],
)
def test_not_evaluated_table_config_first(config, reason):
    r = skills(config, {"invocations": [{"tool_calls": []}, {"tool_calls": []}]})
    assert r.reason_code == reason and r.per_invocation_scores == [None, None] and r.score is None
    assert r.klass().value == "pack_error"
    r = skills(config, {"invocations": []})
    assert r.reason_code == reason  # config problems come before zero invocations


def test_zero_invocations():
    r = skills({"skills": ["a"]}, {"invocations": []})
    assert (
        r.reason_code == "no_invocations"
        and r.per_invocation_scores == []
        and r.klass().value == "unavailable"
    )


@pytest.mark.parametrize(
    "path",
    [
        "skills/pdf/SKILL.md",
        "./skills/pdf/./SKILL.md",
        "skills//pdf//SKILL.md",
        "/workspace/skills/other/../pdf/SKILL.md",
        "skills\\pdf\\SKILL.md",
    ],
)
def test_a_skill_md_read_counts_under_any_spelling_of_its_path(path):
    # §4.2 (2): the read path is normalised before its last two segments name the skill.
    response = {"final_output": "", "tool_calls": [{"name": "Read", "args": {"file_path": path}}]}
    r = run("skills_trajectory", "", None, {"skills": [{"skill": "pdf"}]}, response=response)
    assert r.score == 1.0, r.details
