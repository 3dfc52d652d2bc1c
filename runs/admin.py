from __future__ import annotations

from django.contrib import admin

from runs.models import (
    ApiToken,
    Approval,
    ApprovalDecision,
    Claim,
    Command,
    Event,
    Message,
    Run,
    Step,
    ToolCall,
    Workflow,
)


@admin.register(Workflow)
class WorkflowAdmin(admin.ModelAdmin):
    list_display = ["name", "version", "source", "created"]
    search_fields = ["name", "description"]
    readonly_fields = ["name", "version", "source", "yaml_text", "spec", "created"]


class StepInline(admin.TabularInline):
    model = Step
    fields = ["step_id", "kind", "agent", "status", "turns", "error"]
    readonly_fields = fields
    extra = 0
    can_delete = False


class ToolCallInline(admin.TabularInline):
    model = ToolCall
    fields = ["step", "name", "tool_call_id", "ok", "duration_ms", "result"]
    readonly_fields = fields
    extra = 0
    can_delete = False


class ApprovalInline(admin.TabularInline):
    model = Approval
    fields = ["kind", "what", "status", "requested_by", "created", "decided_at", "reason"]
    readonly_fields = fields
    extra = 0
    can_delete = False


class ClaimInline(admin.TabularInline):
    model = Claim
    fields = ["claim", "confidence", "url", "source_ref", "expires_at"]
    readonly_fields = fields
    extra = 0
    can_delete = False


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ["id", "workflow", "status", "created_by", "created", "finished"]
    list_filter = ["status", "workflow__name", "created"]
    search_fields = ["command", "error", "result"]
    readonly_fields = [f.name for f in Run._meta.fields]
    inlines = [StepInline, ToolCallInline, ApprovalInline, ClaimInline]


@admin.register(Event)
class EventAdmin(admin.ModelAdmin):
    list_display = ["run", "seq", "type", "step_id", "created"]
    list_filter = ["type"]
    search_fields = ["step_id"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = ["run", "message_id", "sender", "recipient", "type", "drained", "drop_reason"]
    list_filter = ["type", "drop_reason"]
    readonly_fields = [f.name for f in Message._meta.fields]


class DecisionInline(admin.TabularInline):
    model = ApprovalDecision
    fields = ["user", "decision", "reason", "arguments_hash", "created"]
    readonly_fields = fields
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


@admin.register(Command)
class CommandAdmin(admin.ModelAdmin):
    list_display = ["id", "text", "mode", "status", "run", "created_by", "created"]
    list_filter = ["status", "mode"]
    search_fields = ["text"]
    readonly_fields = [f.name for f in Command._meta.fields]


@admin.register(Claim)
class ClaimAdmin(admin.ModelAdmin):
    list_display = ["id", "run", "claim", "confidence", "source_domain", "expires_at"]
    search_fields = ["claim", "url", "source_ref"]
    readonly_fields = [f.name for f in Claim._meta.fields]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["prefix", "user", "name", "created", "last_used"]
    readonly_fields = ["prefix", "key_hash", "created", "last_used"]
