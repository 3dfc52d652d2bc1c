#!/usr/bin/env python
"""Django's command-line utility for zenweb (installed, it is `zenweb`)."""

from zenweb.cli import main

if __name__ == "__main__":
    main()
