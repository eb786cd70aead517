"""Rebuild the zip bundle of every example pack directory that ships files besides pack.yaml.

    python examples/packs/build_zips.py

Writes ``examples/packs/<directory>.zip``: ``pack.yaml`` plus the files its assets name, with
fixed timestamps and modes, so the same sources always give the same bytes
(``tests/packs/test_examples.py`` checks the committed zips against a rebuild).
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from packs.bundle.archive import bundle_from_directory, is_zip  # noqa: E402


def build_all() -> dict[str, bytes]:
    """``{zip file name: bytes}`` for every example directory whose bundle is a zip."""
    out = {}
    for directory in sorted(p for p in HERE.iterdir() if (p / "pack.yaml").is_file()):
        data = bundle_from_directory(directory)
        if is_zip(data):
            out[f"{directory.name}.zip"] = data
    return out


if __name__ == "__main__":
    for name, data in build_all().items():
        (HERE / name).write_bytes(data)
        print(f"wrote examples/packs/{name} ({len(data)} bytes)")
