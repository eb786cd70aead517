#!/usr/bin/env python3
"""An example agent that speaks AgentClash's hosted-agent protocol (standard library only).

It is a *replay* agent, not a model: for each request it answers with the response
recorded for that (challenge_key, case_key) in ``examples/packs/*/results.jsonl``, under
the persona named by the URL path, ``/agents/<deployment>``; e.g. ``/agents/careful`` and
``/agents/sloppy`` replay the lines whose ``deployment`` is ``careful`` or ``sloppy``.
A case it has no recording for gets an honest "I don't know" answer.

    python examples/agents/hosted_agent.py --port 8767
    python examples/agents/hosted_agent.py --port 8767 --signing-key "$KEY" --fail-rate 0.2

(``make run`` already runs one on 8766 for the demo's ``careful`` and ``sloppy``, and the example
judge on 8765: start yours on another port, and register it under another name.)

Options:
  --signing-key KEY  verify ``X-AgentClash-Signature`` (HMAC-SHA256 of the raw body) and
                     answer 401 when it does not match (also read from AGENTCLASH_SIGNING_KEY)
  --fail-rate P      answer a fraction P of requests with 503 + Retry-After: 1, to show
                     AgentClash retrying infra errors (``--seed`` makes it repeatable)
  --packs-dir DIR    where to look for */results.jsonl (default: examples/packs)

Register it as a deployment (the workspace must allow private endpoints for loopback):

    python manage.py deployment create --workspace demo --name replay --kind hosted_http \\
        --endpoint http://127.0.0.1:8767/agents/careful

The recordings are read once at start-up; restart to pick up new files.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import random
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
MAX_BODY = 10 * 1024 * 1024
MATCH_KEYS = ("case_key", "challenge_key", "deployment", "repetition")
DEFAULT_PERSONA = "default"


def load_recordings(packs_dir: Path) -> dict[tuple[str, str | None, str], dict[str, Any]]:
    """(deployment, challenge_key or None, case_key) -> the recorded response.

    The first line wins for a key (repetition 1 is usually first). Bad lines are skipped
    with a warning: this is a demo, it should start anyway.
    """
    recordings: dict[tuple[str, str | None, str], dict[str, Any]] = {}
    for path in sorted(packs_dir.glob("*/results.jsonl")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                print(f"warning: {path}:{number}: not JSON, skipped", file=sys.stderr)
                continue
            if not isinstance(record, dict) or not isinstance(record.get("case_key"), str):
                print(f"warning: {path}:{number}: no case_key, skipped", file=sys.stderr)
                continue
            deployment = str(record.get("deployment") or DEFAULT_PERSONA).strip()
            challenge = record.get("challenge_key")
            challenge = challenge.strip() if isinstance(challenge, str) and challenge.strip() else None
            response = {k: v for k, v in record.items() if k not in MATCH_KEYS}
            recordings.setdefault((deployment, challenge, record["case_key"].strip()), response)
    return recordings


def persona_from_path(path: str) -> str:
    parts = [p for p in path.split("?", 1)[0].split("/") if p]
    if len(parts) >= 2 and parts[0] == "agents":
        return parts[1]
    return DEFAULT_PERSONA


def unknown_case_answer(persona: str, challenge: str | None, case: str | None) -> dict[str, Any]:
    return {
        "final_output": "I don't know: I have no recorded answer for this case.",
        "user_notes": (
            f"Example replay agent (persona {persona!r}), not a model: no recording for "
            f"challenge {challenge!r}, case {case!r}."
        ),
    }


class Agent:
    def __init__(
        self,
        recordings: dict[tuple[str, str | None, str], dict[str, Any]],
        *,
        signing_key: str | None,
        fail_rate: float,
        seed: int | None,
    ) -> None:
        self.recordings = recordings
        self.signing_key = signing_key
        self.fail_rate = fail_rate
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    def should_fail(self) -> bool:
        with self._lock:
            return self.fail_rate > 0 and self._rng.random() < self.fail_rate

    def signature_ok(self, body: bytes, header: str | None) -> bool:
        if not self.signing_key:
            return True
        expected = "sha256=" + hmac.new(self.signing_key.encode(), body, hashlib.sha256).hexdigest()
        return bool(header) and hmac.compare_digest(expected, header.strip())

    def answer(self, persona: str, request: dict[str, Any]) -> dict[str, Any]:
        challenge = (request.get("challenge") or {}).get("key")
        case = (request.get("case") or {}).get("key")
        for key in ((persona, challenge, case), (persona, None, case)):
            if key in self.recordings:
                return self.recordings[key]
        return unknown_case_answer(persona, challenge, case)


def make_handler(agent: Agent, *, quiet: bool) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "AgentClashExampleAgent/1"

        def log_message(self, format: str, *args: Any) -> None:
            if not quiet:
                super().log_message(format, *args)

        def _send(self, status: int, document: Any, headers: dict[str, str] | None = None) -> None:
            body = json.dumps(document).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path.rstrip("/") in ("", "/healthz"):
                self._send(200, {"status": "ok", "recordings": len(agent.recordings)})
                return
            persona = persona_from_path(self.path)
            known = sorted({c for (p, _, c) in agent.recordings if p == persona})
            self._send(
                200, {"persona": persona, "recorded_cases": known, "protocol": "POST a protocol request here"}
            )

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                self._send(413, {"error": "request body too large"})
                return
            body = self.rfile.read(length)
            if not agent.signature_ok(body, self.headers.get("X-AgentClash-Signature")):
                self._send(401, {"error": "bad or missing X-AgentClash-Signature"})
                return
            if agent.should_fail():
                self._send(503, {"error": "simulated outage (--fail-rate)"}, {"Retry-After": "1"})
                return
            try:
                request = json.loads(body)
            except ValueError:
                self._send(400, {"error": "the request body is not JSON"})
                return
            if not isinstance(request, dict):
                self._send(400, {"error": "the request body is not a JSON object"})
                return
            self._send(200, agent.answer(persona_from_path(self.path), request))

    return Handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Example replay agent for the hosted-agent protocol.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--packs-dir", type=Path, default=ROOT / "examples" / "packs")
    parser.add_argument("--signing-key", default=os.environ.get("AGENTCLASH_SIGNING_KEY") or None)
    parser.add_argument("--fail-rate", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--quiet", action="store_true", help="no per-request log lines")
    args = parser.parse_args(argv)
    if not 0.0 <= args.fail_rate <= 1.0:
        parser.error("--fail-rate must be between 0 and 1")
    recordings = load_recordings(args.packs_dir)
    agent = Agent(recordings, signing_key=args.signing_key, fail_rate=args.fail_rate, seed=args.seed)
    server = ThreadingHTTPServer((args.host, args.port), make_handler(agent, quiet=args.quiet))
    personas = sorted({p for (p, _, _) in recordings}) or ["(none recorded)"]
    print(
        f"example agent (replays recordings, not a model) listening on http://{args.host}:{server.server_port}/agents/<persona>; "
        f"{len(recordings)} recordings, personas: {', '.join(personas)}",
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
