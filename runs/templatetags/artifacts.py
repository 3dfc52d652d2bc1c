"""Drawing tool artifacts: a table, a time series as an SVG line chart, a
graph as an edge list, anything else as JSON.

Artifact data comes from tools and models, so it is untrusted: every value
goes through ``format_html``/``escape``, including SVG text and attributes.
Only numbers we computed ourselves are written into coordinates.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from django import template
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

WIDTH, HEIGHT = 560, 220
PAD_LEFT, PAD_RIGHT, PAD_TOP, PAD_BOTTOM = 56, 12, 12, 34
COLOURS = ("#2f5bd3", "#1d7a45", "#b42318", "#9a6700", "#6b3fa0", "#0f7b8a")
MAX_ROWS = 200


@register.simple_tag
def render_artifact(artifact) -> SafeString:
    match artifact.kind:
        case "table":
            return _table(artifact.data)
        case "timeseries":
            return _timeseries(artifact.data, artifact.title)
        case "graph":
            return _graph(artifact.data)
        case _:
            return format_html("<pre class='artifact-json'>{}</pre>", json.dumps(artifact.data, indent=2)[:20_000])


def _table(data: dict) -> SafeString:
    columns = data.get("columns", [])
    rows = data.get("rows", [])
    head = format_html_join("", "<th>{}</th>", ((c,) for c in columns))
    body = format_html_join(
        "",
        "<tr>{}</tr>",
        ((format_html_join("", "<td>{}</td>", ((_cell(v),) for v in row)),) for row in rows[:MAX_ROWS]),
    )
    more = ""
    if len(rows) > MAX_ROWS:
        more = format_html("<p class='muted'>{} more rows not shown</p>", len(rows) - MAX_ROWS)
    return format_html(
        "<table class='artifact-table'><thead><tr>{}</tr></thead><tbody>{}</tbody></table>{}", head, body, more
    )


def _cell(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _x_value(x: float | str) -> float:
    if isinstance(x, int | float):
        return float(x)
    return datetime.fromisoformat(str(x)).timestamp()


INNER_W, INNER_H = WIDTH - PAD_LEFT - PAD_RIGHT, HEIGHT - PAD_TOP - PAD_BOTTOM
# An SVG swatch, not a style attribute: the Content-Security-Policy refuses inline styles.
SWATCH = "<svg class='swatch' viewBox='0 0 10 10' aria-hidden='true'><rect width='10' height='10' fill='{}'/></svg>"
AXES = (
    "<line x1='{l}' y1='{b}' x2='{r}' y2='{b}' class='axis'/>"
    "<line x1='{l}' y1='{t}' x2='{l}' y2='{b}' class='axis'/>"
    "<text x='{l}' y='{lb}' class='tick'>{first}</text>"
    "<text x='{r}' y='{lb}' class='tick' text-anchor='end'>{last}</text>"
    "<text x='{tl}' y='{b}' class='tick' text-anchor='end'>{ymin}</text>"
    "<text x='{tl}' y='{tt}' class='tick' text-anchor='end'>{ymax}</text>"
    "<text x='{mid}' y='{xl}' class='label' text-anchor='middle'>{x_label}</text>"
)

# One series: its name and its points (x as a number, y, x as given: the label).
Series = tuple[str, list[tuple[float, float, object]]]


def _series(data: dict) -> list[Series]:
    """The series with points to draw; one whose points do not read as
    numbers (or ISO times, for x) is left out."""
    series = []
    for entry in data.get("series", []):
        try:
            points = [(_x_value(x), float(y), x) for x, y in entry.get("points", [])]
        except (TypeError, ValueError):
            continue
        if points:
            series.append((str(entry.get("name", "")), points))
    return series


@dataclass(frozen=True)
class _Frame:
    """The chart's ranges: where a point goes in the SVG."""

    x0: float
    x1: float
    y0: float
    y1: float

    @classmethod
    def around(cls, series: list[Series]) -> _Frame:
        xs = [p[0] for _, pts in series for p in pts]
        ys = [p[1] for _, pts in series for p in pts]
        return cls(min(xs), max(xs), min(ys), max(ys))

    def at(self, x: float, y: float) -> str:
        x_span, y_span = (self.x1 - self.x0) or 1.0, (self.y1 - self.y0) or 1.0
        left = PAD_LEFT + (x - self.x0) / x_span * INNER_W
        top = PAD_TOP + (1 - (y - self.y0) / y_span) * INNER_H
        return f"{left:.1f},{top:.1f}"


def _line(frame: _Frame, name: str, points: list[tuple[float, float, object]], colour: str) -> SafeString:
    """One series as a polyline with a dot (and its value as a title) per point."""
    path = " ".join(frame.at(x, y) for x, y, _ in points)
    dots = format_html_join(
        "",
        "<circle cx='{}' cy='{}' r='2.5' fill='{}'><title>{}: {} = {}</title></circle>",
        ((*frame.at(x, y).split(","), colour, name, label, y) for x, y, label in points),
    )
    return format_html("<polyline fill='none' stroke='{}' stroke-width='2' points='{}'/>{}", colour, path, dots)


def _axes(frame: _Frame, first_series: Series, x_label: str) -> SafeString:
    """The axes, labelled with the first series' first and last x and the y range."""
    _, points = first_series
    return format_html(
        AXES,
        l=PAD_LEFT,
        r=WIDTH - PAD_RIGHT,
        t=PAD_TOP,
        b=HEIGHT - PAD_BOTTOM,
        lb=HEIGHT - PAD_BOTTOM + 14,
        tl=PAD_LEFT - 4,
        tt=PAD_TOP + 8,
        mid=PAD_LEFT + INNER_W / 2,
        xl=HEIGHT - 4,
        first=points[0][2],
        last=points[-1][2],
        ymin=_number(frame.y0),
        ymax=_number(frame.y1),
        x_label=x_label,
    )


def _timeseries(data: dict, title: str) -> SafeString:
    """A line per series, axes with min/max labels, and a legend."""
    series = _series(data)
    if not series:
        return format_html("<p class='muted'>{}</p>", "no points to draw")
    frame = _Frame.around(series)
    colours = [COLOURS[n % len(COLOURS)] for n in range(len(series))]
    lines = [_line(frame, name, points, colour) for (name, points), colour in zip(series, colours, strict=True)]
    legend = [
        format_html("<span class='legend'>" + SWATCH + "{}</span>", colour, name)
        for (name, _), colour in zip(series, colours, strict=True)
    ]
    return format_html(
        "<figure class='artifact-chart'><svg viewBox='0 0 {w} {h}' role='img' aria-label='{aria}'>"
        "<title>{aria}</title>{axes}{lines}</svg>"
        "<figcaption>{legend} <span class='muted'>{y_label}</span></figcaption></figure>",
        w=WIDTH,
        h=HEIGHT,
        aria=title or "time series",
        axes=_axes(frame, series[0], data.get("x_label", "")),
        lines=mark_safe("".join(lines)),  # noqa: S308 - each part was built with format_html
        legend=mark_safe(" ".join(legend)),  # noqa: S308 - built with format_html
        y_label=data.get("y_label", ""),
    )


def _number(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.2f}"


def _graph(data: dict) -> SafeString:
    edges = data.get("edges", [])
    nodes = data.get("nodes", [])
    items = format_html_join("", "<li>{} → {}</li>", ((a, b) for a, b in edges[:MAX_ROWS]))
    return format_html(
        "<p class='muted'>{} nodes, {} edges</p><ul class='artifact-graph'>{}</ul>", len(nodes), len(edges), items
    )
