"""`python -m bench.child <module> <function> '<json kwargs>'`: run one
measurement function in this process, configured by its environment, and
print its JSON result on the last line (bench/common.py reads it)."""

from __future__ import annotations

import importlib
import json
import os
import sys


def main(argv: list[str]) -> None:
    module, function, kwargs = argv
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "zenweb.settings")
    import django

    django.setup()
    from bench.common import emit_json

    emit_json(getattr(importlib.import_module(module), function)(**json.loads(kwargs)))


if __name__ == "__main__":
    main(sys.argv[1:])
