#!/usr/bin/env python3
"""EXAMPLE HEURISTIC JUDGE - NOT A MODEL.

A stdlib-only HTTP server that speaks the OpenAI-compatible Chat Completions API
(``POST /v1/chat/completions``) well enough to stand in for an LLM judge in the demo and in
local experiments, without an API key. It does not understand language: it scores by
*token overlap* between the agent's answer and a reference, and says so in every answer
(``reasoning`` starts with "example heuristic", the ``model`` field is
``example-heuristic-judge``, and usage is reported as 0 tokens: it costs nothing).

How it reads a judge prompt (the format of ``grading/judges/protocol.py``): the mode from
"You are an evaluation judge (mode: X)", the evidence blocks from
``<<<EVIDENCE id="...">>> ... <<<END EVIDENCE id="...">>>``, the score scale from
"on the scale MIN (worst) to MAX (best)".

- rubric / reference: the answer is the first block; the reference is the block named in
  "reference answer in the evidence block '<id>'" (reference mode), else every other block.
  Score = F1 of the two token sets, mapped onto the scale.
- assertion: pass when at least half of the assertion's content words occur in the answer.
- n_wise: ranks the labels by the F1 of each answer with the task text.
- claims: no claims; critique: no suggestions.
Every verdict cites the evidence ids it used (strict JSON answer, as the judge protocol
requires).

Run:  python examples/judges/heuristic_judge.py --port 8765
Then: manage.py grade PACK --results R --judge-provider openai --judge-base-url http://127.0.0.1:8765/v1
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL_NAME = "example-heuristic-judge"
LABEL = "example heuristic (token overlap, not a model)"
MAX_BODY = 8 * 1024 * 1024

_MODE = re.compile(r"You are an evaluation judge \(mode: (\w+)\)")
_BLOCK = re.compile(r'<<<EVIDENCE id="([^"]+)">>>\n(.*?)\n<<<END EVIDENCE id="\1">>>', re.S)
_SCALE = re.compile(r"on the scale (-?[\d.]+) \(worst\) to (-?[\d.]+) \(best\)")
_REFERENCE = re.compile(r"reference answer in the evidence block '([^']+)'")
_TASK = re.compile(r"TASK:\n(.*?)\n\nEVIDENCE", re.S)
_TOKEN = re.compile(r"[a-z0-9]+(?:[.,][0-9]+)*")
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "has",
        "have",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "was",
        "were",
        "with",
        "answer",
        "agent",
        "reply",
        "names",
        "states",
    ]
)


def tokens(text: str) -> set[str]:
    return {t for t in _TOKEN.findall(text.lower()) if t not in STOPWORDS}


def f1(answer: set[str], reference: set[str]) -> float:
    if not answer or not reference:
        return 0.0
    common = len(answer & reference)
    if common == 0:
        return 0.0
    precision, recall = common / len(answer), common / len(reference)
    return 2 * precision * recall / (precision + recall)


def judge(system: str, user: str) -> dict[str, Any]:
    found = _MODE.search(system)
    mode = found.group(1) if found else ""
    blocks = _BLOCK.findall(user)
    task = (_TASK.search(user).group(1) if _TASK.search(user) else "").strip()
    if mode == "claims":
        return {"claims": []}
    if mode == "critique":
        return {"suggestions": [], "overall": f"{LABEL}: no critique"}
    if not blocks:
        return {"unable_to_judge": True, "reason": f"{LABEL}: the prompt has no evidence blocks"}
    if mode == "n_wise":
        by_label: dict[str, str] = {}
        for bid, text in blocks:
            label = bid.split("/", 1)[0]
            by_label[label] = by_label.get(label, "") + "\n" + text
        want = tokens(task)
        scores = {label: f1(tokens(text), want) for label, text in by_label.items()}
        ranking = sorted(scores, key=lambda label: (-scores[label], label))
        return {
            "ranking": ranking,
            "reasoning": f"{LABEL}: F1 with the task text "
            + ", ".join(f"{k}={v:.2f}" for k, v in scores.items()),
            "citations": [{"id": bid} for bid, _ in blocks],
        }
    answer_id, answer = blocks[0]
    if mode == "assertion":
        claim = tokens(task.split("\n", 1)[1] if "\n" in task else task)
        have = tokens(answer)
        share = len(claim & have) / len(claim) if claim else 0.0
        return {
            "pass": share >= 0.5,
            "confidence": round(share, 2),
            "reasoning": f"{LABEL}: {share:.0%} of the assertion's words occur in {answer_id}",
            "citations": [{"id": answer_id}],
        }
    ref = _REFERENCE.search(task)
    ref_ids = [ref.group(1)] if ref else [bid for bid, _ in blocks[1:]]
    reference = "\n".join(text for bid, text in blocks if bid in ref_ids)
    if not ref_ids or not reference.strip():
        ref_ids, reference = [answer_id], task  # nothing to compare with: compare with the task
    scale = _SCALE.search(task)
    low, high = (float(scale.group(1)), float(scale.group(2))) if scale else (1.0, 5.0)
    overlap = f1(tokens(answer), tokens(reference))
    score = round(low + overlap * (high - low), 2)
    return {
        "score": score,
        "confidence": round(overlap, 2),
        "reasoning": f"{LABEL}: token F1 {overlap:.2f} between {answer_id} and {', '.join(ref_ids)}",
        "citations": [{"id": answer_id}] + [{"id": bid} for bid in ref_ids if bid != answer_id],
    }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out without a delayed-ACK stall
    server_version = "ExampleHeuristicJudge/1"

    def log_message(self, fmt: str, *args: Any) -> None:
        if not getattr(self.server, "quiet", False):
            sys.stderr.write("heuristic-judge: " + (fmt % args) + "\n")

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/health", "/v1/models"):
            self._send(
                200,
                {
                    "object": "list",
                    "data": [{"id": MODEL_NAME, "object": "model", "owned_by": "example (not a model)"}],
                },
            )
        else:
            self._send(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._send(404, {"error": {"message": "only /v1/chat/completions is served"}})
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self._send(413, {"error": {"message": "request too large"}})
            return
        try:
            body = json.loads(self.rfile.read(length))
            messages = body["messages"]
            system = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
            user = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "user")
        except (ValueError, KeyError, TypeError, AttributeError):
            self._send(400, {"error": {"message": "expected a chat completions request with messages"}})
            return
        verdict = judge(system, user)
        self._send(
            200,
            {
                "id": "heuristic-1",
                "object": "chat.completion",
                "model": MODEL_NAME,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": json.dumps(verdict)},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
            },
        )


class Server(ThreadingHTTPServer):
    request_queue_size = 128  # socketserver's default of 5 drops concurrent connects
    daemon_threads = True


def make_server(host: str = "127.0.0.1", port: int = 8765, *, quiet: bool = False) -> ThreadingHTTPServer:
    server = Server((host, port), Handler)
    server.daemon_threads = True
    server.quiet = quiet  # type: ignore[attr-defined]
    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Example heuristic judge (token overlap; NOT a model).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    server = make_server(args.host, args.port, quiet=args.quiet)
    print(
        f"example heuristic judge (not a model) on http://{args.host}:{server.server_address[1]}/v1",
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
