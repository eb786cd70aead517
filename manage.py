#!/usr/bin/env python
"""Django's command-line utility."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentclash_site.settings")
    try:
        from agentclash_site.lib.env import ConfigError
    except ImportError:  # pragma: no cover
        ConfigError = Exception  # type: ignore[misc,assignment]
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
    except ConfigError as exc:
        sys.stderr.write(f"configuration error: {exc}\n")
        sys.exit(2)


if __name__ == "__main__":
    main()
