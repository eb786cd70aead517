"""An agent (or a proxy's error page) that echoes the request's headers: what it echoes of
the deployment's credentials is redacted before the attempt is stored and shown to every
member. The secret and signing key were; a key in an extra header (``X-Api-Key``) was not."""

from __future__ import annotations

import json

from runs.deployment_config import DeploymentConfig
from runs.executors.base import AttemptCategory, AttemptOutcome, DeploymentTarget, without_secrets


def _echo(headers: dict[str, str]) -> AttemptOutcome:
    body = json.dumps({"error": "unauthorized", "you_sent": headers})
    return AttemptOutcome(
        AttemptCategory.CONFIG_ERROR,
        status_code=401,
        body_excerpt=body,
        error=f"the agent answered 401: {body}",
        error_code="http_status",
    )


def test_an_echoed_key_of_an_extra_header_named_like_a_credential_is_redacted():
    headers = {"X-Api-Key": "xk-0123456789abcdef", "X-Team": "evaluation-team"}
    target = DeploymentTarget(
        kind="hosted_http",
        url="https://agent.example.com/run",
        secret="s3cret-value-42",
        config=DeploymentConfig(extra_headers=headers),
    )
    outcome = without_secrets(_echo({**headers, "Authorization": "Bearer s3cret-value-42"}), target)
    for text in (outcome.body_excerpt, outcome.error):
        assert "xk-0123456789abcdef" not in text and "s3cret-value-42" not in text
        assert text.count("[redacted]") == 2
        assert "evaluation-team" in text  # not a credential: kept, the echo still reads
