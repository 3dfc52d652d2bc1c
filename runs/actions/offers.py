"""Which versions of a workflow people may start (issue 45.3).

Every version stays stored (runs keep the version they started with), but
only the latest is offered: an older one may lack the approval gate its
successor added, and starting it by its id would dodge the gate. Staff may
re-enable an older version or retire any (the admin's actions); a retired
version never starts, and retiring the latest offers no other in its place.
"""

from __future__ import annotations

from collections.abc import Iterable

from runs.actions.catalog import InputError
from runs.models import Workflow

Offer = Workflow.Offer


class NotOffered(InputError):
    """The version asked for is not one people may start."""


def _offered(versions: Iterable[Workflow]) -> list[Workflow]:
    """Of one name's versions, newest first: those that may start. An ad-hoc
    version (``run_workflow FILE``) is none of them, nor the latest."""
    offered = []
    for index, version in enumerate(v for v in versions if v.offer != Offer.AD_HOC):
        if version.offer == Offer.ENABLED or (version.offer == Offer.LATEST and index == 0):
            offered.append(version)
    return offered


def offered_workflows() -> dict[str, Workflow]:
    """Each name's current version: the newest that may start (names with
    none are left out)."""
    by_name: dict[str, list[Workflow]] = {}
    for workflow in Workflow.objects.order_by("name", "-version"):
        by_name.setdefault(workflow.name, []).append(workflow)
    current = {}
    for name, versions in by_name.items():
        offered = _offered(versions)
        if offered:
            current[name] = offered[0]
    return current


def start_refusal(workflow: Workflow) -> str | None:
    """Why ``workflow`` may not start, saying which version is current; None
    if it may."""
    if workflow.offer == Offer.AD_HOC:
        return f"{workflow} was stored for one run of its file (run_workflow) and is not offered"
    versions = list(Workflow.objects.filter(name=workflow.name).exclude(offer=Offer.AD_HOC).order_by("-version"))
    offered = _offered(versions)
    if any(version.pk == workflow.pk for version in offered):
        return None
    if offered:
        current = f"the current version is v{offered[0].version} (id {offered[0].pk})"
    else:
        current = "no version of it is offered now"
    why = "is retired" if workflow.offer == Offer.RETIRED else f"is not its latest version (v{versions[0].version})"
    return f"{workflow} {why} and cannot be started: {current}"
