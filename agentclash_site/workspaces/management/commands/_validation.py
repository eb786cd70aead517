"""Model validation errors as the CLI's invalid-input error (spec/interfaces.md §2, exit 2)."""

from __future__ import annotations

from django.core.exceptions import NON_FIELD_ERRORS, ValidationError

from agentclash_site.lib.cli import CliError


def invalid_option(exc: ValidationError, options: dict[str, str]) -> CliError:
    """The first field error of ``exc`` as an ``invalid`` error naming the option that gave
    the value (``field`` is the option's name, as the other errors of the command give it).
    ``options`` maps a model field to its option: ``{"name": "--name"}``."""
    by_field = exc.message_dict if hasattr(exc, "error_dict") else {NON_FIELD_ERRORS: exc.messages}
    name, messages = next(iter(by_field.items()))
    text = " ".join(messages)
    if name == NON_FIELD_ERRORS:
        return CliError("invalid", text)
    option = options.get(name, name)
    return CliError("invalid", f"{option}: {text}", field=option.lstrip("-").replace("-", "_"))
