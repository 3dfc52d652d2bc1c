"""The roles each tool may be called by, as the catalog passes them, and a
workflow text's problems by line: for the checks that refuse, at
validation, what could only fail at run time."""

from __future__ import annotations

import textwrap

from agents.spec import validate_workflow

# Tool name -> the roles that may call it, as the catalog passes them.
ROLES = {
    "send_message": {"step"},
    "run_shell": {"step"},
    "read_file": {"coordinator", "step"},
    "search": {"coordinator", "step"},
    "spawn_worker": {"coordinator"},
    "finalize": {"coordinator"},
    "narrate": {"coordinator"},
    "forward_to_agent": {"coordinator"},
    "docs__lookup": {"coordinator", "step"},  # a read-only MCP tool
    "docs__delete": {"step"},  # one that changes things
}


def problems(tmp_path, text, known_tools=None):
    path = tmp_path / "flow.yaml"
    path.write_text(textwrap.dedent(text))
    return [str(problem).removeprefix(f"{path}:") for problem in validate_workflow(path, known_tools)]
