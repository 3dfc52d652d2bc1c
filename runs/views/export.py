"""A run as a JSON file (runs/export.py builds the document)."""

from __future__ import annotations

import json

from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_safe

from runs.export import event_schema, export_run
from runs.views.access import run_for_user


def json_attachment(document: object, filename: str) -> HttpResponse:
    response = HttpResponse(
        json.dumps(document, cls=DjangoJSONEncoder, ensure_ascii=False, indent=1),
        content_type="application/json; charset=utf-8",
    )
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@require_safe
def run_export(request: HttpRequest, run_id: int) -> HttpResponse:
    """GET /runs/<id>/export.json: the whole run, 404 for a run the user may not see."""
    run = run_for_user(request, run_id)
    return json_attachment(export_run(run), f"run-{run.pk}.json")


@require_safe
def export_events_schema(request: HttpRequest) -> HttpResponse:
    """GET /runs/export/events.schema.json: the JSON Schema of one event of
    an export's ``events``, generated from the event registry."""
    return JsonResponse(event_schema(), json_dumps_params={"indent": 1})
