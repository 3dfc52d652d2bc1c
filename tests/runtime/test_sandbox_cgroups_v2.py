"""The cgroup v2 side of agents/sandbox_cgroups.py, on a tree of plain files
laid out as the kernel lays out a cgroup2 mount: what is read and written
where. This machine and CI mount cgroup v1, so no kernel enforces these
limits here (tests/runtime/test_sandbox_whole_call.py does that on v1);
what this checks is that on a v2 host zenweb writes the right files with
the right values, reads the kernel's counters right, and says why when a
group above it holds processes."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from agents import sandbox_cgroups
from agents.sandbox_cgroups import CPU, MEMORY, PROCESSES, CallGroup, detect


@pytest.fixture
def v2_host(tmp_path, monkeypatch) -> dict[str, Path]:
    """A cgroup2 mount with cpu, memory and pids, the server in
    /system.slice/zenweb.service; the probe (a process entering a group)
    needs a kernel and is taken as passing."""
    mount = tmp_path / "cgroup"
    service = mount / "system.slice" / "zenweb.service"
    for group in (mount, mount / "system.slice", service, service / "zenweb"):
        group.mkdir(parents=True, exist_ok=True)
        (group / "cgroup.subtree_control").write_text("")
    (mount / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(
        "22 1 0:21 / / rw,relatime - ext4 /dev/sda1 rw\n"
        f"35 22 0:30 / {mount} rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate\n"
    )
    proc_cgroup = tmp_path / "cgroup-of-self"
    proc_cgroup.write_text("0::/system.slice/zenweb.service\n")
    monkeypatch.setattr(sandbox_cgroups, "_probed", lambda report: report)
    return {"mount": mount, "service": service, "mountinfo": mountinfo, "proc_cgroup": proc_cgroup}


def detect_on(host: dict[str, Path], setting: str = ""):
    return detect(setting, mountinfo=host["mountinfo"], proc_cgroup=host["proc_cgroup"])


def test_a_v2_host_hands_memory_and_pids_down_to_a_zenweb_group_under_the_servers_own(v2_host):
    report = detect_on(v2_host)

    parent = v2_host["service"] / "zenweb"
    assert report.version == 2 and report.complete
    assert report.dirs == {MEMORY: parent, PROCESSES: parent, CPU: parent}
    # Every group from the mount down to zenweb's hands both controllers on.
    for group in (v2_host["mount"], v2_host["mount"] / "system.slice", v2_host["service"], parent):
        assert set((group / "cgroup.subtree_control").read_text().split()) == {"+memory", "+pids"}
    assert report.describe() == (
        f"whole-call limits: cgroup v2: memory (memory.max in {parent}), processes (pids.max in {parent}), "
        f"cpu (cpu.stat in {parent})"
    )


def test_a_v2_group_above_that_holds_processes_is_named_as_the_reason(v2_host, monkeypatch):
    real_enable = sandbox_cgroups._enable

    def busy_below_the_service(group: Path, controllers: list[str]) -> None:
        if group == v2_host["service"]:
            raise OSError(errno.EBUSY, "Device or resource busy")
        real_enable(group, controllers)

    monkeypatch.setattr(sandbox_cgroups, "_enable", busy_below_the_service)

    report = detect_on(v2_host)

    assert report.version == 0 and not report.dirs
    assert "a group above it holds processes (the server's own): give zenweb a delegated one" in report.problem
    assert "set ZENWEB_SANDBOX_CGROUP" in report.problem


def test_a_v2_call_group_writes_its_limits_where_the_kernel_reads_them(v2_host):
    report = detect_on(v2_host)
    path = v2_host["service"] / "zenweb" / "call-1-2-3-4"
    group = CallGroup(report, "call-1-2-3-4", cpu_ns=3 * 10**9)

    group._make(256 * 1024 * 1024, 40)

    # One directory holds every control; memory.swap.max and memory.oom.group,
    # which a kernel makes with the group, are written only where they exist.
    assert sorted(p.name for p in path.iterdir()) == ["memory.max", "pids.max"]
    assert (path / "memory.max").read_text() == str(256 * 1024 * 1024)
    assert (path / "pids.max").read_text() == "40"
    assert group.wrap(["true"])[-2:] == [str(path / "cgroup.procs"), "true"]


def test_a_v2_call_group_reads_the_kernels_cpu_and_oom_counters(v2_host):
    report = detect_on(v2_host)
    path = v2_host["service"] / "zenweb" / "call-1-2-3-4"
    path.mkdir()
    group = CallGroup(report, "call-1-2-3-4", cpu_ns=3 * 10**9)
    (path / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n")
    (path / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 0\noom_group_kill 0\n")

    assert group.cpu_seconds() == 2.5
    assert group.exceeded() == ""

    (path / "cpu.stat").write_text("usage_usec 3000001\nuser_usec 3000001\nsystem_usec 0\n")
    assert group.exceeded() == CPU

    (path / "memory.events").write_text("low 0\nhigh 0\nmax 9\noom 2\noom_kill 1\noom_group_kill 1\n")
    assert group.oom_kills() == 1
    assert group.exceeded() == MEMORY
