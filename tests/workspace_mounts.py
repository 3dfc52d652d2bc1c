"""Workspaces that tests gave their own file system (agents/workspace_quota.py),
found and released: every mount under a folder unmounted and every loop
device whose image lies under it detached, whatever the test did."""

from __future__ import annotations

import subprocess
from pathlib import Path


def _unescape(field: str) -> str:
    # /proc/self/mountinfo writes a space, tab, newline and backslash in octal.
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def mounts_under(folder: Path) -> list[Path]:
    """Mount points at or under ``folder``, deepest first."""
    inside = str(folder.resolve())
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = _unescape(line.split()[4])
        if point == inside or point.startswith(inside + "/"):
            found.append(Path(point))
    return sorted(found, key=lambda p: len(p.parts), reverse=True)


def loops_under(folder: Path) -> list[str]:
    """Loop devices whose backing file lies under ``folder``."""
    inside = str(folder.resolve())
    devices = []
    for backing in Path("/sys/block").glob("loop*/loop/backing_file"):
        try:
            name = backing.read_text().strip().removesuffix(" (deleted)")
        except OSError:
            continue
        if name.startswith(inside + "/"):
            devices.append(f"/dev/{backing.parts[3]}")
    return devices


def release_under(folder: Path | str) -> None:
    folder = Path(folder)
    if not folder.exists():
        return
    for point in mounts_under(folder):
        if subprocess.run(["umount", str(point)], capture_output=True, check=False).returncode:
            subprocess.run(["umount", "--lazy", str(point)], capture_output=True, check=False)
    for device in loops_under(folder):
        subprocess.run(["losetup", "-d", device], capture_output=True, check=False)
