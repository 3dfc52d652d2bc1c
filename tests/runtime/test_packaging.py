"""pyproject.toml, its locks and the code agree: `pip install .` asks for no
test tool, each lock pins every package it installs with hashes, each
dependency pyproject.toml declares is locked at a version it allows, and
every package the code imports is declared (a dependency added to one and not
the others fails here; DEVELOPERS.md, "Adding a dependency")."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
TOOLS = {"pytest", "playwright", "hypothesis", "schemathesis", "ruff", "import-linter", "honcho"}
# The locks and the extras compiled into each (Makefile, DEVELOPERS.md).
LOCKS = {"runtime.txt": [], "dev.txt": ["test", "lint", "bench", "services"]}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(lock: str) -> dict[str, tuple[str, int]]:
    """Each package the lock installs: its version and how many hashes it has."""
    text = (ROOT / "requirements" / lock).read_text()
    entries = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 1)[1] if text.startswith("#") else text)
    found = {}
    for entry in entries:
        entry = entry.strip()
        if not entry or entry.startswith("#"):
            continue
        match = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", entry)
        assert match, f"requirements/{lock}: not pinned with ==: {entry.splitlines()[0]}"
        found[canonical(match[1])] = (match[2], entry.count("--hash=sha256:"))
    return found


def test_the_runtime_asks_for_no_test_lint_or_bench_tool():
    runtime = {canonical(Requirement(r).name) for r in PROJECT["dependencies"]}
    assert not runtime & TOOLS
    assert not {name for name in runtime if name.startswith("pytest")}
    assert not set(pins("runtime.txt")) & TOOLS


@pytest.mark.parametrize("lock", LOCKS)
def test_every_package_is_pinned_with_hashes(lock):
    locked = pins(lock)
    assert len(locked) > 50
    assert [name for name, (_, hashes) in locked.items() if hashes == 0] == []


@pytest.mark.parametrize("lock", LOCKS)
def test_each_declared_dependency_is_locked_at_a_version_it_allows(lock):
    locked = pins(lock)
    declared = [*PROJECT["dependencies"]]
    for extra in LOCKS[lock]:
        declared += PROJECT["optional-dependencies"][extra]
    for spec in map(Requirement, declared):
        name = canonical(spec.name)
        assert name in locked, f"{spec.name} is declared in pyproject.toml but not locked in requirements/{lock}"
        assert spec.specifier.contains(locked[name][0], prereleases=True), (spec, locked[name][0])


def test_the_dev_lock_installs_the_runtime_at_the_same_versions():
    dev = pins("dev.txt")
    assert {name: version for name, (version, _) in pins("runtime.txt").items()} == {
        name: dev[name][0] for name in pins("runtime.txt")
    }


def imported_packages() -> dict[str, str]:
    """Each top-level package zenweb's code imports that is neither the
    standard library nor its own, and a file that imports it."""
    own = {"agents", "runs", "zenweb"}
    found: dict[str, str] = {}
    for package in own:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.split(".")[0]
                    if top not in own and top not in sys.stdlib_module_names:
                        found.setdefault(top, str(path.relative_to(ROOT)))
    return found


def test_every_package_the_code_imports_is_a_declared_dependency():
    declared = {canonical(Requirement(r).name) for r in PROJECT["dependencies"]}
    providers = packages_distributions()
    undeclared = {
        module: where
        for module, where in imported_packages().items()
        if not {canonical(dist) for dist in providers.get(module, [])} & declared
    }
    assert not undeclared, f"imported but not in pyproject.toml's dependencies: {undeclared}"
