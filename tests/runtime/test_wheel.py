"""`pip install .` gives a working zenweb: the wheel, installed into a fresh
virtualenv with only the runtime's packages beside it, runs from outside the
checkout (its templates, static files, catalog and demo are in it), and none
of the test tools comes with it.

The wheel is built as `pip install .` builds it (pip's build isolation, which
fetches the build backend pyproject.toml asks for), from a copy of the
sources in a temporary directory, so the checkout gets no build/. The runtime
packages are those already installed here that the wheel's dependencies
reach (their markers and extras evaluated as pip would), linked file by file
into one directory the fresh virtualenv reads: nothing is downloaded for
them, and that directory holds nothing else."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib.metadata import Distribution, distribution
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
TOOLS = {"pytest", "playwright", "hypothesis", "ruff", "schemathesis", "mypy", "import-linter", "honcho"}
CATALOG = sorted(path.stem for path in (ROOT / "runs" / "catalog").glob("*.yaml"))

# Run by the installed `zenweb shell`: the database made, the catalog loaded,
# the static files collected, pages rendered by its templates, the demo's
# workflow read, and where the code came from.
PROBE = """
import io, json, runs
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from agents.spec import load_workflow
from runs.demo import WORKFLOW_FILE
call_command("migrate", verbosity=0)
loaded = io.StringIO()
call_command("load_catalog", stdout=loaded)
call_command("collectstatic", interactive=False, verbosity=0)
client = Client()
login = client.get("/login/")
client.force_login(User.objects.create_user("probe"))
catalog = client.get("/catalog/")
print(json.dumps({
    "runs": runs.__file__,
    "loaded": loaded.getvalue().splitlines(),
    "login": [login.status_code, "<form" in login.content.decode()],
    "catalog": [catalog.status_code, catalog.content.decode()],
    "demo": load_workflow(WORKFLOW_FILE).name,
}))
"""


def build_wheel(tmp: Path) -> Path:
    """The wheel of a copy of the sources the build reads."""
    source = tmp / "source"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = {name.split(".")[0] for name in project["tool"]["setuptools"]["packages"]["find"]["include"]}
    ignore = shutil.ignore_patterns("__pycache__")
    for name in sorted(packages):
        shutil.copytree(ROOT / name, source / name, ignore=ignore)
    for name in ("pyproject.toml", project["project"]["readme"]):
        shutil.copy(ROOT / name, source / name)
    pip = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(tmp / "dist"), str(source)]
    subprocess.run(pip, check=True, cwd=tmp)
    (wheel,) = (tmp / "dist").glob("zenweb-*.whl")
    return wheel


def runtime_closure(wheel: Path) -> list[Distribution]:
    """The installed distributions the wheel's dependencies reach."""
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = [name for name in archive.namelist() if name.endswith(".dist-info/METADATA")]
        requires = [
            line.split(":", 1)[1].strip()
            for line in archive.read(metadata).decode().splitlines()
            if line.startswith("Requires-Dist:")
        ]
    found: dict[str, Distribution] = {}
    seen: set[tuple[str, str]] = set()
    wanted = [(Requirement(text), "") for text in requires]
    while wanted:
        requirement, extra = wanted.pop()
        if requirement.marker and not requirement.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(requirement.name)
        found.setdefault(name, distribution(name))
        for wanted_extra in {"", *requirement.extras} - {done for seen_name, done in seen if seen_name == name}:
            seen.add((name, wanted_extra))
            wanted += [(Requirement(text), wanted_extra) for text in found[name].requires or []]
    return list(found.values())


def link_runtime(dists: list[Distribution], site: Path) -> None:
    """Each distribution's files (its RECORD, scripts aside), compiled ones too, linked into ``site``."""
    for dist in dists:
        assert dist.files is not None, f"{dist.metadata['Name']} has no RECORD"
        for file in dist.files:
            if file.parts[0] == "..":
                continue
            target = site / file
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists():
                target.symlink_to(dist.locate_file(file))


def fresh_venv(tmp: Path, wheel: Path) -> Path:
    """A virtualenv with the wheel and the runtime; this one's pip installs it."""
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    runtime = tmp / "runtime"
    link_runtime(runtime_closure(wheel), runtime)
    (Path(purelib) / "zenweb_runtime.pth").write_text(f"{runtime}\n")
    subprocess.run([*pip(venv), "install", "--quiet", "--no-deps", "--no-index", str(wheel)], check=True)
    return venv


def pip(venv: Path) -> list[str]:
    return [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python")]


def run(home: Path, *args: str) -> str:
    """A command of the installed venv, run from outside the checkout."""
    keep = {"PATH", "LANG", "LC_ALL", "TMPDIR"}
    env = {name: value for name, value in os.environ.items() if name in keep} | {"HOME": str(home)}
    done = subprocess.run(args, cwd=home, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, f"{args}: {done.stderr[-3000:]}"
    return done.stdout


def test_pip_install_gives_a_working_zenweb_without_test_tools(tmp_path):
    venv = fresh_venv(tmp_path, build_wheel(tmp_path))
    assert not (ROOT / "build").exists()
    home = tmp_path / "home"
    home.mkdir()
    zenweb = str(venv / "bin" / "zenweb")

    listed = json.loads(run(home, *pip(venv), "list", "--format=json"))
    names = {canonicalize_name(entry["name"]) for entry in listed}
    assert {"zenweb", "django", "daphne", "celery"} <= names
    assert not names & TOOLS
    assert not {name for name in names if name.startswith("pytest")}

    assert "no issues" in run(home, zenweb, "check")
    probe = json.loads(run(home, zenweb, "shell", "-c", PROBE).strip().splitlines()[-1])
    assert probe["runs"].startswith(str(venv)), probe["runs"]
    assert probe["loaded"] == [f"registered {name} v1" for name in CATALOG]
    assert probe["login"] == [200, True]
    status, page = probe["catalog"]
    assert status == 200 and all(name in page for name in CATALOG)
    assert probe["demo"] == "watch_demo"

    # Installed, the data directory is the user's, not site-packages.
    data = home / ".local" / "share" / "zenweb"
    assert (data / "zenweb.sqlite3").is_file()
    for path in ("js/live.js", "js/graph.js", "css/zenweb.css", "favicon.svg", "vendor/dagre/dagre.min.js"):
        assert (data / "static" / path).is_file(), path
