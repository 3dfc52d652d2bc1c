"""Live processes by command line, for tests that check a command left
nothing running."""

from __future__ import annotations

import time
from pathlib import Path


def processes_running(command_line: str) -> list[int]:
    """Live (not zombie) processes whose command line is exactly ``command_line``, after a moment to die."""
    found: list[int] = []
    for _ in range(100):
        found = []
        for entry in Path("/proc").iterdir():
            try:
                if not entry.name.isdigit() or (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
                if (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip() == command_line:
                    found.append(int(entry.name))
            except (OSError, IndexError):
                continue
        if not found:
            return []
        time.sleep(0.02)
    return found
