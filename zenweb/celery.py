"""The Celery app. Settings come from Django's settings, CELERY_* names."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "zenweb.settings")

app = Celery("zenweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
