"""A run as a JSON file (runs/export.py builds the document)."""

from __future__ import annotations

from collections.abc import Iterator

from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.http import require_safe

from runs.export import event_schema, export_parts, json_chunks
from runs.views.access import run_for_user

# What the response sends at a time.
SEND_CHARS = 64 * 1024


def json_attachment(document: object, filename: str) -> StreamingHttpResponse:
    """``document`` as a JSON file, streamed as it is written (json_chunks):
    a run of 50,000 events is never one string in memory."""
    response = StreamingHttpResponse(_sent(json_chunks(document)), content_type="application/json; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def _sent(chunks: Iterator[str]) -> Iterator[bytes]:
    pending: list[str] = []
    size = 0
    for chunk in chunks:
        pending.append(chunk)
        size += len(chunk)
        if size >= SEND_CHARS:
            yield "".join(pending).encode()
            pending, size = [], 0
    yield "".join(pending).encode()


@require_safe
def run_export(request: HttpRequest, run_id: int) -> StreamingHttpResponse:
    """GET /runs/<id>/export.json: the whole run, 404 for a run the user may not see."""
    run = run_for_user(request, run_id)
    return json_attachment(export_parts(run), f"run-{run.pk}.json")


@require_safe
def export_events_schema(request: HttpRequest) -> HttpResponse:
    """GET /runs/export/events.schema.json: the JSON Schema of one event of
    an export's ``events``, generated from the event registry."""
    return JsonResponse(event_schema(), json_dumps_params={"indent": 1})
