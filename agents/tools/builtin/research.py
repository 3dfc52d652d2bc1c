"""The research toolset: search a small shipped corpus of consumer-tech
documents (corpus/research.json, fictional sources) and chart price histories.

Findings carry full source metadata so a step can cite them; the table and
time-series artifacts are evidence for the people watching, not for the model.
"""

from __future__ import annotations

import difflib
import json
import re
from datetime import date
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from agents.tools.base import Role, Tool, ToolContext, ToolError
from agents.tools.builtin.result_models import PriceHistory, PriceHistoryResult, PricePoint, SearchResult
from agents.tools.results import MAX_RESULT_CHARS, Artifact, Bounds, ToolAnswer

CORPUS = Path(__file__).parent / "corpus" / "research.json"
SNIPPET_CHARS = 240
# Matching fields weigh differently: a term in the title says more than one in the body.
WEIGHTS = {"title": 3, "tags": 2, "body": 1}
STOPWORDS = frozenset(
    "a an and are about at best by for from how i in is it me of on or show that the to under what which with".split()
)
_PRICE_CAP = re.compile(
    r"\b(?:under|below|less than|cheaper than|at most|up to|max)\s*"
    r"(?:\$\s*(?P<dollars>\d[\d,]*(?:\.\d+)?)\s*(?P<k1>k\b)?|(?P<amount>\d[\d,]*(?:\.\d+)?)\s*(?P<k2>k)?\s*(?:dollars|usd)\b)",
    re.IGNORECASE,
)
READERS: frozenset[Role] = frozenset({"coordinator", "step"})


class Document(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    title: str
    url: str = Field(pattern=r"^https://")
    source_name: str
    source_domain: str
    source_type: Literal["review", "retailer", "news", "spec-sheet"]
    published: date
    body: str
    tags: list[str]
    price_history: list[tuple[date, float]] = Field(default_factory=list)

    @property
    def price(self) -> float | None:
        """The latest tracked price in USD, if the document tracks one."""
        return self.price_history[-1][1] if self.price_history else None


@cache
def corpus() -> dict[str, Document]:
    """The shipped documents by id, loaded once."""
    raw = json.loads(CORPUS.read_text(encoding="utf-8"))
    documents = TypeAdapter(list[Document]).validate_python(raw["documents"])
    return {doc.id: doc for doc in documents}


class SearchArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(
        min_length=1,
        max_length=500,
        description="What to look for, in words, e.g. 'laptops under $1000 battery life'. "
        "'under $N' keeps only priced items at or below N dollars.",
    )
    limit: int = Field(default=5, ge=1, le=20, description="Most findings to return.")
    cursor: str | None = Field(default=None, description="next_cursor from a previous search, for the next page.")


class PriceHistoryArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    document_id: str = Field(min_length=1, description="A source_ref from search results.")


def _stem(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _terms(text: str) -> set[str]:
    return {_stem(word) for word in re.findall(r"[a-z0-9]+", text.lower()) if word not in STOPWORDS}


def _price_cap(query: str) -> tuple[float | None, str]:
    """The 'under $N' cap in ``query`` and the query without it."""
    match = _PRICE_CAP.search(query)
    if not match:
        return None, query
    amount = float((match["dollars"] or match["amount"]).replace(",", ""))
    if match["k1"] or match["k2"]:
        amount *= 1000
    return _whole(amount), query[: match.start()] + " " + query[match.end() :]


def _whole(amount: float) -> float:
    """``amount``, as an int when it has no cents (849, not 849.0, in JSON)."""
    return int(amount) if amount.is_integer() else amount


def _score(doc: Document, terms: set[str]) -> int:
    fields = {"title": _terms(doc.title), "tags": _terms(" ".join(doc.tags)), "body": _terms(doc.body)}
    return sum(WEIGHTS[name] * len(terms & found) for name, found in fields.items())


def _snippet(doc: Document, terms: set[str]) -> str:
    sentences = re.split(r"(?<=[.!?])\s+", doc.body)
    best = max(sentences, key=lambda s: len(terms & _terms(s)))
    return best if len(best) <= SNIPPET_CHARS else best[: SNIPPET_CHARS - 1] + "…"


def _finding(doc: Document, terms: set[str]) -> dict[str, Any]:
    finding: dict[str, Any] = {
        "source_ref": doc.id,
        "title": doc.title,
        "url": doc.url,
        "source_name": doc.source_name,
        "source_domain": doc.source_domain,
        "source_type": doc.source_type,
        "published": doc.published.isoformat(),
        "snippet": _snippet(doc, terms),
    }
    if doc.price is not None:
        finding["price_usd"] = _whole(doc.price)
    return finding


def _money(amount: float) -> str:
    return f"${amount:,.0f}" if amount.is_integer() else f"${amount:,.2f}"


def _search(ctx: ToolContext, args: SearchArgs) -> ToolAnswer:
    max_price, rest = _price_cap(args.query)
    terms = _terms(rest)
    if not terms and max_price is None:
        raise ToolError(
            "the query has no searchable words; name a product, a topic or a price cap",
            kind="invalid_call",
            action="correct_call",
            fields=["query"],
        )
    ranked: list[tuple[int, Document]] = []
    for doc in corpus().values():
        if max_price is not None and (doc.price is None or doc.price > max_price):
            continue
        score = _score(doc, terms) if terms else 1
        if score:
            ranked.append((score, doc))
    # Best match first; then newest; the id keeps the order (and so the cursors) stable.
    ranked.sort(key=lambda pair: (-pair[0], -pair[1].published.toordinal(), pair[1].id))
    total = len(ranked)
    start = 0
    if args.cursor is not None:
        if not args.cursor.isdigit() or int(args.cursor) > total:
            raise ToolError(
                f"cursor {args.cursor!r} is not one this search returned; leave it out to start over",
                kind="invalid_call",
                action="correct_call",
                fields=["cursor"],
            )
        start = int(args.cursor)
    page = [doc for _, doc in ranked[start : start + args.limit]]
    content: dict[str, Any] = {"query": args.query}
    if max_price is not None:
        content["max_price_usd"] = max_price
    content["findings"] = [_finding(doc, terms) for doc in page]
    # Keep the page within the model's result cap rather than have it omitted.
    while len(content["findings"]) > 1 and len(json.dumps(content, ensure_ascii=False)) > MAX_RESULT_CHARS - 1_000:
        content["findings"].pop()
        page.pop()
    end = start + len(page)
    more = end < total
    bounds = Bounds(
        returned=len(page),
        total=total,
        truncated=more,
        next_cursor=str(end) if more else None,
        refinement_hint="pass next_cursor for more, or add words (a brand, a feature, 'under $800')" if more else None,
    )
    artifacts = []
    if page:
        rows = [[d.title, d.source_name, _money(d.price) if d.price is not None else "", d.url] for d in page]
        artifacts.append(
            Artifact(
                "table",
                {"columns": ["title", "source", "price", "url"], "rows": rows},
                title=f"Search: {args.query}",
                audience="evidence",
            )
        )
    return ToolAnswer(content, bounds=bounds, artifacts=artifacts)


def _price_history(ctx: ToolContext, args: PriceHistoryArgs) -> ToolAnswer:
    documents = corpus()
    doc = documents.get(args.document_id)
    if doc is None:
        close = difflib.get_close_matches(args.document_id, list(documents), n=5, cutoff=0.4)
        known = f"close ids: {', '.join(close)}" if close else "use search to find document ids (source_ref)"
        raise ToolError(
            f"unknown document {args.document_id!r}; {known}",
            kind="invalid_call",
            action="correct_call",
            fields=["document_id"],
        )
    if not doc.price_history:
        raise ToolError(f"{doc.id} ({doc.source_type}) tracks no price; try a laptop review or listing")
    points = doc.price_history

    def point(at: tuple[date, float]) -> PricePoint:
        return PricePoint(date=at[0].isoformat(), price_usd=_whole(at[1]))

    summary = PriceHistory(
        document_id=doc.id,
        title=doc.title,
        source_name=doc.source_name,
        url=doc.url,
        tracked=len(points),
        first=point(points[0]),
        latest=point(points[-1]),
        lowest=point(min(points, key=lambda p: p[1])),
        highest=point(max(points, key=lambda p: p[1])),
    )
    series = {"name": doc.title, "points": [[day.isoformat(), _whole(price)] for day, price in points]}
    chart = Artifact(
        "timeseries",
        {"series": [series], "x_label": "date", "y_label": "price (USD)"},
        title=f"Price history: {doc.title}",
        audience="evidence",
    )
    return ToolAnswer(summary.model_dump(), artifacts=[chart])


RESEARCH_TOOLS = (
    Tool(
        "search",
        "Search the research library (reviews, retailer listings, news and spec sheets on laptops and other "
        "consumer tech). Returns findings with full source metadata to cite; 'under $N' in the query filters by "
        "latest price.",
        SearchArgs,
        READERS,
        _search,
        toolset="research",
        tags=("read-only",),
        bounded=True,
        result_model=SearchResult,
        server_data=(("table", "evidence"),),
    ),
    Tool(
        "price_history",
        "Summarize the tracked price history (USD) of one document from search results, by its source_ref.",
        PriceHistoryArgs,
        READERS,
        _price_history,
        toolset="research",
        tags=("read-only",),
        result_model=PriceHistoryResult,
        server_data=(("timeseries", "evidence"),),
    ),
)
