"""The metrics that are the database's truth, read at each scrape (never
kept in a process's memory): approvals waiting and the oldest one's age,
and the work queued for a worker, by kind, with its oldest item's age."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from django.db.models import Count, Min, QuerySet
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from runs.models import Approval, Run, Step


def _queued() -> dict[str, tuple[QuerySet, str]]:
    """Each kind of queued work: its rows and the field saying since when."""
    return {
        "run_start": (Run.objects.filter(status=Run.Status.PENDING), "created"),
        "coordinator_wake": (Run.objects.filter(wake_queued__isnull=False), "wake_queued"),
        "step_turn": (Step.objects.filter(turn_queued__isnull=False), "turn_queued"),
    }


def _count_and_age(rows: QuerySet, since: str, now: datetime) -> tuple[int, float]:
    found = rows.aggregate(count=Count("pk"), oldest=Min(since))
    oldest = found["oldest"]
    return found["count"], (now - oldest).total_seconds() if oldest else 0.0


class DatabaseCollector(Collector):
    def collect(self) -> Iterator[Metric]:
        now = timezone.now()
        waiting, age = _count_and_age(Approval.objects.filter(status=Approval.Status.PENDING), "created", now)
        yield GaugeMetricFamily("zenweb_approvals_waiting", "Approvals waiting for a decision.", value=waiting)
        yield GaugeMetricFamily(
            "zenweb_approvals_oldest_age_seconds", "How long the oldest waiting approval has waited.", value=age
        )
        depth = GaugeMetricFamily("zenweb_queue_depth", "Work queued for a worker, by kind.", labels=["kind"])
        oldest = GaugeMetricFamily(
            "zenweb_queue_oldest_age_seconds", "How long the oldest queued work has waited, by kind.", labels=["kind"]
        )
        for kind, (rows, since) in _queued().items():
            count, age = _count_and_age(rows, since, now)
            depth.add_metric([kind], count)
            oldest.add_metric([kind], age)
        yield depth
        yield oldest
