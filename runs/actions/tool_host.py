"""What a turn's tools get to work with: the environment (workspace,
sandbox, injected values, the destructive-work approval) and the run store
behind them (claims, approvals, questions, spawn_worker, child runs:
agent-as-tool). The registry of a run's tools: runs/actions/tooling.py."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from agents.core import machine
from agents.core.decisions import CoordinatorRounds, RefuseCall
from agents.core.happenings import WorkerAsked
from agents.events import Event as RuntimeEvent
from agents.events import EventSink
from agents.events.run_events import WorkerSpawned
from agents.events.tool_events import ChildRunLinked, ClaimRecorded
from agents.handler import ttl_seconds
from agents.llm import Completion
from agents.router import COORDINATOR
from agents.runner import AgentSession, ToolEnv
from agents.sandbox import Limits, Sandbox
from agents.spec import WorkflowSpec
from agents.tools import ToolCallMeta, ToolContext, ToolError, WorkerRequest
from agents.tools.builtin.created import ToolSpec
from agents.tools.builtin.extending import RegisteredWorkflow, example_key
from agents.tools.builtin.shell import CommandRun, destructive_reason
from runs import queue
from runs.actions import extensions
from runs.actions.approval_requests import ApprovalAsked, bound_calls, request_approval, request_workflow_approval
from runs.actions.catalog import InputError, check_inputs, not_run_yet, workflow_spec
from runs.actions.common import router_for
from runs.actions.offers import start_refusal
from runs.actions.questions import request_question
from runs.actions.tooling import tools_for
from runs.models import Approval, Run, Step, ToolCall, Workflow
from runs.store.sql import store
from runs.store.unit_of_work import UnitOfWork, UnitPerEventSink


def workspace_of(run_id: int) -> Path:
    return Path(settings.ZENWEB_WORKSPACES) / f"run-{run_id}"


def tool_env(run: Run, step: Step, uow: UnitOfWork | None = None, wake: CoordinatorRounds | None = None) -> ToolEnv:
    """What the tools of ``step``'s turn get: the run store, the workspace,
    injected values, the destructive-work approval and the call it works for.
    ``uow``: the turn's unit of work, which the run store writes through;
    ``wake``: the coordinator's wake this turn is of (what its spawns are decided on)."""
    parent = step.spawned_by
    if not parent and run.parent_tool_call is not None:
        parent = run.parent_tool_call.tool_call_id
    spec = workflow_spec(run.workflow)
    return ToolEnv(
        host=DjangoToolHost(run.pk, uow, wake),
        workspace=workspace_of(run.pk),
        injected={"user": run.created_by.get_username() if run.created_by else ""},
        destructive_approved=run.destructive_approved,
        parent_tool_call_id=parent,
        gated=frozenset(spec.approvals),
        sandbox=sandbox_for(spec, run.pk),
        bound=_approved_calls(run) if spec.destructive else None,
    )


def sandbox_for(spec: WorkflowSpec, run_id: int) -> Sandbox:
    """The operator's sandbox for run ``run_id`` (as root, its own uid) with
    the workflow's limits, none past the operator's maxima."""
    operator: Sandbox = settings.ZENWEB_SANDBOX
    top, asked = operator.limits, spec.options.sandbox
    limits = Limits(
        processes=asked.processes or top.processes,
        cpu_seconds=asked.cpu_seconds or top.cpu_seconds,
        memory_mb=asked.memory_mb or top.memory_mb,
        file_size_mb=asked.file_size_mb or top.file_size_mb,
        disk_mb=asked.disk_mb or top.disk_mb,
        network=asked.network,
    )
    return operator.for_run(run_id).with_limits(limits.within(top))


def _approved_calls(run: Run) -> frozenset[str]:
    """The calls the approver of this destructive run was shown: only those
    run without asking again (approvals.planned_actions)."""
    approved = Approval.objects.filter(run_id=run.pk, kind=Approval.Kind.WORKFLOW, status=Approval.Status.APPROVED)
    return bound_calls(list(approved.values_list("actions", flat=True)))


def stored_call_context(
    call: ToolCall, run: Run, step: Step, *, uow: UnitOfWork | None, destructive_approved: bool
) -> ToolContext:
    """The context for running a stored call after the turn that asked for
    it: an approved call (``uow``: the open unit of work of the block that
    locked the run; through it the call may message, emit and change the
    run) or a call run as its own task (``uow`` None: none of those, so no
    transaction stays open while the tool runs)."""
    env = tool_env(run, step, uow)
    in_run = uow is not None
    return ToolContext(
        meta=ToolCallMeta(str(run.pk), call.session_id, call.turn_id, call.tool_call_id, call.parent_tool_call_id),
        step_id=step.step_id,
        role="step",
        router=router_for(run, uow=uow) if in_run else None,  # type: ignore[arg-type]
        sink=uow.sink if uow is not None else None,  # type: ignore[arg-type]
        host=env.host if in_run else None,
        workspace=env.workspace,
        injected={**env.injected, "run_id": str(run.pk), "workspace": str(env.workspace)},
        destructive_approved=destructive_approved,
        sandbox=env.sandbox,
    )


# A claim's source fields, each "" when the claim leaves it out.
CLAIM_SOURCE = ("source_name", "source_domain", "url", "title", "source_type", "source_ref")


class DjangoToolHost:
    """The run store for tools that change a run's shape. Called inside the
    transaction that records the turn, with the run row locked."""

    def __init__(self, run_id: int, uow: UnitOfWork | None = None, wake: CoordinatorRounds | None = None) -> None:
        self.run_id = run_id
        self.uow = uow
        self.wake = wake
        # create_tool's examples tried before the round is recorded (try_examples).
        self.trials: dict[str, CommandRun | ToolError] = {}

    @property
    def sink(self) -> EventSink:
        """The turn's unit of work's sink while it records the turn; else
        (a side effect run before that) one that writes each event at once."""
        if self.uow is not None and self.uow.is_open:
            return self.uow.sink
        return UnitPerEventSink(self.run_id)

    def isolated(self, *, held: bool = False):
        # A savepoint: a tool that raises leaves no half-written rows (or
        # held events and messages) behind and the turn's transaction goes
        # on. A held tool's savepoint waits until it reaches the database.
        if self.uow is None:
            return transaction.atomic()
        return self.uow.undoable() if held and self.uow.is_open else self.uow.savepoint()

    def record_claim(self, ctx: ToolContext, claim: dict[str, Any]) -> str:
        ttl = claim.get("ttl") or ""
        source = {name: claim.get(name) or "" for name in CLAIM_SOURCE}
        row = store().add_claim(
            {
                "run_id": self.run_id,
                "step_id": ctx.step_id,
                "claim": claim["claim"],
                "confidence": claim["confidence"],
                **source,
                "ttl": ttl,
                "expires_at": timezone.now() + ttl_delta(ttl) if ttl else None,
            }
        )
        recorded = ClaimRecorded(claim_id=row.pk, claim=row.claim[:500], confidence=row.confidence, url=row.url[:500])
        self.sink.emit(RuntimeEvent.of(recorded, ctx.step_id))
        return str(row.pk)

    def request_approval(self, ctx: ToolContext, tool: str, arguments: dict[str, Any]) -> str:
        run = Run.objects.select_related("workflow", "created_by").get(pk=self.run_id)
        if tool in workflow_spec(run.workflow).approvals:
            why = f"{tool} is on the approval list of {run.workflow.name}"
        else:
            why = f"{run.workflow.name} is destructive and this {tool} call was not shown when the run was approved"
        # The pattern is a hint for the person deciding, not a check: the
        # sandbox, not a regex, is what limits a command.
        looks_like = destructive_reason(arguments.get("command", "")) if tool == "run_shell" else None
        if looks_like:
            why += f"; it looks like {looks_like}"
        asked = ApprovalAsked(
            kind=Approval.Kind.TOOL,
            what=f"{tool} in step {ctx.step_id}",
            why=why,
            subject={"tool": tool, "arguments": arguments},
            arguments=arguments,
            step_id=ctx.step_id,
        )
        approval = request_approval(run, asked, self.sink)
        return str(approval.pk)

    def ask_person(self, ctx: ToolContext, question: str, options: list[str]) -> str:
        run = Run.objects.select_related("created_by").get(pk=self.run_id)
        return str(request_question(run, ctx.step_id, ctx.meta.tool_call_id, question, options, self.sink).pk)

    def create_workflow(self, ctx: ToolContext, yaml_text: str) -> RegisteredWorkflow:
        run = Run.objects.select_related("created_by").get(pk=self.run_id)
        return extensions.create_workflow(run, ctx, yaml_text, self.sink)

    def check_new_tool(self, ctx: ToolContext, spec: ToolSpec) -> None:
        extensions.check_new_tool(Run.objects.get(pk=self.run_id), spec)

    def tried_example(self, spec: ToolSpec) -> CommandRun | ToolError | None:
        return self.trials.get(example_key(spec))

    def propose_tool(self, ctx: ToolContext, spec: ToolSpec, example_exit_code: int, example_output: str) -> int:
        run = Run.objects.select_related("workflow", "created_by").get(pk=self.run_id)
        return extensions.propose_tool(run, ctx, spec, (example_exit_code, example_output), self.sink)

    def spawn_worker(self, ctx: ToolContext, request: WorkerRequest) -> str:
        run = Run.objects.select_related("workflow").get(pk=self.run_id)
        spec = workflow_spec(run.workflow)
        steps = {s.step_id: s for s in run.steps.exclude(kind=Step.Kind.COORDINATOR)}
        workers = [s for s in steps.values() if s.spawned_by]
        if len(workers) >= spec.options.max_workers:
            raise ToolError(
                f"this run already has {len(workers)} workers; the cap is {spec.options.max_workers} (maxWorkers)",
                action="finish",
            )
        agent = _worker_agent(spec, request)
        _refuse_ungranted_tools(spec, request)
        _refuse_unknown_steps(steps, request)
        self._refuse_what_cannot_run(run, steps, request)
        _refuse_write_conflicts(workers, steps, request)
        step_id = f"worker-{len(workers) + 1}"
        position = (run.steps.aggregate(last=Max("position"))["last"] or 0) + 1
        worker = {
            "step_id": step_id,
            "agent": agent,
            "position": position,
            "depends_on": list(request.depends_on),
            "instructions": request.task,
            "spawned_by": ctx.meta.tool_call_id,
            "tools": list(request.tools),
            "writes": list(request.writes),
        }
        store().add_worker_step(run, worker)
        spawned = WorkerSpawned(
            agent=agent,
            task=request.task[:2000],
            tools=request.tools,
            depends_on=request.depends_on,
            writes=request.writes,
            tool_call_id=ctx.meta.tool_call_id,
        )
        self.sink.emit(RuntimeEvent.of(spawned, step_id))
        return step_id

    def _refuse_what_cannot_run(self, run: Run, steps: dict[str, Step], request: WorkerRequest) -> None:
        """Raise the state machine's refusal of a worker that could not run,
        or whose result no wake is left to read (machine.WorkerAsked)."""
        wake = self.wake or CoordinatorRounds("plan", 0, 0)
        state = machine.RunState(run.status, tuple(machine.StepState(s.step_id, s.status) for s in steps.values()))
        asked = WorkerAsked(tuple(request.depends_on), wake.reason, wake.cycle, wake.max_cycles)
        for decision in machine.decide(state, asked):
            if isinstance(decision, RefuseCall):
                raise ToolError(decision.reason)

    def start_child_run(self, ctx: ToolContext, workflow: str, inputs: dict[str, Any]) -> str:
        parent = Run.objects.select_related("created_by").get(pk=self.run_id)
        if parent.parent_tool_call_id is not None:
            # One level, as workers get no tool to spawn more: a
            # workflow that calls itself, or two that call each other, would
            # start runs without end.
            raise ToolError(
                f"{workflow} cannot start from run {parent.pk}: a run started by a tool call "
                "starts no runs of its own; do the work with this run's own tools",
                kind="unavailable",
                action="replan",
            )
        version = (
            Workflow.objects.filter(name=workflow).exclude(offer=Workflow.Offer.AD_HOC).order_by("-version").first()
        )
        if version is None:
            raise ToolError(f"Unknown workflow {workflow!r}", kind="unavailable", action="replan")
        refusal = start_refusal(version) or not_run_yet(version)  # retired, or not runnable yet
        if refusal:
            raise ToolError(refusal, kind="unavailable", action="replan")
        try:
            values = check_inputs(workflow_spec(version), inputs)
        except InputError as exc:
            raise ToolError(str(exc), kind="invalid_call", action="correct_call") from None
        spec = workflow_spec(version)
        child = store().create_run(
            {
                "workflow": version,
                "inputs": values,
                "created_by": parent.created_by,
                "command": f"tool call {ctx.meta.tool_call_id} of run {parent.pk} (step {ctx.step_id})",
                # A destructive workflow called as a tool passes the same gate as
                # one a person starts: it waits for its own approval.
                "status": Run.Status.AWAITING_APPROVAL if spec.destructive else Run.Status.PENDING,
            }
        )
        # The ToolCall row is written with the turn, after this; save_turn links it.
        linked = ChildRunLinked(
            run_id=child.pk, agent_id=workflow, parent_run_id=parent.pk, parent_tool_call_id=ctx.meta.tool_call_id
        )
        self.sink.emit(RuntimeEvent.of(linked, ctx.step_id))
        if spec.destructive:
            request_workflow_approval(child)
        else:
            queue.send_after_commit(queue.START_RUN, child.pk)
        return str(child.pk)


def _worker_agent(spec: WorkflowSpec, request: WorkerRequest) -> str:
    """The agent a spawned worker runs as: the one asked for, else the
    workflow's worker agent; never the coordinator."""
    agent = request.agent or spec.options.worker_agent
    if agent not in spec.agents or agent == COORDINATOR:
        agents = ", ".join(sorted(a for a in spec.agents if a != COORDINATOR))
        raise ToolError(
            f"no agent {agent!r} to run the worker; agents: {agents}", kind="invalid_call", fields=["agent"]
        )
    return agent


def _refuse_ungranted_tools(spec: WorkflowSpec, request: WorkerRequest) -> None:
    """A worker gets only tools a step may have."""
    _, granted = tools_for(spec, "step", request.tools)
    refused = [name for name in request.tools if name not in {t.name for t in granted}]
    if refused:
        raise ToolError(
            f"workers cannot use {', '.join(refused)}: not a worker tool",
            kind="invalid_call",
            action="correct_call",
            fields=["tools"],
        )


def _refuse_unknown_steps(steps: dict[str, Step], request: WorkerRequest) -> None:
    """A worker depends only on steps of its run."""
    unknown = [dep for dep in request.depends_on if dep not in steps]
    if unknown:
        raise ToolError(
            f"depends_on names unknown steps {unknown}; steps: {sorted(steps)}",
            kind="invalid_call",
            action="correct_call",
            fields=["depends_on"],
        )


def _refuse_write_conflicts(workers: list[Step], steps: dict[str, Step], request: WorkerRequest) -> None:
    """Two unfinished workers that may run at once never write the same target."""
    before = _upstream(request.depends_on, steps)
    for other in workers:
        clash = sorted(set(request.writes) & set(other.writes))
        if clash and not other.is_terminal and other.step_id not in before:
            raise ToolError(
                f"write conflict: {other.step_id} already writes {', '.join(clash)}; "
                f"make this worker depend on {other.step_id} or choose another target",
                fields=["writes"],
            )


def try_examples(turn: AgentSession, completion: Completion) -> None:
    """Run the examples of the coordinator's create_tool calls in
    ``completion`` now, before its round is recorded under the run's lock
    (runs/actions/extensions.py try_examples); create_tool reads them."""
    env = turn.env
    if env is None or not isinstance(env.host, DjangoToolHost):
        return
    calls = [(call.name, call.arguments) for call in completion.tool_calls]
    env.host.trials.update(extensions.try_examples(env.host.run_id, env, calls))


def _upstream(depends_on: Iterable[str], steps: dict[str, Step]) -> set[str]:
    """``depends_on`` and everything those steps depend on."""
    found: set[str] = set()
    todo = list(depends_on)
    while todo:
        step_id = todo.pop()
        if step_id not in found and step_id in steps:
            found.add(step_id)
            todo.extend(steps[step_id].depends_on)
    return found


def ttl_delta(ttl: str) -> timedelta:
    """``30m``, ``24h``, ``7d`` or plain seconds (as the handler reads a
    claim's ttl); raises ToolError otherwise."""
    try:
        return timedelta(seconds=ttl_seconds(ttl))
    except ValueError as exc:
        raise ToolError(str(exc), kind="invalid_call", action="correct_call", fields=["ttl"]) from None
