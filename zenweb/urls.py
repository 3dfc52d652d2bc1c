from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from zenweb import health
from zenweb.favicon import favicon
from zenweb.metrics import metrics

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics, name="metrics"),
    path("favicon.ico", favicon, name="favicon"),
    path("admin/", admin.site.urls),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/", include("runs.api.urls")),
    path("", include("runs.urls")),
]

# A busy or lost database: 503 with Retry-After; anything else Django's 500.
handler500 = "zenweb.overload.server_error"
