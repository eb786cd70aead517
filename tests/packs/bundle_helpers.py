"""Shared helpers of the pack bundle tests: a valid base pack, YAML rendering, zips."""

from __future__ import annotations

import copy
import io
import stat
import zipfile
from typing import Any

import yaml

import grading.engine.registry as registry
import packs.bundle.validate as validate_module
from packs.bundle import BundleReport, validate_bundle

# Internal failures must surface in tests instead of becoming a "could not be validated" error.
validate_module.RAISE_INTERNAL_ERRORS = True
registry.RAISE_INTERNAL_ERRORS = True


def base_pack() -> dict[str, Any]:
    """An otherwise valid pack (pack-format §15): scorecard {pass_threshold: 1, dimensions: [correctness]}."""
    return {
        "pack": {"slug": "demo", "name": "Demo", "family": "reasoning"},
        "version": {
            "number": 1,
            "execution_mode": "native",
            "evaluation_spec": {
                "name": "demo-v1",
                "version_number": 1,
                "judge_mode": "deterministic",
                "validators": [
                    {
                        "key": "answer",
                        "type": "contains",
                        "target": "final_output",
                        "expected_from": "literal:done",
                    }
                ],
                "scorecard": {"pass_threshold": 1, "dimensions": ["correctness"]},
            },
        },
        "challenges": [
            {
                "key": "sum",
                "title": "Sum",
                "category": "math",
                "difficulty": "easy",
                "instructions": "Add them.",
            }
        ],
        "input_sets": [
            {
                "key": "default",
                "name": "Default",
                "cases": [{"challenge_key": "sum", "case_key": "a", "payload": {"a": 1, "b": 2}}],
            }
        ],
    }


def pack(**changes: Any) -> dict[str, Any]:
    """The base pack with top-level keys replaced (None removes a key)."""
    doc = copy.deepcopy(base_pack())
    for key, value in changes.items():
        if value is None:
            doc.pop(key, None)
        else:
            doc[key] = value
    return doc


def spec_of(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["version"]["evaluation_spec"]


def dump(doc: dict[str, Any]) -> str:
    """Block style, keys in the order given."""
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, allow_unicode=True, width=1000)


def check(doc: dict[str, Any] | str | bytes, **kwargs: Any) -> BundleReport:
    if isinstance(doc, dict):
        doc = dump(doc)
    return validate_bundle(doc, **kwargs)


def errors(report: BundleReport) -> list[tuple[str, str]]:
    return [(e.field, e.message) for e in report.errors]


def warnings(report: BundleReport) -> list[tuple[str, str]]:
    return [(w.field, w.message) for w in report.warnings]


def rules(report: BundleReport) -> list[str | None]:
    return [w.rule for w in report.warnings]


def line_of(text: str, needle: str, occurrence: int = 1) -> int:
    """1-based line of the ``occurrence``-th line containing ``needle``."""
    seen = 0
    for number, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            seen += 1
            if seen == occurrence:
                return number
    raise AssertionError(f"{needle!r} not found")


def zip_bytes(members: dict[str, bytes | str], *, compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    """The same bytes for the same members: ``writestr(name, ...)`` stamps the current time,
    so two calls a clock tick apart (zip times have 2 s steps) made different archives and a
    test comparing a published zip with a fresh one failed now and then."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=compression) as archive:
        for name, data in members.items():
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info.compress_type = compression
            info.external_attr = 0o600 << 16  # as writestr(name) sets it
            archive.writestr(info, data.encode() if isinstance(data, str) else data)
    return buffer.getvalue()


def symlink_info(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.create_system = 3
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


def pos_of(text: str, needle: str, occurrence: int = 1) -> tuple[int, int]:
    """1-based (line, column) where the ``occurrence``-th ``needle`` starts."""
    number = line_of(text, needle, occurrence)
    return number, text.splitlines()[number - 1].index(needle) + 1
