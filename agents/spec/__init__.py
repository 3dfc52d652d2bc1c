"""The workflow file: its schema, and a loader that says what is wrong and where.

A workflow is a YAML document naming agents and the steps that run them. YAML keys
are camelCase (``dependsOn``), Python attributes snake_case (``depends_on``).
``parse_workflow`` and ``load_workflow`` report every problem they find at once,
each with a line number and the YAML path of the field.

A step is a plain step (an ``agent`` and its ``instructions``) or a container:
a ``loop`` (repeat-until, or forEach over a list input) or an ``include`` of a
sub-workflow file. Inner step ids are local to their container; at run time
they are namespaced (``agents.ids``) and ``agents.expansion`` expands them.

The package, bottom up: ``fields`` (names, limits, the base model),
``yaml_locations`` (YAML with line numbers), ``errors`` (problems with their
place), ``usage`` (checks of tool use and ``$name``), ``inputs``, ``agent``
and ``options`` (the parts of a workflow), ``expressions`` (zenflow's CEL
fields), ``checks`` (references between the parts), ``v1_rules`` (zenflow's
v1 rules, at parse time), ``workflow`` (the workflow and its steps),
``lenient`` (raw data shaped for the checks), ``shorthands`` (zenflow's
shorthands written out), ``not_run`` (what is accepted but not run yet:
warnings, and the refusal of a run) and ``loading`` (parse, load, validate). Import from
``agents.spec``: these are its public names.
"""

from __future__ import annotations

from agents.spec.agent import AgentSpec, ScriptCall, ScriptTurn
from agents.spec.checks import include_path_problem
from agents.spec.errors import SpecProblem, WorkflowValidationError
from agents.spec.fields import (
    DEFAULT_EMPTY_ANSWER_RETRIES,
    DEFAULT_FOR_EACH_CONCURRENCY,
    DEFAULT_TOOL_TIMEOUT,
    INPUT_NAME_PATTERN,
    MAX_DESCRIPTION,
    MAX_FOR_EACH_ITEMS,
    MAX_INCLUDE_DEPTH,
    MAX_ITERATIONS,
    MAX_NESTING,
    MAX_STEPS,
    MAX_TOOL_TIMEOUT,
    STEP_ID_PATTERN,
    InputName,
    Mode,
    Name,
    OnStepFailure,
    Provider,
)
from agents.spec.inputs import InputSpec, InputType
from agents.spec.loading import load_workflow, parse_workflow, validate_workflow
from agents.spec.not_run import not_run_refusal, workflow_warnings
from agents.spec.options import (
    ApprovalPolicy,
    Budget,
    CoordinatorPolicy,
    SandboxOptions,
    ToolExposure,
    WorkflowOptions,
)
from agents.spec.shorthands import DEFAULT_AGENT
from agents.spec.usage import KnownTools
from agents.spec.workflow import LoopSpec, StepSpec, WorkflowSpec

__all__ = [
    "DEFAULT_AGENT",
    "DEFAULT_EMPTY_ANSWER_RETRIES",
    "DEFAULT_FOR_EACH_CONCURRENCY",
    "DEFAULT_TOOL_TIMEOUT",
    "INPUT_NAME_PATTERN",
    "MAX_DESCRIPTION",
    "MAX_INCLUDE_DEPTH",
    "MAX_FOR_EACH_ITEMS",
    "MAX_ITERATIONS",
    "MAX_NESTING",
    "MAX_STEPS",
    "MAX_TOOL_TIMEOUT",
    "STEP_ID_PATTERN",
    "AgentSpec",
    "ApprovalPolicy",
    "Budget",
    "CoordinatorPolicy",
    "InputName",
    "InputSpec",
    "InputType",
    "KnownTools",
    "LoopSpec",
    "Mode",
    "Name",
    "OnStepFailure",
    "Provider",
    "SandboxOptions",
    "ScriptCall",
    "ScriptTurn",
    "SpecProblem",
    "StepSpec",
    "ToolExposure",
    "WorkflowOptions",
    "WorkflowSpec",
    "WorkflowValidationError",
    "include_path_problem",
    "load_workflow",
    "not_run_refusal",
    "parse_workflow",
    "validate_workflow",
    "workflow_warnings",
]
