"""Shared REST API plumbing: the error shape of spec/interfaces.md §7.

Errors are ``{"error": {"code", "message", "field"?, "choices"?}}``; validation errors of
packs use the validate body instead and are returned by their views directly.
"""

from __future__ import annotations

import difflib
from typing import Any

from django.conf import settings
from django.core.exceptions import (
    PermissionDenied,
    RequestDataTooBig,
    TooManyFieldsSent,
    TooManyFilesSent,
)
from django.db import DataError
from django.http import Http404, QueryDict
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView
from rest_framework.views import exception_handler as drf_exception_handler

from agentclash_site.lib import broker
from agentclash_site.lib.middleware import field_with_nul


class ApiError(exceptions.APIException):
    """An error with a stable snake_case code, raised by views and services."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        status_code: int = status.HTTP_400_BAD_REQUEST,
        field: str | None = None,
        choices: list[Any] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(detail=message, code=code)
        self.status_code = status_code
        self.error_code = code
        self.message = message
        self.field = field
        self.choices = choices
        self.extra = extra or {}

    def as_body(self) -> dict[str, Any]:
        return error_body(self.error_code, self.message, field=self.field, choices=self.choices, **self.extra)


def nul_query_parameter_error(field: str) -> ApiError:
    return ApiError(
        "invalid_input", f"query parameter {field!r} must not contain NUL characters", field=field
    )


def reject_nul_query_parameters(query_params: QueryDict) -> None:
    """:class:`ApiError` 400 naming the first query parameter whose name or value holds a NUL
    character (the UI's rule, ``RejectNulMiddleware``, and its helper).

    PostgreSQL refuses NUL in text, so such a filter answered 500 there, and on SQLite it
    silently matched nothing: checked before the view runs, the answer is the same on every
    database."""
    field = field_with_nul(query_params)
    if field is not None:
        raise nul_query_parameter_error(field)


class ApiView(APIView):
    """``APIView`` that refuses, once authenticated and before the handler, a query parameter
    holding a NUL character (:func:`reject_nul_query_parameters`)."""

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        reject_nul_query_parameters(request.query_params)

    def perform_content_negotiation(self, request: Request, force: bool = False) -> Any:
        """DRF reads ``?format=`` as the renderer to answer with and answered an unknown one
        404 "Not found." (before authentication, whatever the path), which read as a missing
        workspace or run: it is a 400 naming the parameter and what it takes."""
        try:
            return super().perform_content_negotiation(request, force=force)
        except Http404:
            formats = [renderer.format for renderer in self.get_renderers()]
            raise ApiError(
                "invalid_format",
                f"format must be one of {', '.join(formats)} (the answer's format; leave it out for JSON)",
                field="format",
                choices=formats,
            ) from None


def error_body(
    code: str, message: str, *, field: str | None = None, choices: list[Any] | None = None, **extra: Any
) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if field is not None:
        error["field"] = field
    if choices is not None:
        error["choices"] = choices
    error.update(extra)
    return {"error": error}


_CODES = {
    status.HTTP_401_UNAUTHORIZED: "not_authenticated",
    status.HTTP_403_FORBIDDEN: "permission_denied",
    status.HTTP_404_NOT_FOUND: "not_found",
    status.HTTP_405_METHOD_NOT_ALLOWED: "method_not_allowed",
    status.HTTP_406_NOT_ACCEPTABLE: "not_acceptable",
    status.HTTP_413_REQUEST_ENTITY_TOO_LARGE: "payload_too_large",
    status.HTTP_415_UNSUPPORTED_MEDIA_TYPE: "unsupported_media_type",
    status.HTTP_429_TOO_MANY_REQUESTS: "throttled",
}


def _first_field_error(detail: Any, prefix: str = "") -> tuple[str | None, str]:
    if isinstance(detail, dict):
        for key, value in detail.items():
            name = key if not prefix else f"{prefix}.{key}"
            if key == "non_field_errors":
                name = prefix or None  # type: ignore[assignment]
            return _first_field_error(value, name or "")
    if isinstance(detail, list) and detail:
        return _first_field_error(detail[0], prefix)
    return (prefix or None), str(detail)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, ApiError):
        return Response(exc.as_body(), status=exc.status_code)
    if isinstance(exc, RequestDataTooBig):
        # Django refuses a body over DATA_UPLOAD_MAX_MEMORY_SIZE when DRF reads it; unhandled,
        # that was Django's HTML 400 page.
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        message = f"the request body must be at most {limit} bytes ({limit / 1024 / 1024:g} MiB)"
        return Response(
            error_body("payload_too_large", message), status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
        )
    if isinstance(exc, TooManyFieldsSent | TooManyFilesSent):
        return Response(error_body("invalid_input", str(exc)), status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, broker.BrokerError):
        # A task could not be sent (the write before it is committed): the service is
        # unavailable for now, not broken.
        body = error_body(broker.CODE, broker.broker_message(exc))
        return Response(body, status=status.HTTP_503_SERVICE_UNAVAILABLE, headers={"Retry-After": "30"})
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(str(exc) or "Not found.")
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or "You do not have permission to do this.")
    elif isinstance(exc, DataError) and "NUL" in str(exc):
        # psycopg refuses, before sending, a query parameter or value holding NUL (PostgreSQL
        # text cannot): the request's fault, not a 500. Bodies are refused by the JSON parser.
        # Views built on ApiView refuse such a query parameter up front; this covers the rest.
        params = getattr(context.get("request"), "query_params", None)
        field = field_with_nul(params) if params is not None else None
        if field:
            return Response(nul_query_parameter_error(field).as_body(), status=status.HTTP_400_BAD_REQUEST)
        message = "a value in the request holds a NUL character (0x00); remove it"
        return Response(error_body("invalid_input", message), status=status.HTTP_400_BAD_REQUEST)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        # The first field's first error: the error body is the spec's four keys exactly (DRF's
        # whole detail went out as an extra "fields" key, in no spec or OpenAPI schema).
        field, message = _first_field_error(exc.detail)
        response.data = error_body("invalid", message, field=field)
        return response
    code = (
        "parse_error" if isinstance(exc, exceptions.ParseError) else _CODES.get(response.status_code, "error")
    )
    if isinstance(exc, exceptions.APIException):
        message = str(exc.detail) if not isinstance(exc.detail, (dict, list)) else str(exc.default_detail)
    else:
        message = str(exc)
    response.data = error_body(code, message)
    return response


class ClosedInput(serializers.Serializer):
    """A JSON body whose unknown fields are refused (400 "unknown field", with the nearest
    field's name), never silently dropped: a typo such as ``bundle_text`` for ``bundle``
    would lose what the client sent."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({unknown[0]: [self._unknown(unknown[0])]})
        return super().to_internal_value(data)

    def is_valid(self, *, raise_exception: bool = False) -> bool:
        """As DRF's, and a value a choice field does not take is the error body with the
        field's ``choices`` (DRF's message named neither them nor any other fix)."""
        valid = super().is_valid(raise_exception=False)
        if not valid and raise_exception:
            field, message = _first_field_error(self.errors)
            choice = self.fields.get(field or "")
            errors = self.errors.get(field or "")
            if isinstance(choice, serializers.ChoiceField) and errors and errors[0].code == "invalid_choice":
                raise ApiError("invalid", message, field=field, choices=[str(c) for c in choice.choices])
            raise serializers.ValidationError(self.errors)
        return valid

    def _unknown(self, name: str) -> str:
        close = difflib.get_close_matches(name, list(self.fields), n=1, cutoff=0.6)
        if close:
            return f'unknown field; did you mean "{close[0]}"?'
        return "unknown field; the fields are " + ", ".join(self.fields)
