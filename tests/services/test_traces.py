"""OpenTelemetry traces across processes: a command posted to a real daphne
starts a run that a real `celery worker` process takes, both exporting over
OTLP/HTTP (the standard OTEL_* variables, nothing zenweb's own) to a receiver
in this test. The run is one trace, with the GenAI conventions' spans, its
token counts as stored, and no secret in anything exported."""

from __future__ import annotations

import importlib.util
import json
import urllib.request
from collections import Counter

import pytest
from django.db import connection

from runs.actions import do_register_workflow
from runs.api.auth import create_token
from runs.models import Run
from tests.conftest import _approver, wait_for, wait_for_run
from tests.otlp_receiver import OTLPReceiver
from tests.services import conftest as services

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

# Django's instrumentation traces requests under daphne (ASGI) only with
# opentelemetry-instrumentation-asgi installed.
ASGI_TRACED = importlib.util.find_spec("opentelemetry.instrumentation.asgi") is not None
SECRET = "sk-obs-never-exported-7f3a9c"

TRACED_RELAY = """\
name: traced_relay
description: first tells second about the subject through the coordinator.
triggers: [relay]
inputs:
  subject:
    type: string
    required: true
agents:
  sender:
    description: sender agent
    script:
      - calls: [{tool: send_message, args: {text: "for second: the subject is $subject"}}]
      - say: "first done"
  receiver:
    description: receiver agent
    script:
      - say: "second done"
steps:
  - id: first
    agent: sender
    instructions: Tell second about $subject.
  - id: second
    agent: receiver
    instructions: Answer what first told you.
    dependsOn: [first]
"""


def _otel_env(receiver: OTLPReceiver, service: str) -> dict[str, str]:
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_SERVICE_NAME": service,
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true",
        # A secret the processes know: the redaction keeps it out of every span.
        "OPENAI_API_KEY": SECRET,
    }


def _post_command(base: str, key: str, text: str) -> dict:
    request = urllib.request.Request(
        f"{base}/api/commands",
        json.dumps({"command": text}).encode(),
        {"Authorization": f"Token {key}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def test_a_run_is_one_trace_across_the_api_and_a_worker_process(django_user_model, tmp_path):
    do_register_workflow(TRACED_RELAY, "traced_relay.yaml")
    _, key = create_token(django_user_model.objects.create_user("tracer"))
    db = connection.settings_dict
    database_url = f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    with OTLPReceiver() as receiver:
        worker_env = _otel_env(receiver, "zenweb-worker")
        web_env = {"DATABASE_URL": database_url, **_otel_env(receiver, "zenweb-web")}
        with (
            services.workers(tmp_path, "traced", env=worker_env, concurrency=2),
            services.daphne(tmp_path / "web.log", **web_env) as base,
        ):
            _post_command(base, key, f"relay for {SECRET}")
            run = wait_for_run(Run.objects.latest("pk"), timeout=60)
            assert run.status == Run.Status.COMPLETED
            spans = wait_for(lambda: _when_ended(receiver, run), timeout=20)

    by_id = {span.span_id: span for span in spans}
    (workflow,) = [span for span in spans if span.name == "invoke_workflow traced_relay"]
    assert run.trace_context["trace_id"] == workflow.trace_id
    assert workflow.attributes["gen_ai.operation.name"] == "invoke_workflow"
    assert workflow.attributes["zenweb.run.status"] == "completed"
    in_trace = [span for span in spans if span.trace_id == workflow.trace_id]
    # The API process queued the run's start in its trace; the worker ran it there.
    (queued,) = [span for span in in_trace if span.name == "apply_async/runs.tasks.start_run"]
    (started,) = [span for span in in_trace if span.name == "run/runs.tasks.start_run"]
    assert (queued.service, started.service) == ("zenweb-web", "zenweb-worker")
    assert started.parent_id == queued.span_id and queued.parent_id == workflow.span_id
    if ASGI_TRACED:
        # The run's trace is the request's: invoke_workflow hangs under the command's POST.
        request = by_id[workflow.parent_id]
        # The instrumentation's names: the stable ones with OTEL_SEMCONV_STABILITY_OPT_IN=http, else the older.
        method = request.attributes.get("http.request.method", request.attributes.get("http.method"))
        assert request.service == "zenweb-web" and method == "POST"

    agents = [span for span in in_trace if span.name.startswith("invoke_agent ")]
    assert Counter(span.attributes["zenweb.step.id"] for span in agents)["first"] == 2  # two turns
    assert {span.attributes["gen_ai.agent.name"] for span in agents} >= {"sender", "receiver", "coordinator"}
    assert all(span.parent_id == workflow.span_id and span.service == "zenweb-worker" for span in agents)

    chats = [span for span in in_trace if span.name.startswith("chat ")]
    for step in run.steps.filter(step_id__in=["first", "second"]):
        mine = [chat for chat in chats if by_id[chat.parent_id].attributes.get("zenweb.step.id") == step.step_id]
        assert sum(chat.attributes["gen_ai.usage.input_tokens"] for chat in mine) == step.prompt_tokens > 0
        assert sum(chat.attributes["gen_ai.usage.output_tokens"] for chat in mine) == step.completion_tokens > 0
        assert all(chat.attributes["gen_ai.operation.name"] == "chat" for chat in mine)
        assert all(chat.attributes["gen_ai.request.model"] == "scripted" for chat in mine)
    first_chats = [chat for chat in chats if by_id[chat.parent_id].attributes.get("zenweb.step.id") == "first"]
    assert [chat.attributes["gen_ai.response.finish_reasons"] for chat in first_chats] == [["tool_calls"], ["stop"]]

    (send,) = [span for span in in_trace if span.name == "execute_tool send_message"]
    assert send.attributes["gen_ai.tool.call.id"] and send.attributes["zenweb.tool.outcome"] == "ok"
    assert by_id[send.parent_id].attributes["zenweb.step.id"] == "first"
    assert "postgresql" in {span.attributes.get("db.system") for span in in_trace if span.service == "zenweb-worker"}

    # Prompts were captured (the setting is on), the secret in them redacted; nowhere else either.
    prompts = [chat.attributes.get("gen_ai.input.messages", "") for chat in first_chats]
    assert all("[redacted]" in prompt for prompt in prompts)
    assert not any(SECRET.encode() in body for body in receiver.bodies)


def _when_ended(receiver: OTLPReceiver, run: Run):
    """Every span, once the run's invoke_workflow span (and the request's, if traced) have come."""
    spans = receiver.received()
    ids = {span.span_id for span in spans}
    workflow = [span for span in spans if span.name.startswith("invoke_workflow")]
    return spans if workflow and (workflow[0].parent_id in ids or not ASGI_TRACED) else None


GATED_RELAY = """\
name: gated_relay
description: first's message waits for a person.
triggers: [gated]
approvals: [send_message]
inputs:
  subject:
    type: string
    required: true
agents:
  sender:
    description: sender agent
    tools: [send_message]
    script:
      - calls: [{tool: send_message, args: {text: "for coordinator: $subject"}}]
      - say: "first done"
steps:
  - id: first
    agent: sender
    instructions: Tell the coordinator about $subject.
"""


def test_an_approval_asked_for_and_decided_shows_in_the_runs_trace(django_user_model, tmp_path):
    do_register_workflow(GATED_RELAY, "gated_relay.yaml")
    _, key = create_token(django_user_model.objects.create_user("asker"))
    _, approver_key = create_token(_approver(django_user_model, "decider"))
    db = connection.settings_dict
    database_url = f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    with OTLPReceiver() as receiver:
        web_env = {"DATABASE_URL": database_url, **_otel_env(receiver, "zenweb-web")}
        with (
            services.workers(tmp_path, "gated", env=_otel_env(receiver, "zenweb-worker"), concurrency=2),
            services.daphne(tmp_path / "web.log", **web_env) as base,
        ):
            _post_command(base, key, "gated for tides")
            run = Run.objects.latest("pk")
            approval = wait_for(lambda: run.approvals.filter(status="pending").first(), timeout=60)
            request = urllib.request.Request(
                f"{base}/api/approvals/{approval.pk}/decide",
                json.dumps({"decision": "approve", "reason": "fine"}).encode(),
                {"Authorization": f"Token {approver_key}", "Content-Type": "application/json"},
            )
            urllib.request.urlopen(request, timeout=30).close()
            run = wait_for_run(run, timeout=60)
            spans = wait_for(lambda: _when_ended(receiver, run), timeout=20)

    in_trace = [span for span in spans if span.trace_id == run.trace_context["trace_id"]]
    asked = [span for span in in_trace if span.name == "execute_tool send_message" and span.service == "zenweb-worker"]
    assert "approval_requested" in asked[0].events
    assert asked[0].attributes["zenweb.tool.outcome"] == "waiting_for_approval"
    (decided,) = [span for span in in_trace if span.name == "zenweb.approval_decided"]
    assert decided.service == "zenweb-web" and decided.events == ["approval_decided"]
    assert decided.attributes["zenweb.approval.decision"] == "approve"
    assert decided.parent_id == run.trace_context["span_id"]
    # The approved call ran in the run's trace too.
    assert [span.attributes["zenweb.tool.outcome"] for span in asked[1:]] == ["ok"]
