#!/usr/bin/env python3
"""Run an eval from CI through AgentClash's REST API, wait for it, and fail the job by its result.

Standard library only (Python 3.9+): copy this file into the repository of the agent under test
and call it from any CI system. The token comes from the environment, never the command line
(command lines end up in logs):

    AGENTCLASH_URL=https://agentclash.example.com AGENTCLASH_TOKEN=... \\
    python agentclash_ci.py --workspace acme --pack invoice-totals --deployment my-agent \\
        --fail-under 0.9 --junit results.xml

It creates the run (POST /api/v1/workspaces/W/runs), polls the run document until the run has
finished, prints one line per deployment on stderr and the run document on stdout, writes the
JUnit export when asked, and exits as ``manage.py eval start --follow`` does (first match wins):

    2  the request was refused (unknown pack, deployment or input set, bad token: the API's
       error is printed with its field), or a usage error
    3  the run failed, or a case ended in infra_error / config_error; also: the server could not
       be reached for --unreachable seconds, the run did not finish within --timeout, or the job
       was interrupted (SIGINT / SIGTERM: the run goes on, its address is printed)
    1  some deployment's pass rate is below --fail-under (default 1.0: any failed case) or none
    0  otherwise
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

FINISHED = ("completed", "failed", "cancelled")
USER_AGENT = "agentclash-ci/1"


class Failure(Exception):
    """Ends the job with ``code`` after printing ``message``."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class Unreachable(Exception):
    """The server did not answer (connection refused, reset, timed out, 502 / 503 / 504)."""


class Api:
    def __init__(self, base_url: str, token: str, *, request_timeout: float = 30.0) -> None:
        self.base = base_url.rstrip("/") + "/api/v1/"
        self.token = token
        self.request_timeout = request_timeout

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("Accept", "application/json")
        request.add_header("User-Agent", USER_AGENT)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self.request_timeout) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            payload = exc.read()
            if exc.code in (502, 503, 504):
                raise Unreachable(f"HTTP {exc.code} from {self.base}") from exc
            return exc.code, payload
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise Unreachable(f"{self.base}: {reason}") from exc

    def json(self, method: str, path: str, body: Any = None) -> Any:
        status, payload = self.call(method, path, body)
        if status >= 400:  # a refusal (2); a server error is the server's, like an infra error (3)
            raise Failure(3 if status >= 500 else 2, _api_error(status, payload))
        try:
            return json.loads(payload)
        except ValueError as exc:
            raise Failure(3, f"{path}: the server answered {status} with something that is not JSON") from exc


def _api_error(status: int, payload: bytes) -> str:
    """The API's error body (``{"error": {"code", "message", "field"?}}``) as one line."""
    try:
        error = json.loads(payload)["error"]
        text = f"{error['code']}: {error['message']}"
        if error.get("field"):
            text += f" (field {error['field']})"
        if error.get("choices"):
            text += f"; choices: {', '.join(map(str, error['choices']))}"
    except (ValueError, KeyError, TypeError):
        text = payload[:500].decode("utf-8", "replace").strip() or "no body"
    hint = {401: " (check AGENTCLASH_TOKEN)", 404: " (or the token cannot see this workspace)"}.get(
        status, ""
    )
    return f"HTTP {status}: {text}{hint}"


def exit_code(document: dict[str, Any], fail_under: float) -> int:
    """3 / 1 / 0 of a finished run's document, as ``eval start --follow`` decides them."""
    if document["run"]["status"] == "failed":
        return 3
    lanes = document.get("lanes") or []
    for lane in lanes:
        counts = lane.get("counts") or {}
        if counts.get("infra_error") or counts.get("config_error"):
            return 3
    for lane in lanes:
        rate = lane.get("pass_rate")
        if rate is None or rate < fail_under:
            return 1
        if fail_under >= 1.0 and (lane.get("counts") or {}).get("FAILED"):
            return 1  # the rate has 4 decimals: one failure in 20,000 cases reads 1.0
    return 0


def lane_line(lane: dict[str, Any]) -> str:
    counts = lane.get("counts") or {}
    rate = lane.get("pass_rate")
    shown = "no graded case" if rate is None else f"pass rate {rate:.1%}"
    interval = lane.get("pass_rate_interval")
    if rate is not None and interval:
        shown += f" (95% CI {interval[0]:.1%}-{interval[1]:.1%})"
    tally = ", ".join(f"{key} {value}" for key, value in counts.items() if value)
    return f"{lane.get('deployment')}: {shown}; {tally or 'no cases'}"


class Interrupted(Exception):
    pass


def _interrupt(signum: int, frame: Any) -> None:
    raise Interrupted(signal.Signals(signum).name)


def follow(
    api: Api, run_path: str, *, timeout: float, unreachable: float, clock: Any = time.monotonic
) -> Any:
    """The run document once the run has finished; polls every 1 s at first, backing off to 10 s."""
    deadline = clock() + timeout
    interval = 1.0
    lost_since: float | None = None
    while True:
        try:
            document = api.json("GET", run_path)
            lost_since = None
        except Unreachable as exc:
            lost_since = clock() if lost_since is None else lost_since
            if clock() - lost_since > unreachable:
                raise Failure(3, f"the server has not answered for {unreachable:.0f} s: {exc}") from exc
            print(f"agentclash: {exc}; trying again", file=sys.stderr)
            document = None
        if document is not None and document["run"]["status"] in FINISHED:
            return document
        if clock() >= deadline:
            raise Failure(3, f"the run did not finish within {timeout:.0f} s; it goes on")
        time.sleep(min(interval, max(0.0, deadline - clock())))
        interval = min(interval * 1.5, 10.0)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Start an AgentClash run through the REST API, wait for it and exit by its result."
    )
    parser.add_argument("--url", default=os.environ.get("AGENTCLASH_URL"), help="default: $AGENTCLASH_URL")
    parser.add_argument("--workspace", required=True)
    parser.add_argument("--pack", required=True, help="the pack's slug")
    parser.add_argument("--pack-version", type=int, help="default: the highest published version")
    parser.add_argument("--input-set", help="default: the pack's default input set")
    parser.add_argument(
        "--deployment", action="append", required=True, help="a deployment name; repeat for several"
    )
    parser.add_argument("--repetitions", type=int, default=1)
    parser.add_argument("--name", default="", help="the run's name (e.g. the commit)")
    parser.add_argument(
        "--fail-under", type=float, default=1.0, help="a fraction; default 1.0: any failed case"
    )
    parser.add_argument("--junit", metavar="PATH", help="write the run's JUnit XML export here")
    parser.add_argument(
        "--timeout", type=float, default=6 * 3600, help="seconds to wait for the run (default 6 h)"
    )
    parser.add_argument(
        "--unreachable",
        type=float,
        default=300,
        help="seconds without an answer before giving up (default 300)",
    )
    args = parser.parse_args(argv)
    if not args.url:
        parser.error("--url or AGENTCLASH_URL is required")
    if not 0.0 <= args.fail_under <= 1.0:
        parser.error("--fail-under is a fraction from 0 to 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    token = os.environ.get("AGENTCLASH_TOKEN", "")
    if not token:
        print("agentclash: set AGENTCLASH_TOKEN to an API token of the workspace", file=sys.stderr)
        return 2
    api = Api(args.url, token)
    workspace = urllib.parse.quote(args.workspace, safe="")
    body: dict[str, Any] = {
        "pack": args.pack,
        "deployments": args.deployment,
        "repetitions": args.repetitions,
        "name": args.name,
    }
    if args.pack_version is not None:
        body["pack_version"] = args.pack_version
    if args.input_set:
        body["input_set"] = args.input_set
    run_url = None
    # SIGTERM is what a CI system sends to a cancelled job (signals only reach the main thread)
    main_thread = threading.current_thread() is threading.main_thread()
    previous = (
        {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
        if main_thread
        else {}
    )
    try:
        created = api.json("POST", f"workspaces/{workspace}/runs", body)
        run = created["run"]
        run_url = run.get("url") or run["id"]
        print(f"agentclash: run {run['id']} started: {run_url}", file=sys.stderr)
        document = follow(
            api,
            f"workspaces/{workspace}/runs/{run['id']}",
            timeout=args.timeout,
            unreachable=args.unreachable,
        )
        for lane in document.get("lanes") or []:
            print(f"agentclash: {lane_line(lane)}", file=sys.stderr)
        if args.junit:
            status, payload = api.call("GET", f"workspaces/{workspace}/runs/{run['id']}/export?format=junit")
            if status >= 400:
                raise Failure(3, f"the JUnit export: {_api_error(status, payload)}")
            with open(args.junit, "wb") as out:
                out.write(payload)
        print(json.dumps(document, indent=2))
        code = exit_code(document, args.fail_under)
        print(f"agentclash: run {document['run']['status']}, exit {code}: {run_url}", file=sys.stderr)
        return code
    except Failure as exc:
        print(f"agentclash: {exc}", file=sys.stderr)
        return exc.code
    except Unreachable as exc:
        print(f"agentclash: {exc}", file=sys.stderr)
        return 3
    except Interrupted as exc:
        where = f": the run goes on at {run_url}" if run_url else " before the run was created"
        print(f"agentclash: interrupted by {exc}{where}", file=sys.stderr)
        return 3
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


if __name__ == "__main__":
    sys.exit(main())
