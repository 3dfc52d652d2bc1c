"""A model call of a run's step: what the model is given (the step's agent,
its AgentTurn with the variables its instructions are filled from and its
tool environment, the outputs of the steps it depends on), its provider, and
what the call reports while it runs: its answer so far to the run's pages
(runs/partials.py), and each retry as a ``provider_retry`` event. Shared by
a step's turns (steps.py), its resumes (resume.py), a loop's judge
(step_ends.py) and the coordinator's wakes (coordinator.py)."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from dataclasses import dataclass, replace
from string import Template
from typing import NamedTuple

from django.conf import settings
from django.db import transaction

from agents import expansion, telemetry
from agents.core.attempts import model_call_retries
from agents.events import Event as RuntimeEvent
from agents.events.run_events import ProviderRetry as ProviderRetryEvent
from agents.llm import Completion, CompletionRequest, PartialOutput, Provider, ProviderRetry, build_provider
from agents.metered_provider import MeteredProvider, model_name
from agents.redaction import Redactor
from agents.router import RouterMessage
from agents.runner import AgentTurn, build_request, new_step_transcript, step_prompt
from agents.spec import AgentSpec, WorkflowSpec
from agents.spec.lookup import step_at
from agents.tools import Tool, ToolRegistry
from runs import partials
from runs.actions.tooling import step_tools
from runs.models import Run, Step
from runs.store.unit_of_work import UnitOfWork


def agent_of(spec: WorkflowSpec, step: Step) -> AgentSpec:
    """The agent that takes ``step``'s turns: its workflow's, asking the
    step's own model when the step names one (zenflow's step ``model``)."""
    agent = spec.agents[step.agent]
    return agent.model_copy(update={"model": step.model}) if step.model else agent


def provider_for(agent: AgentSpec) -> Provider:
    """The model provider an agent is configured for (scripted unless told)."""
    provider = traced(build_provider(agent.provider, model=agent.model, script=agent.script))
    return MeteredProvider(provider, model_name(agent), settings.ZENWEB_MODEL_PRICES)


def traced(provider: Provider) -> Provider:
    """``provider``, each of its calls a ``chat`` span where this process
    traces (docs/operations.md), with the known secrets redacted."""
    if not telemetry.tracing():
        return provider
    return telemetry.TracedProvider(provider, _redactor(), telemetry.capture_content())


@functools.cache
def _redactor() -> Redactor:
    return Redactor(settings.ZENWEB_SECRET_VALUES)


def do_record_provider_retry(run_id: int, step_id: str, retry: ProviderRetry) -> None:
    """Store one retry of a model call of ``step_id``: the status (None for
    a timeout or connection error), what the endpoint said (the provider
    redacted its key), which attempt failed and how long until the next."""
    data = ProviderRetryEvent(status=retry.status, message=retry.message[:1000], attempt=retry.attempt, wait=retry.wait)
    with transaction.atomic(), UnitOfWork(run_id) as uow:
        uow.sink.emit(RuntimeEvent.of(data, step_id))


@dataclass
class ModelCall:
    """The callbacks of one model call, passed to ``Provider.complete``."""

    run_id: int
    step_id: str
    streamed: bool = False

    def on_partial(self, partial: PartialOutput) -> None:
        self.streamed = True
        partials.publish(self.run_id, self.step_id, partial)

    def on_retry(self, retry: ProviderRetry) -> None:
        do_record_provider_retry(self.run_id, self.step_id, retry)

    @property
    def hooks(self) -> dict:
        return {"on_partial": self.on_partial, "on_retry": self.on_retry}


@contextlib.contextmanager
def model_call(run_id: int, step_id: str) -> Iterator[dict]:
    """``provider.complete(request, **hooks)`` inside this block reports to the
    run; when it ends, the kept partial goes (the turn stores the answer)."""
    call = ModelCall(run_id, step_id)
    try:
        yield call.hooks
    finally:
        # Only after a streamed answer: a scripted turn costs no cache trip.
        if call.streamed:
            partials.clear(run_id, step_id)


def build_agent_turn(step: Step, agent: AgentSpec, variables: dict[str, str]) -> AgentTurn:
    """The runtime's turn of ``step``'s ``agent``, its instructions filled
    from ``variables``. Its tools' environment (tool_host.tool_env) is the
    caller's to set, where the answer has calls to run."""
    return AgentTurn(
        run_id=str(step.run_id),
        step_id=step.step_id,
        agent_name=step.agent,
        agent=agent,
        role="step",
        transcript=step.transcript,
        variables=variables,
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


class PreparedTurn(NamedTuple):
    """A step's turn ready to ask its model: the runtime's turn, its request,
    and the registry its answer's calls go through with the tools offered."""

    agent_turn: AgentTurn
    request: CompletionRequest
    registry: ToolRegistry
    tools: list[Tool]


def prepare_turn(
    step: Step, spec: WorkflowSpec, inbox: list[RouterMessage], outputs: dict[str, str], deadline: float | None
) -> PreparedTurn:
    """The turn of ``step`` to ask its agent's model, with ``inbox`` shown:
    its variables, its prompt on the step's first turn (``outputs``: the
    known ones of the steps it depends on), its tools, and its request, which
    tells the provider the turn's ``deadline`` (Unix time, or None) and how
    often to try again after a transient error."""
    agent = agent_of(spec, step)
    variables = turn_variables(step.run, step, inbox)
    if not step.transcript:
        instructions = Template(step.instructions).safe_substitute(variables)
        prompt = step_prompt(instructions, dependency_outputs(step, outputs), spec.success_criteria)
        step.transcript = new_step_transcript(step.step_id, agent, prompt)
    agent_turn = build_agent_turn(step, agent, variables)
    agent_turn.empty_answer_retries = spec.options.max_empty_answer_retries
    registry, tools = step_tools(spec, step)
    request = build_request(agent_turn, tools, inbox, deadline=deadline)
    request = replace(request, max_retries=_call_retries(spec, step.step_id))
    return PreparedTurn(agent_turn, request, registry, tools)


def ask(agent: AgentSpec, request: CompletionRequest, run_id: int, step_id: str) -> Completion:
    """``agent``'s model's answer to ``request``, for step ``step_id`` of run
    ``run_id``: reported to the run while it comes (model_call)."""
    with model_call(run_id, step_id) as hooks:
        return provider_for(agent).complete(request, **hooks)


def _call_retries(spec: WorkflowSpec, step_id: str) -> int | None:
    """How often a step's model call is tried again after a transient
    provider error: its own ``maxRetries``, else ``options.maxRetries``."""
    own = step_at(spec, expansion.condition_path(step_id))
    return model_call_retries(own.max_retries if own is not None else None, spec.options.max_retries)
