"""`zenweb <command>`: Django's management commands with zenweb's settings,
for an install without the checkout's manage.py (pyproject.toml's scripts)."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "zenweb.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
