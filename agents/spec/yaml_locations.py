"""Parse YAML and remember which line each value came from.

``yaml.safe_load`` throws the marks away, and a validation error without a line
number sends people hunting. ``parse_with_locations`` composes the node tree once,
builds the data from it and records where every mapping key and list item sits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

Location = tuple[str | int, ...]

# Aliases let a few lines expand into billions of values ("billion laughs"); the
# data, the location walk and pydantic would all pay for the expanded size.
MAX_EXPANDED_VALUES = 100_000

_MERGE_TAG = "tag:yaml.org,2002:merge"


def parse_with_locations(text: str) -> tuple[Any, dict[Location, int]]:
    """Parse one YAML document with the safe loader.

    Returns the data and a mapping from locations such as
    ``("steps", 2, "dependsOn", 0)`` to 1-based line numbers: a mapping key maps to
    the line of the key, a list item to the line where the item starts, and the
    root ``()`` to the first line of the document. An empty document gives
    ``(None, {})``.

    Raises ``yaml.YAMLError`` for malformed YAML, for a key repeated within one
    mapping (PyYAML would silently keep the last) and for aliases that expand to
    more than ``MAX_EXPANDED_VALUES`` values or refer to themselves.
    """
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, {}
        _check_size(node, {}, set())
        _check_duplicate_keys(node, set())
        data = loader.construct_document(node)
        lines: dict[Location, int] = {(): node.start_mark.line + 1}
        _record(loader, node, (), lines, set())
        return data, lines
    finally:
        loader.dispose()


def line_for(lines: Mapping[Location, int], loc: Sequence[str | int]) -> int | None:
    """The line of ``loc``, or of its nearest parent that has one.

    A missing field has no line of its own, so it is reported where its parent
    mapping or list item starts.
    """
    path = tuple(loc)
    while path and path not in lines:
        path = path[:-1]
    return lines.get(path)


def _check_size(node: Node, sizes: dict[int, int], active: set[int]) -> int:
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in active:
        raise ConstructorError(None, None, "an alias refers to itself", node.start_mark)
    active.add(key)
    size = 1
    if isinstance(node, SequenceNode):
        size += sum(_check_size(item, sizes, active) for item in node.value)
    elif isinstance(node, MappingNode):
        for key_node, value_node in node.value:
            size += _check_size(key_node, sizes, active)
            size += _check_size(value_node, sizes, active)
    active.discard(key)
    if size > MAX_EXPANDED_VALUES:
        raise ConstructorError(
            None,
            None,
            f"the document expands to more than {MAX_EXPANDED_VALUES} values",
            node.start_mark,
        )
    sizes[key] = size
    return size


def _check_duplicate_keys(node: Node, seen: set[int]) -> None:
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, SequenceNode):
        for item in node.value:
            _check_duplicate_keys(item, seen)
    elif isinstance(node, MappingNode):
        keys: set[tuple[str, str]] = set()
        for key_node, value_node in node.value:
            # Keys brought in by a merge (<<) may be overridden on purpose.
            if isinstance(key_node, ScalarNode) and key_node.tag != _MERGE_TAG:
                if (key_node.tag, key_node.value) in keys:
                    raise ConstructorError(
                        "while constructing a mapping",
                        node.start_mark,
                        f"found duplicate key {key_node.value!r}",
                        key_node.start_mark,
                    )
                keys.add((key_node.tag, key_node.value))
            _check_duplicate_keys(value_node, seen)


def _record(
    loader: yaml.SafeLoader,
    node: Node,
    loc: Location,
    lines: dict[Location, int],
    seen: set[int],
) -> None:
    # An aliased node is walked once: later uses fall back to the line of the alias.
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, SequenceNode):
        for index, item in enumerate(node.value):
            lines[(*loc, index)] = item.start_mark.line + 1
            _record(loader, item, (*loc, index), lines, seen)
    elif isinstance(node, MappingNode):
        # construct_document has already flattened merges into node.value, with the
        # mapping's own keys last, so they win here as they do in the data.
        for key_node, value_node in node.value:
            if not isinstance(key_node, ScalarNode):
                continue
            key = loader.construct_object(key_node)
            if not isinstance(key, str | int):
                key = str(key)
            lines[(*loc, key)] = key_node.start_mark.line + 1
            _record(loader, value_node, (*loc, key), lines, seen)
