from __future__ import annotations

from django.urls import path

from runs import views

app_name = "runs"
urlpatterns = [
    path("", views.run_list, name="list"),
    path("runs/start/", views.run_start, name="start"),
    path("catalog/", views.catalog, name="catalog"),
    path("runs/<int:run_id>/", views.run_detail, name="detail"),
    path("runs/<int:run_id>/cancel/", views.run_cancel, name="cancel"),
    path("api/runs/<int:run_id>/cancel", views.api_run_cancel, name="api-cancel"),
]
