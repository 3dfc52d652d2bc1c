from __future__ import annotations

from django.contrib import admin

from runs.models import Event, Message, Run, Step, ToolCall, Workflow


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


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ["id", "workflow", "status", "created_by", "created", "finished"]
    list_filter = ["status", "workflow__name", "created"]
    search_fields = ["command", "error", "result"]
    readonly_fields = [f.name for f in Run._meta.fields]
    inlines = [StepInline, ToolCallInline]


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
