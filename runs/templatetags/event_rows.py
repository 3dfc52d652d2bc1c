"""The run page's event rows: one line saying who did what (to whom, with
what outcome), the whole text on expand, and what the page filters them by
(type, step, group, severity) as data attributes. Every value is escaped
(``format_html``); a model's text also goes through ``reveal_text``, which
shows hidden characters escaped, and the row is flagged."""

from __future__ import annotations

from django import template
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from agents.events import REGISTRY, EventData, EventDataError
from agents.events.groups import GROUP_OF, severity_of
from agents.hidden_characters import hidden_in
from runs.templatetags.event_summary import read_row, summary_of
from runs.templatetags.reveal import FLAG, reveal_text
from runs.templatetags.zenweb import pretty_json

register = template.Library()

EVENT_ROW = (
    # data-*: the page filters live events by them, and follows the newest (runs/static/js/live.js).
    '<details class="event type-{type} sev-{severity}" id="event-{seq}" data-seq="{seq}" data-type="{type}"'
    ' data-step="{step}" data-group="{group}" data-severity="{severity}">\n'
    '  <summary><span class="seq">{seq}</span><time datetime="{iso}">{clock}</time>'
    '<span class="etype">{type}</span><span class="estep" title="{step}">{step}</span>'
    '<span class="ewhat">{what}</span>{flag}'
    "</summary>\n"
    '  <div class="event-body">{full}<pre class="event-data">{data}</pre></div>\n</details>\n'
)

# The fields whose text the one-line summary cuts short: shown whole on
# expand, in this order, where the event's model has them.
TEXT_FIELDS = (
    "content",
    "text",
    "summary",
    "output",
    "result",
    "reply",
    "answer",
    "error",
    "reason",
    "message",
    "arguments",
    "what",
    "why",
    "task",
)


# Model class -> its fields among TEXT_FIELDS.
FULL_TEXT: dict[type[EventData], tuple[str, ...]] = {
    model: tuple(name for name in TEXT_FIELDS if name in model.model_fields) for model in REGISTRY.values()
}


def _full_text(payload: EventData | EventDataError) -> SafeString:
    if isinstance(payload, EventDataError):
        return mark_safe("")  # noqa: S308 - empty
    texts = [(name, getattr(payload, name)) for name in FULL_TEXT[type(payload)]]
    fields = [(name, reveal_text(text)) for name, text in texts if isinstance(text, str) and text]
    if not fields:
        return mark_safe("")  # noqa: S308 - empty
    return format_html('<dl class="event-full">{}</dl>', format_html_join("", "<dt>{}</dt><dd>{}</dd>", fields))


@register.simple_tag
def event_rows(events) -> SafeString:
    """The event stream's rows. Written out here rather than in a template
    loop: a run page draws 200 of them and every live update some more, and
    this is several times faster."""
    rows = []
    for event in events:
        payload = read_row(event)
        created = timezone.localtime(event.created) if timezone.is_aware(event.created) else event.created
        rows.append(
            format_html(
                EVENT_ROW,
                type=event.type,
                seq=event.seq,
                iso=created.isoformat(),
                clock=created.strftime("%H:%M:%S.%f")[:12],
                step=event.step_id,
                group=GROUP_OF.get(event.type, "lifecycle"),
                severity=severity_of(event.type, event.data),
                what=reveal_text(summary_of(payload)),
                flag=mark_safe(FLAG) if hidden_in(event.data) else "",  # noqa: S308 - constant markup
                full=_full_text(payload),
                data=reveal_text(pretty_json(event.data)),
            )
        )
    return mark_safe("".join(rows))  # noqa: S308 - each row was built by format_html
