"""The bench's CPU readings (bench/cpu.py) count what a worker spends in its
prefork children: the rows that say where a fan-out's time goes would
otherwise show the worker's main process alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from bench import cpu

# A process that only waits for its child, which spends `seconds` of CPU,
# says so and stays alive (a living process's time is its own, not yet its
# parent's).
PARENT = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]])
print(child.pid, flush=True)
child.wait()
"""
BURN = """
import sys, time
while time.process_time() < float(sys.argv[1]):
    pass
print("burnt", flush=True)
time.sleep(60)
"""

pytestmark = pytest.mark.skipif(not cpu.PROC.is_dir(), reason="needs Linux's /proc")


def test_a_process_trees_cpu_counts_its_childrens_time():
    parent = subprocess.Popen([sys.executable, "-c", PARENT, BURN, "0.3"], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    try:
        before = cpu.tree_seconds([parent.pid])
        assert parent.stdout.readline().strip() == "burnt"
        after = cpu.tree_seconds([parent.pid])
        assert 0.15 <= after - before < 1.0  # the child's 0.3 s, less what it had spent by the first reading
        assert cpu.seconds_of([parent.pid]) < 0.15  # the parent itself only waited
        assert cpu.seconds_of([child]) >= 0.25  # /proc counts in clock ticks (10 ms)
    finally:
        os.kill(child, signal.SIGKILL)
        parent.wait()


def test_a_process_that_has_exited_counts_nothing():
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert cpu.seconds_of([gone.pid]) == 0
    assert cpu.tree_seconds([gone.pid]) == 0
