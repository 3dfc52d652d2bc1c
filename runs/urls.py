from __future__ import annotations

from django.urls import path

from runs import views

app_name = "runs"
urlpatterns = [
    path("", views.run_list, name="list"),
    path("runs/start/", views.run_start, name="start"),
    path("runs/demo/", views.run_demo, name="demo"),
    path("catalog/", views.catalog, name="catalog"),
    path("runs/<int:run_id>/", views.run_detail, name="detail"),
    path("runs/<int:run_id>/cancel/", views.run_cancel, name="cancel"),
    path("runs/<int:run_id>/resume/", views.run_resume, name="resume"),
    path("runs/<int:run_id>/fork/", views.run_fork, name="fork"),
    path("runs/compare/", views.run_compare, name="compare"),
    path("runs/<int:run_id>/replay/", views.run_replay, name="replay"),
    path("runs/<int:run_id>/graph/", views.run_graph, name="graph"),
    path("runs/<int:run_id>/approvals/", views.run_approvals, name="run-approvals"),
    path("runs/<int:run_id>/approvals/<int:approval_id>/decide/", views.run_approval_decide, name="run-decide"),
    path("runs/<int:run_id>/questions/<int:approval_id>/answer/", views.run_question_answer, name="run-answer"),
    path("runs/<int:run_id>/events/", views.run_events, name="events"),
    path("runs/<int:run_id>/export.json", views.run_export, name="export"),
    path("runs/export/events.schema.json", views.export_events_schema, name="export-events-schema"),
    path("runs/<int:run_id>/steps/<int:step_pk>/transcript/", views.step_transcript, name="transcript"),
    path("commands/", views.command_create, name="command-create"),
    path("commands/<int:command_id>/", views.command_detail, name="command"),
    path("commands/<int:command_id>/live/", views.command_live, name="command-live"),
    path("commands/<int:command_id>/inputs/", views.command_inputs, name="command-inputs"),
    path("catalog/register/", views.workflow_register, name="register"),
    path("approvals/", views.approval_list, name="approvals"),
    path("approvals/<int:approval_id>/decide/", views.approval_decide, name="decide"),
    path("questions/<int:approval_id>/answer/", views.question_answer, name="answer"),
    path("claims/", views.claim_list, name="claims"),
]
