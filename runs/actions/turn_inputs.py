"""What a step's model turn is given: the runtime's AgentTurn for it (its
transcript, variables and tool environment), the variables its
instructions are filled from, and the outputs of the steps it depends on.
Shared by a step's turns (steps.py) and its resumes (resume.py)."""

from __future__ import annotations

from agents.router import RouterMessage
from agents.runner import AgentTurn
from agents.spec import AgentSpec
from runs.actions.tooling import tool_env
from runs.models import Run, Step
from runs.store.unit_of_work import UnitOfWork


def build_agent_turn(
    run: Run, step: Step, agent: AgentSpec, variables: dict[str, str], uow: UnitOfWork | None = None
) -> AgentTurn:
    return AgentTurn(
        run_id=str(run.pk),
        step_id=step.step_id,
        agent_name=step.agent,
        agent=agent,
        role="step",
        transcript=step.transcript,
        variables=variables,
        env=tool_env(run, step, uow),
        attempt=step.attempt,
    )


def turn_variables(run: Run, step: Step, inbox: list[RouterMessage]) -> dict[str, str]:
    variables = {name: str(value) for name, value in run.inputs.items()}
    variables.update(step.variables)
    variables["step"] = step.step_id
    # The attempt, for the model's provider (the scripted one plays a turn
    # in one attempt only); no placeholder or input can be named so.
    variables["step.attempt"] = str(step.attempt + 1)
    variables["inbox"] = inbox[-1].content if inbox else ""
    return variables


def dependency_outputs(step: Step, known: dict[str, str]) -> dict[str, str]:
    """The outputs of the steps ``step`` depends on, ``known`` ones (a
    chain's step started eagerly by the one before) not read again."""
    if all(dep in known for dep in step.depends_on):
        # No query: a fan-out's steps depend on nothing, a chain's on the step before.
        return {dep: known[dep] for dep in step.depends_on}
    outputs = dict(
        Step.objects.filter(run_id=step.run_id, step_id__in=step.depends_on).values_list("step_id", "output")
    )
    return {dep: outputs.get(dep, "") for dep in step.depends_on}
