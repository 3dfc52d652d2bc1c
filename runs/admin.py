from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.urls import reverse
from django.utils.html import format_html

from runs.actions import do_cancel_run
from runs.api.auth import hash_key, new_key
from runs.export import export_parts
from runs.models import (
    ApiToken,
    Approval,
    ApprovalDecision,
    Claim,
    Command,
    CreatedTool,
    Event,
    Message,
    Run,
    Step,
    ToolCall,
    Workflow,
)
from runs.views.export import json_attachment


@admin.register(Workflow)
class WorkflowAdmin(admin.ModelAdmin):
    list_display = ["name", "version", "offer", "source", "created"]
    list_filter = ["offer"]
    search_fields = ["name", "description"]
    readonly_fields = ["name", "version", "source", "yaml_text", "spec", "created", "offer"]
    actions = ["retire", "re_enable", "offer_while_latest"]

    # Offers change only through these actions, each logged in the admin's
    # history: which versions may start is what an approval gate relies on.
    def _set_offer(self, request, queryset, offer: str, what: str) -> None:
        for workflow in queryset:
            if workflow.offer != offer:
                Workflow.objects.filter(pk=workflow.pk).update(offer=offer)
                self.log_change(request, workflow, f"{what} (was {workflow.get_offer_display()})")
        self.message_user(request, f"{what}: {', '.join(str(w) for w in queryset)}")

    @admin.action(description="Retire: never start these versions", permissions=["change"])
    def retire(self, request, queryset):
        self._set_offer(request, queryset, Workflow.Offer.RETIRED, "retired")

    @admin.action(description="Re-enable: these versions may start though not the latest", permissions=["change"])
    def re_enable(self, request, queryset):
        self._set_offer(request, queryset, Workflow.Offer.ENABLED, "re-enabled")

    @admin.action(description="Offer only while the latest version (the default)", permissions=["change"])
    def offer_while_latest(self, request, queryset):
        self._set_offer(request, queryset, Workflow.Offer.LATEST, "offered while latest")


class WrittenByZenweb:
    """For rows only zenweb writes (runs, messages, commands, claims): the
    admin reviews them, and an 'add' form of read-only fields could only fail
    on the database's constraints or store a row the pages cannot show."""

    def has_add_permission(self, request, obj=None):
        return False


class ReadOnlyInline(admin.TabularInline):
    """Run parts change only through actions: the admin shows them."""

    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class StepInline(ReadOnlyInline):
    model = Step
    readonly_fields = ("step_id", "kind", "agent", "status", "turns", "error")
    fields = readonly_fields


class ToolCallInline(ReadOnlyInline):
    model = ToolCall
    readonly_fields = ("step", "name", "tool_call_id", "ok", "duration_ms", "result")
    fields = readonly_fields


class ApprovalInline(ReadOnlyInline):
    model = Approval
    readonly_fields = ("kind", "what", "status", "requested_by", "created", "decided_at", "reason")
    fields = readonly_fields


class ClaimInline(ReadOnlyInline):
    model = Claim
    readonly_fields = ("claim", "confidence", "url", "source_ref", "expires_at")
    fields = readonly_fields


class StuckFilter(admin.SimpleListFilter):
    """Runs under way that the sweeper marked stuck (``stuck_reason``)."""

    title = "stuck"
    parameter_name = "stuck"

    def lookups(self, request, model_admin):
        return [("yes", "stuck (under way, no progress)")]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.filter(Run.STUCK)
        return queryset


@admin.register(Run)
class RunAdmin(WrittenByZenweb, admin.ModelAdmin):
    list_display = ["id", "workflow", "status", "stuck_reason", "created_by", "created", "finished", "events_link"]
    list_filter = [
        "status",
        StuckFilter,
        "workflow__name",
        "created",
        ("created_by", admin.RelatedOnlyFieldListFilter),
    ]
    # id__exact compares the id as text, so any search term is safe.
    search_fields = ["id__exact", "command", "error", "result"]
    list_select_related = ["workflow", "created_by"]
    readonly_fields = [f.name for f in Run._meta.fields]
    inlines = [StepInline, ToolCallInline, ApprovalInline, ClaimInline]
    actions = ["cancel_runs", "export_runs"]

    @admin.display(description="events")
    def events_link(self, run: Run) -> str:
        url = reverse("admin:runs_event_changelist")
        return format_html('<a href="{}?run={}">events</a>', url, run.pk)

    @admin.action(description="Cancel selected runs", permissions=["change"])
    def cancel_runs(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        reason = f"cancelled by {request.user.get_username()} (admin)"
        live = queryset.exclude(status__in=Run.TERMINAL).values_list("pk", flat=True)
        # A run may end between the query and its cancel: do_cancel_run says so.
        cancelled = sum(do_cancel_run(pk, reason) for pk in live)
        ended = queryset.count() - cancelled
        self.message_user(
            request,
            f"Cancelled {cancelled} run(s); {ended} had already ended.",
            messages.SUCCESS if cancelled else messages.WARNING,
        )

    @admin.action(description="Export selected runs as JSON", permissions=["view"])
    def export_runs(self, request: HttpRequest, queryset: QuerySet[Run]) -> HttpResponseBase:
        runs = queryset.select_related("workflow", "created_by").order_by("pk")
        # One run's parts read at a time, as the file is written.
        return json_attachment({"runs": (export_parts(run) for run in runs)}, "runs.json")


class EventRunFilter(admin.SimpleListFilter):
    """Events of one run: ``?run=<id>`` (RunAdmin links here). Offers the
    latest runs; a choice of every run would be thousands long."""

    title = "run"
    parameter_name = "run"

    def lookups(self, request, model_admin):
        return [(str(run.pk), str(run)) for run in Run.objects.select_related("workflow").order_by("-pk")[:20]]

    def queryset(self, request, queryset):
        value = self.value()
        return queryset.filter(run_id=int(value)) if value and value.isdigit() else queryset


@admin.register(Event)
class EventAdmin(admin.ModelAdmin):
    list_display = ["run", "seq", "type", "step_id", "created"]
    list_filter = [EventRunFilter, "type"]
    list_select_related = ["run__workflow"]
    search_fields = ["step_id"]
    # Counting every event of every run on each page view is the slow part.
    show_full_result_count = False

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Message)
class MessageAdmin(WrittenByZenweb, admin.ModelAdmin):
    list_display = ["run", "message_id", "sender", "recipient", "type", "drained", "drop_reason"]
    list_filter = ["type", "drop_reason"]
    readonly_fields = [f.name for f in Message._meta.fields]


class DecisionInline(admin.TabularInline):
    model = ApprovalDecision
    readonly_fields = ("user", "decision", "reason", "arguments_hash", "created")
    fields = readonly_fields
    extra = 0
    can_delete = False


@admin.register(Approval)
class ApprovalAdmin(admin.ModelAdmin):
    """Read-only here: decisions go through the approvals queue, which checks
    the permission, the reason and the arguments hash."""

    list_display = ["id", "run", "kind", "what", "status", "requested_by", "created", "decided_at"]
    list_filter = ["status", "kind"]
    search_fields = ["what", "why", "reason"]
    readonly_fields = [f.name for f in Approval._meta.fields]
    inlines = [DecisionInline]

    def has_add_permission(self, request):
        return False


@admin.register(CreatedTool)
class CreatedToolAdmin(admin.ModelAdmin):
    """Read-only: tools are proposed by create_tool and decided in the
    approvals queue. Staff may withdraw an approved one (logged)."""

    list_display = ["id", "name", "status", "run", "created_by", "created", "decided_at"]
    list_filter = ["status"]
    search_fields = ["name"]
    readonly_fields = [f.name for f in CreatedTool._meta.fields]
    actions = ["withdraw"]

    def has_add_permission(self, request):
        return False

    @admin.action(description="Withdraw: no agent gets these tools any more", permissions=["change"])
    def withdraw(self, request, queryset):
        withdrawn = list(queryset.filter(status=CreatedTool.Status.APPROVED))
        for tool in withdrawn:
            CreatedTool.objects.filter(pk=tool.pk).update(status=CreatedTool.Status.WITHDRAWN)
            self.log_change(request, tool, "withdrawn (was approved)")
        self.message_user(request, f"withdrawn: {', '.join(t.name for t in withdrawn) or 'none (only approved tools)'}")


@admin.register(Command)
class CommandAdmin(WrittenByZenweb, admin.ModelAdmin):
    list_display = ["id", "text", "mode", "status", "run", "created_by", "created"]
    list_filter = ["status", "mode"]
    search_fields = ["text"]
    readonly_fields = [f.name for f in Command._meta.fields]


@admin.register(Claim)
class ClaimAdmin(WrittenByZenweb, admin.ModelAdmin):
    list_display = ["id", "run", "claim", "confidence", "source_domain", "expires_at"]
    search_fields = ["claim", "url", "source_ref"]
    readonly_fields = [f.name for f in Claim._meta.fields]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Adding a token makes its key: the form asks only whose it is and what
    for, and the key is shown once, in the message after saving (only its
    hash is stored). Deleting a token revokes it."""

    list_display = ["prefix", "user", "name", "created", "last_used"]
    list_filter = ["user"]
    search_fields = ["prefix", "name", "user__username"]
    fields = ["user", "name", "prefix", "created", "last_used"]

    def get_fields(self, request, obj=None):
        return ["user", "name"] if obj is None else self.fields

    def get_readonly_fields(self, request, obj=None):
        # A token stays its user's: only its name can change.
        return [] if obj is None else ["user", "prefix", "created", "last_used"]

    def save_model(self, request, obj, form, change):
        if change:
            super().save_model(request, obj, form, change)
            return
        key = new_key()
        obj.prefix, obj.key_hash = key[:8], hash_key(key)
        super().save_model(request, obj, form, change)
        messages.warning(
            request,
            f"The key of token {obj.prefix}… for {obj.user}: {key} — copy it now, it is not shown again.",
        )
