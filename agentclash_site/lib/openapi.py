"""OpenAPI post-processing: document the error answers every API operation can give.

Views declare their success bodies (and the special 400/409/413 bodies they return
themselves); the shared error statuses come from authentication, workspace scoping and
input validation, so they are added here once, for every operation that does not already
declare them: 400 (validation), 401 (no or bad credentials), 403 (the role may not write),
404 (an object outside the caller's workspaces), each with the error body of
spec/interfaces.md §7, ``{"error": {"code", "message", "field"?, "choices"?}}``.
"""

from __future__ import annotations

from typing import Any

ERROR_COMPONENT = "ApiError"
ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "error": {
            "type": "object",
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "field": {"type": "string", "nullable": True},
                "choices": {"type": "array", "items": {}},
            },
            "required": ["code", "message"],
        }
    },
    "required": ["error"],
}
SHARED_ERRORS = {
    "400": "Invalid input: the error names the field and the fix",
    "401": "No credentials, or a revoked or unknown token",
    "403": "The caller's role may not do this (e.g. a viewer writing)",
    "404": "Not found, or outside the caller's workspaces",
}
METHODS = ("get", "put", "post", "patch", "delete")


def document_error_responses(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """drf-spectacular POSTPROCESSING_HOOKS entry."""
    components = result.setdefault("components", {}).setdefault("schemas", {})
    components.setdefault(ERROR_COMPONENT, ERROR_SCHEMA)
    ref = {"$ref": f"#/components/schemas/{ERROR_COMPONENT}"}
    for item in (result.get("paths") or {}).values():
        for method in METHODS:
            operation = item.get(method)
            if not isinstance(operation, dict):
                continue
            responses = operation.setdefault("responses", {})
            public_operation = operation.get("security") == [{}] or {} in (operation.get("security") or [])
            for status, description in SHARED_ERRORS.items():
                if status in responses or (public_operation and status in ("401", "403")):
                    continue
                responses[status] = {
                    "description": description,
                    "content": {"application/json": {"schema": ref}},
                }
    return result
