"""`python -m bench`: run every measurement, print the table, save the JSON.

Options: --only router,dashboard,graph_render,orchestration,chain,tracing,tool_calls,live,streaming,token_budgets
--repeat N (3)   --budget SECONDS (60: a slow measurement repeats only while its timed runs
fit)   --keep (keep the temp dir, with the worker logs)   --out DIR.
"""

from __future__ import annotations

import argparse
import importlib
import json
import shutil
import sys
import tempfile
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path

from bench.common import ROOT, Context, Result, machine, postgres_problem, redis_problem

MEASUREMENTS = (
    "router",
    "dashboard",
    "graph_render",
    "orchestration",
    "chain",
    "tracing",
    "tool_calls",
    "live",
    "streaming",
    "token_budgets",
)
TARGETS = {
    "router": {
        "in memory": ">= 100,000 routed messages/s",
        "postgresql": "reported; no target (read against the calibration rows)",
    },
    "dashboard": {
        "run page, event page (with the graph)": "< 100 ms server time each",
        "runs list": "< 150 ms server time",
    },
    "graph_render": {"a graph of 500 nodes laid out and drawn in chromium": "< 1 s"},
    "orchestration": {"per-step overhead, zenweb / bare Celery": "<= 2x"},
    "chain": {"per-step time in a chain, zenweb / bare Celery": "<= 1.5x"},
    "tracing": {"tracing overhead: chain with tracing on / off": "<= 1.1x"},
    "tool_calls": {"20 calls x 1 s in one turn": "about 20 s / total worker concurrency"},
    "live": {"latency at 500 events/s, 20 clients": "reported (p50, p99); no target"},
    "streaming": {"first streamed token, endpoint to page": "p99 < 150 ms"},
    "token_budgets": {
        "handler prompt, one command, 50 workflows": "<= 2,500 tokens",
        "coordinator share of research_brief's tokens": "<= 15%",
    },
}


def main(argv: list[str] | None = None) -> int:
    args, chosen = _arguments(argv)
    started = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="zenweb-bench-"))
    ctx = Context(
        tmp=tmp,
        repeats=max(1, args.repeat),
        budget=args.budget,
        pg_problem=postgres_problem(),
        redis_problem=redis_problem(),
    )
    info = machine()
    print(f"zenweb bench: {info['cores']} cores, {info['cpu']}, Python {info['python']}, {info['platform']}")
    print(f"PostgreSQL: {ctx.pg_problem or 'yes'}; Redis: {ctx.redis_problem or 'yes'}; temp dir {tmp}")
    results: list[Result] = []
    try:
        for name in chosen:
            results += _measure(name, ctx)
    finally:
        ctx.cleanup()
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    print()
    print(table(results))
    report = {
        "machine": info,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "repeats": ctx.repeats,
        "services": {"postgresql": ctx.pg_problem or "available", "redis": ctx.redis_problem or "available"},
        "duration_s": round(time.monotonic() - started, 1),
        "results": [row.as_data() for row in results],
        "targets": TARGETS,
    }
    path = _write(report, Path(args.out))
    print(
        f"\nwrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path} ({report['duration_s']:.0f} s in all)"
    )
    return 0


def _arguments(argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    """The command line read, and the measurements it chose (in its order)."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(MEASUREMENTS), help="comma-separated: " + ", ".join(MEASUREMENTS))
    parser.add_argument("--repeat", type=int, default=3, help="runs of each measurement (default 3)")
    parser.add_argument(
        "--budget", type=float, default=60.0, help="seconds of timed runs before a slow measurement stops repeating"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (databases, worker logs)")
    parser.add_argument("--out", default=str(ROOT / "bench-results"))
    args = parser.parse_args(argv)
    chosen = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = sorted(set(chosen) - set(MEASUREMENTS))
    if unknown:
        parser.error(f"unknown measurement(s): {', '.join(unknown)}")
    return args, chosen


def _measure(name: str, ctx: Context) -> list[Result]:
    """The rows of measurement ``name``; one that raises gives a row saying
    so (with its traceback printed), and the others still run."""
    print(f"-- {name} ...", flush=True)
    began = time.monotonic()
    module = importlib.import_module(f"bench.{name}")
    try:
        rows: list[Result] = module.measure(ctx)
    except Exception as exc:
        traceback.print_exc()
        lines = str(exc).strip().splitlines() or [""]
        gist = lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1]}"
        rows = [Result(name, name, "-", "", skipped=f"failed: {type(exc).__name__}: {gist}")]
    ctx.settle()
    print(f"   {name} took {time.monotonic() - began:.0f} s", flush=True)
    return rows


def _write(report: dict, out: Path) -> Path:
    """Save ``report`` as bench-<timestamp>.json in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"bench-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    return path


def _figure(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "ms":
        return f"{value:,.1f} ms"
    if unit == "s":
        return f"{value:,.2f} s"
    if unit == "x":
        return f"{value:.2f}x"
    if unit.endswith("/s"):
        return f"{value:,.0f}/s"
    return f"{value:,.2f} {unit}".strip()


def table(results: list[Result]) -> str:
    header = ("measurement", "backend", "median", "best", "runs", "target", "status")
    rows = []
    notes: list[str] = []
    for row in results:
        mark = ""
        text = f"skipped: {row.skipped}" if row.skipped else row.note
        if text:
            if text not in notes:
                notes.append(text)
            mark = f" [{notes.index(text) + 1}]"
        if row.skipped:
            status = "not measured"
        elif row.met is None:
            status = "-"
        else:
            status = "met" if row.met else "MISSED"
        rows.append(
            (
                row.name + mark,
                row.backend,
                _figure(row.median, row.unit),
                _figure(row.best, row.unit),
                str(len(row.values)) if row.values else "-",
                row.target.text if row.target else "-",
                status,
            )
        )
    widths = [max(len(str(line[i])) for line in [header, *rows]) for i in range(len(header))]
    right = {2, 3, 4}

    def fmt(line: tuple[str, ...]) -> str:
        cells = [
            cell.rjust(w) if i in right else cell.ljust(w) for i, (cell, w) in enumerate(zip(line, widths, strict=True))
        ]
        return "  ".join(cells).rstrip()

    lines = [fmt(header), fmt(tuple("-" * w for w in widths)), *(fmt(r) for r in rows)]
    if notes:
        lines.append("")
        lines += [f"[{n}] {text}" for n, text in enumerate(notes, start=1)]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
