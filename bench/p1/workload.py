"""The P1 workload, one definition for every tool: 2,000 cases, 4 deterministic checks each.

Case n (1..N) asks ``Q<n>: what is <n> squared? Answer as 'A<n> = value {json}'.``; the stub
answers ``A<n> = <n*n> {"n": <n>}`` (every 4th wrong), so exactly 3/4 of the cases pass:

1. exact: the whole answer equals ``A<n> = <n*n> {"n": <n>}``;
2. contains ``A<n>``;
3. regex ``A\\d+ = \\d+``;
4. the JSON tail's ``n`` equals n.

This module writes the same workload as a pack for this project, a promptfoo config and an
Inspect AI task, and holds the bare Python checks the limit client applies.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

CASES = 2000
PACK_SLUG = "p1-squares"
SHAPE = r"A\d+ = \d+"
_SHAPE_RE = re.compile(SHAPE)


def question(n: int) -> str:
    return f"Q{n}: what is {n} squared? Answer as 'A{n} = value {{json}}'."


def expected(n: int) -> str:
    return f'A{n} = {n * n} {{"n": {n}}}'


def expected_passes(cases: int = CASES) -> int:
    return cases - cases // 4


def json_tail(text: str) -> object:
    start = text.rfind("{")
    if start < 0:
        return None
    try:
        return json.loads(text[start:])
    except ValueError:
        return None


def checks(n: int, text: str) -> bool:
    """The four checks in plain Python (what the bare client applies)."""
    tail = json_tail(text)
    return (
        text == expected(n)
        and f"A{n}" in text
        and _SHAPE_RE.search(text) is not None
        and isinstance(tail, dict)
        and tail.get("n") == n
    )


# --- this project: a pack ----------------------------------------------------------------


def _tail_pattern(n: int) -> str:
    # The engine's json_path_match reads a whole JSON document; the answer is text with a JSON
    # tail, so the tail check is an anchored RE2 pattern on the exact JSON object.
    return r'\{"n":\s*' + str(n) + r"\}\s*$"


def pack_document(cases: int = CASES, slug: str = PACK_SLUG) -> dict:
    return {
        "pack": {"slug": slug, "name": "P1 squares benchmark", "family": "benchmark"},
        "version": {
            "number": 1,
            "execution_mode": "prompt_eval",
            "evaluation_spec": {
                "name": "p1-squares",
                "version_number": 1,
                "judge_mode": "deterministic",
                "validators": [
                    {
                        "key": "exact",
                        "type": "exact_match",
                        "target": "final_output",
                        "expected_from": "case.expectations.answer",
                    },
                    {
                        "key": "names_case",
                        "type": "contains",
                        "target": "final_output",
                        "expected_from": "case.expectations.tag",
                    },
                    {
                        "key": "shape",
                        "type": "regex_match",
                        "target": "final_output",
                        "expected_from": f"literal:{SHAPE}",
                    },
                    {
                        "key": "json_n",
                        "type": "regex_match",
                        "target": "final_output",
                        "expected_from": "case.expectations.tail",
                    },
                ],
                "scorecard": {
                    "pass_threshold": 1,
                    "dimensions": [
                        {
                            "key": "correctness",
                            "source": "validators",
                            "validators": ["exact", "names_case", "shape", "json_n"],
                        }
                    ],
                },
            },
        },
        "challenges": [
            {
                "key": "square",
                "title": "Square a number",
                "category": "arithmetic",
                "difficulty": "easy",
                "instructions": "{{question}}",
            }
        ],
        "input_sets": [
            {
                "key": "all",
                "name": "All cases",
                "cases": [
                    {
                        "challenge_key": "square",
                        "case_key": f"c{n}",
                        "payload": {"question": question(n)},
                        "expectations": [
                            {"key": "answer", "kind": "text", "value": expected(n)},
                            {"key": "tag", "kind": "text", "value": f"A{n}"},
                            {"key": "tail", "kind": "text", "value": _tail_pattern(n)},
                        ],
                    }
                    for n in range(1, cases + 1)
                ],
            }
        ],
    }


def write_pack(path: Path, cases: int = CASES, slug: str = PACK_SLUG) -> Path:
    import yaml

    path.write_text(
        yaml.dump(pack_document(cases, slug), Dumper=yaml.CSafeDumper, sort_keys=False, width=200),
        encoding="utf-8",
    )
    return path


# --- promptfoo ---------------------------------------------------------------------------

_PROMPTFOO_TAIL = (
    "const s = String(output); const i = s.lastIndexOf('{'); if (i < 0) return false; "
    "try { return JSON.parse(s.slice(i)).n === Number(context.vars.n); } catch (e) { return false; }"
)


def promptfoo_config(base_url: str, cases: int = CASES) -> dict:
    return {
        "description": "P1 squares",
        "prompts": ["{{question}}"],
        "providers": [
            {
                "id": "openai:chat:stub",
                "config": {"apiBaseUrl": base_url, "apiKey": "bench-not-a-secret"},
            }
        ],
        "evaluateOptions": {"maxConcurrency": 16, "cache": False, "showProgressBar": False},
        "tests": [
            {
                "vars": {"n": n, "question": question(n)},
                "assert": [
                    {"type": "equals", "value": expected(n)},
                    {"type": "contains", "value": f"A{n}"},
                    {"type": "regex", "value": SHAPE},
                    {"type": "javascript", "value": _PROMPTFOO_TAIL},
                ],
            }
            for n in range(1, cases + 1)
        ],
    }


# --- Inspect AI --------------------------------------------------------------------------

INSPECT_TASK = '''"""P1 squares as an Inspect AI task (generated by bench/p1/workload.py)."""
import json
import re

from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Target, accuracy, scorer
from inspect_ai.solver import generate

CASES = {cases}
SHAPE = re.compile(r"A\\d+ = \\d+")


def question(n):
    return f"Q{{n}}: what is {{n}} squared? Answer as 'A{{n}} = value {{{{json}}}}'."


def expected(n):
    return f'A{{n}} = {{n * n}} {{{{"n": {{n}}}}}}'


@scorer(metrics=[accuracy()])
def four_checks():
    async def score(state, target: Target):
        n = int(target.text)
        text = state.output.completion
        tail = None
        i = text.rfind("{{")
        if i >= 0:
            try:
                tail = json.loads(text[i:])
            except ValueError:
                tail = None
        ok = (
            text == expected(n)
            and f"A{{n}}" in text
            and SHAPE.search(text) is not None
            and isinstance(tail, dict)
            and tail.get("n") == n
        )
        return Score(value=CORRECT if ok else INCORRECT, answer=text)

    return score


@task
def squares():
    samples = [Sample(input=question(n), target=str(n), id=n) for n in range(1, CASES + 1)]
    return Task(dataset=samples, solver=[generate()], scorer=four_checks())
'''


def write_inspect_task(path: Path, cases: int = CASES) -> Path:
    path.write_text(INSPECT_TASK.format(cases=cases), encoding="utf-8")
    return path
