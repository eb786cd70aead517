"""``user_notes_summary`` of grading.json (grading.md §7), parsed deterministically.

Bullets and paragraphs under a heading starting with "uncertain" go to ``uncertainties``,
"workaround" to ``workarounds``, everything else (text before any heading included) to
``needs_review``.
"""

from __future__ import annotations

import re

# The heading's text is group 2 with trailing blanks and closing hashes stripped in Python
# (``(.*?)\s*#*\s*$`` was cubic on a long line), and the emphasis heading's trailing blanks
# are possessive (two adjacent ``\s*`` split a run of spaces in every way).
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*)$")
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(.*)$")
_EMPHASIS_HEADING = re.compile(r"^\s*(?:\*\*|__)(.+?)(?:\*\*|__)\s*+:?\s*+$")


def _bucket(heading: str) -> str:
    h = heading.strip().strip("*_:").strip().lower()
    if h.startswith("uncertain"):
        return "uncertainties"
    if h.startswith("workaround"):
        return "workarounds"
    return "needs_review"


def _heading(line: str) -> str | None:
    """The text of a Markdown heading line (closing hashes dropped) or of a line that is one
    emphasised phrase, or None."""
    m = _HEADING.match(line)
    if m:
        return m.group(2).rstrip().rstrip("#").rstrip()
    m = _EMPHASIS_HEADING.match(line)
    return m.group(1) if m else None


def user_notes_summary(notes: str | None) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {"uncertainties": [], "needs_review": [], "workarounds": []}
    if not notes:
        return out
    bucket = "needs_review"
    paragraph: list[str] = []

    def flush() -> None:
        if paragraph:
            out[bucket].append(" ".join(paragraph))
            paragraph.clear()

    in_fence = False
    for line in notes.replace("\r\n", "\n").split("\n"):
        if line.strip().startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        heading = _heading(line)
        if heading is not None:
            flush()
            bucket = _bucket(heading)
            continue
        b = _BULLET.match(line)
        if b:
            flush()
            if b.group(1).strip():
                out[bucket].append(b.group(1).strip())
            continue
        if not line.strip():
            flush()
            continue
        if line.startswith(("  ", "\t")) and not paragraph and out[bucket]:
            out[bucket][-1] += " " + line.strip()  # continuation of a bullet
            continue
        paragraph.append(line.strip())
    flush()
    return out
