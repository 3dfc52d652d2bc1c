"""The API's routes, under /api/. Every one but the last (a JSON 404) is described in openapi.py."""

from __future__ import annotations

from django.urls import path, re_path

from runs.api import openapi, views

app_name = "api"
urlpatterns = [
    path("openapi.json", openapi.schema_view, name="openapi"),
    path("commands", views.command_create, name="command-create"),
    path("commands/<int:command_id>", views.command_detail, name="command-detail"),
    path("runs", views.run_list, name="run-list"),
    path("runs/<int:run_id>", views.run_detail, name="run-detail"),
    path("runs/<int:run_id>/cancel", views.run_cancel, name="run-cancel"),
    path("approvals", views.approval_list, name="approval-list"),
    path("approvals/<int:approval_id>/decide", views.approval_decide, name="approval-decide"),
    path("workflows", views.workflow_register, name="workflow-register"),
    # Last: every other /api/ URL answers a JSON 404 (not part of the document).
    re_path(r"^(?P<rest>.*)$", views.not_found, name="not-found"),
]
