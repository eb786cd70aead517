#!/usr/bin/env python
"""Django's command-line utility."""

import gc
import os
import sys


def _collect_after_setup() -> None:
    """Start-up allocates about 200k objects that live as long as the process (modules,
    classes, the app registry) and almost no garbage; the collector walked them again and
    again while they were made: ~40 ms of a command's ~0.22 s start-up (measured with
    ``eval start``). So collection is off until ``django.setup()`` has run; then what it built
    goes to the permanent generation (``gc.freeze``) and collection is back on."""
    import django

    setup = django.setup

    def setup_then_collect(*args: object, **kwargs: object) -> None:
        try:
            setup(*args, **kwargs)
        finally:
            gc.freeze()
            gc.enable()

    gc.disable()
    django.setup = setup_then_collect  # type: ignore[assignment]


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentclash_site.settings")
    _collect_after_setup()
    try:
        from agentclash_site.lib.env import ConfigError
    except ImportError:  # pragma: no cover
        ConfigError = Exception  # type: ignore[misc,assignment]
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
    except ConfigError as exc:
        sys.stderr.write(f"configuration error: {exc}\n")
        if "--json" in sys.argv[2:]:
            # interfaces.md §2: a --json command prints one JSON document, its errors included
            import json

            error = {"code": "configuration_error", "message": str(exc)}
            sys.stdout.write(json.dumps({"error": error}, ensure_ascii=False) + "\n")
        sys.exit(2)


if __name__ == "__main__":
    main()
