"""The scripted provider's workflow handler: a COORDINATOR_SELECTION read from
the command's words, offline, never guessing.

The workflow is the catalog entry whose name and triggers the command
mentions most (a typo of one letter in a word of five or more still counts,
for less); a tie, or no mention, asks which one, the options ranked by how
many of the command's words each one's name, triggers and description
share. A command that names a workflow the catalog lacks ("run the X
workflow") selects it as said, for ``decide`` to answer it is unknown. Its inputs are what the
command says and nothing else:

- ``name=value`` and ``name: value`` (quoted, or up to the next such pair);
- ``name value`` right after the words that name the workflow;
- the rest of the command after those words (and a ``for``, ``about``,
  ``to``...) for the input that takes it: ``query``/``topic``/``subject``,
  else the workflow's only list input, else its only required text input,
  else its only input.

A list input (one a forEach loop iterates) is read as a list: "eu and us",
"eu, us", "EU/US" and ``["eu", "us"]`` are all ``["eu", "us"]``. What cannot
be read with certainty ("eu or us", "all regions", text no input takes, an
input given twice) is answered ``needs_clarification`` naming the input, so
nothing starts; a required input the command does not give is left out, and
``agents.handler.decide`` answers ``needs_more_info`` naming it. An input the
command says nothing about takes the workflow's declared default there.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

MAX_OPTIONS = 5
# The inputs that take a command's free text, by name.
FREE_TEXT_INPUTS = ("query", "topic", "subject")
# Words around a workflow's name that say "run it", not what to run it on.
_FRAME_WORDS = frozenset(
    "please kindly can could would will you i i'd we want need like let's lets go and then now "
    "run start launch execute do use trigger kick off begin the a an my our this that "
    "workflow workflows flow pipeline".split()
)
# Words that end the naming of a workflow and start what it is run on.
_PREPOSITIONS = frozenset("for about on regarding re to with into of in".split())
_ARTICLES = frozenset({"the", "a", "an"})
# Dropped from the end of a value, read from the end without a regular
# expression: the command is a user's, and a backtracking expression takes
# time quadratic in a run of commas.
_POLITE_WORDS = ("please", "thanks", "thank you")
# A list item that stands for items the command does not name.
_QUANTIFIERS = frozenset(
    "all every everywhere everyone each any some other others rest none several few many various both".split()
)
# A word that inside a list item means the item is a phrase, not a value.
_CONNECTORS = frozenset("to for of in on with from except but not without or".split())
_LIST_SPLIT = re.compile(r"\s*(?:,|&|/|\+|;|\band\b)\s*", re.I)
_OR = re.compile(r"\bor\b", re.I)
_DANGLING = re.compile(r"(?:\band|&|\+|/)\s*$", re.I)
_PUNCTUATION = "\"'“”‘’.,!?;:()"
_TYPO_MIN_LENGTH = 5
# "Run the X workflow": a command that names a workflow as one.
_NAMED = re.compile(
    r"\b(?:run|start|launch|execute|use|trigger)\s+(?:the\s+|a\s+|an\s+|my\s+)?([A-Za-z][\w-]{0,63})\s+(?:workflow|pipeline)\b",
    re.I,
)


@dataclass
class Reading:
    """What a command says for one workflow: ``args``, and the inputs it
    leaves unclear (``unclear``, with why in ``message``)."""

    args: dict[str, Any] = field(default_factory=dict)
    unclear: list[str] = field(default_factory=list)
    message: str = ""
    # Inputs the command starts to give and does not ("deploy to").
    missing: list[str] = field(default_factory=list)

    def refuse(self, names: list[str], message: str) -> Reading:
        self.unclear = list(dict.fromkeys([*self.unclear, *names]))
        self.message = self.message or message
        return self


def selection(command: str, catalog: list[dict[str, Any]], mode: str, chosen: str | None = None) -> dict[str, Any]:
    """The COORDINATOR_SELECTION for ``command`` over ``catalog`` (the entries
    as the handler's prompt lists them). ``chosen`` names the workflow the
    person picked (a clarification answered): it is the one, whatever the
    command mentions, and the command is read for its inputs."""
    if chosen is not None:
        winners = [entry for entry in catalog if entry["name"] == chosen]
    else:
        scores = [mention_score(entry, command) for entry in catalog]
        best = max(scores, default=0)
        winners = [entry for entry, score in zip(catalog, scores, strict=True) if best and score == best]
    answer: dict[str, Any] = {
        "_type": "COORDINATOR_SELECTION",
        "command_received": command,
        "workflow_selected": None,
        "workflow_args": {},
    }
    named = named_workflow(command) if not winners else None
    if named is not None:
        # "Run the frobnicate workflow" with no frobnicate in the catalog:
        # selected as said, for decide to answer "Unknown workflow: frobnicate".
        answer |= {"workflow_selected": named, "status": "selected", "selection_reason": f"name given: {named}"}
        return answer
    if len(winners) != 1:
        answer["status"] = "needs_clarification"
        answer["message"] = "Which workflow do you mean?"
        answer["clarification_options"] = [
            {"interpretation": entry.get("description") or entry["name"], "would_select": entry["name"]}
            for entry in ranked(winners or catalog, command)[:MAX_OPTIONS]
        ]
        return answer
    entry = winners[0]
    answer["workflow_selected"] = entry["name"]
    answer["selection_reason"] = _reason(entry, command, chosen)
    if entry.get("mode") == "code" and mode != "code":
        answer["status"] = "blocked"
        answer["error"] = f"{entry['name']} workflow requires code mode - currently in chat mode"
        return answer
    reading = read_args(command, entry)
    answer["workflow_args"] = reading.args
    if reading.unclear:
        answer["status"] = "needs_clarification"
        answer["missing"] = reading.unclear
        answer["message"] = reading.message
        said = f"{entry['name']} with {', '.join(reading.unclear)} named plainly"
        answer["clarification_options"] = [{"interpretation": said, "would_select": entry["name"]}]
    elif reading.missing:
        answer["status"] = "needs_more_info"
        answer["missing"] = reading.missing
        answer["message"] = f"Need {', '.join(reading.missing)} to continue"
    else:
        answer["status"] = "selected"
    return answer


def named_workflow(command: str) -> str | None:
    """The workflow a command names as one ("run the X workflow"), if it does."""
    match = _NAMED.search(command)
    if match is None or match.group(1).lower() in _FRAME_WORDS:
        return None
    return match.group(1)


def ranked(entries: list[dict[str, Any]], command: str) -> list[dict[str, Any]]:
    """``entries``, those whose name, triggers and description share the
    most words with ``command`` first."""
    words = {word for word in _words(command) if word not in _FRAME_WORDS and word not in _PREPOSITIONS}

    def overlap(entry: dict[str, Any]) -> int:
        phrases = [*_name_phrases(entry["name"]), *entry.get("triggers", []), entry.get("description") or ""]
        own = {word for phrase in phrases for word in _words(phrase)}
        return sum(1 for word in words if word in own or any(_typo_of(word, target) for target in own))

    return sorted(entries, key=lambda entry: -overlap(entry))  # stable: ties keep the catalog's order


def _reason(entry: dict[str, Any], command: str, chosen: str | None) -> str:
    """Why ``entry`` was selected: the person chose it, the command names
    it, or its triggers are in the command."""
    if chosen is not None:
        return f"name given: the person chose {chosen}"
    words = _words(command)
    if any(_phrase_score(words, phrase) for phrase in _name_phrases(entry["name"])):
        return f"name given: the command names {entry['name']}"
    matched = [trigger for trigger in entry.get("triggers", []) if _phrase_score(words, trigger)]
    return f"trigger matched: {', '.join(matched)}"


def mention_score(entry: dict[str, Any], command: str) -> int:
    """How strongly ``command`` names ``entry``: its name outweighs any number
    of triggers, and an exact word outweighs one with a typo."""
    words = _words(command)
    name_score = max((_phrase_score(words, phrase) for phrase in _name_phrases(entry["name"])), default=0)
    score = {2: 100, 1: 90}.get(name_score, 0)
    return score + sum(_phrase_score(words, trigger) for trigger in entry.get("triggers", []))


def read_args(command: str, entry: dict[str, Any]) -> Reading:
    """The inputs ``command`` gives ``entry``, exactly as it says them."""
    inputs: dict[str, Any] = entry.get("inputs", {})
    reading = Reading()
    markers = _markers(command, inputs)
    head_end = markers[0][0] if markers else len(command)
    start, after_preposition = _frame_end(command[:head_end], entry)
    head = command[start:head_end]
    given: dict[str, list[str]] = {}
    spaced = None if after_preposition else _spaced_pair(head, inputs)
    if spaced is not None:
        name, value = spaced
        given.setdefault(name, []).append(value)
        head = ""
    for n, (_begin, end, name) in enumerate(markers):
        stop = markers[n + 1][0] if n + 1 < len(markers) else len(command)
        given.setdefault(name, []).append(_value_text(command[end:stop]))
    free = _clean(head)
    slot = free_text_input(inputs)
    if free:
        if slot is None:
            if inputs:
                names = [name for name in inputs if name not in given] or list(inputs)
                return reading.refuse(names, f"Which input is {free!r} for? This workflow takes: {', '.join(inputs)}")
            # A workflow that takes no inputs has nothing to misread the rest into.
        else:
            given.setdefault(slot, []).insert(0, free)
    elif after_preposition and slot is not None and slot not in given:
        reading.missing.append(slot)
    for name, values in given.items():
        _read_value(reading, name, values, inputs[name])
    return reading


def _read_value(reading: Reading, name: str, values: list[str], spec: dict[str, Any]) -> None:
    """Input ``name`` as the command gave it (``values``, each time it was
    named) into ``reading``: refused if given twice differently, a list
    input read as its items."""
    if len(set(values)) > 1:
        reading.refuse([name], f"{name} is given more than once: {', '.join(repr(v) for v in values)}")
        return
    value = values[0]
    if not value:
        return
    if not spec.get("list"):
        reading.args[name] = value
        return
    items, problem = list_items(value, name)
    if problem:
        reading.refuse([name], problem)
    elif items is not None:
        reading.args[name] = items


def free_text_input(inputs: dict[str, Any]) -> str | None:
    """The input that takes what a command says after naming the workflow."""
    texts = [name for name, spec in inputs.items() if spec.get("type", "string") in ("string", "path")]
    named = [name for name in texts if name in FREE_TEXT_INPUTS and not inputs[name].get("list")]
    if named:
        return named[0]
    lists = [name for name in texts if inputs[name].get("list")]
    if len(lists) == 1:
        return lists[0]
    required = [name for name in texts if inputs[name].get("required")]
    if len(required) == 1:
        return required[0]
    return texts[0] if len(inputs) == 1 and texts else None


def list_items(text: str, name: str) -> tuple[Any, str]:
    """``text`` as the items of list input ``name``: ``(items, "")``, or
    ``(None, why)`` when it cannot be read with certainty. A JSON list that
    does not parse is passed on as it is, for the run to refuse it by name."""
    text = text.strip()
    if text.startswith("["):
        return _json_items(text), ""
    if _OR.search(text):
        return None, f"Which {name} do you mean: {text!r} offers a choice"
    if _DANGLING.search(text):
        return None, f"Which {name} do you mean: {text!r} stops mid-list"
    words = text.split()
    # "eu and us regions", "both eu and us": the words around the list.
    if words and words[-1].lower().strip(_PUNCTUATION) in {name, name.rstrip("s")}:
        words = words[:-1]
    while words and words[0].lower() in _ARTICLES | {"both"}:
        words = words[1:]
    items = []
    for part in _LIST_SPLIT.split(" ".join(words)):
        lowered = [w.lower() for w in part.split() if w.lower() not in _ARTICLES]
        if set(lowered) & (_QUANTIFIERS | _CONNECTORS):
            return None, f"Which {name} do you mean: {text!r} does not name them one by one"
        if lowered:
            items.append(" ".join(lowered))
    if not items:
        return None, f"Which {name} do you mean? The command names none"
    return items, ""


def _json_items(text: str) -> Any:
    """A JSON list of plain values as its items (as strings); anything else
    (it does not parse, or holds objects) as the text it was."""
    try:
        items = json.loads(text)
    except ValueError:
        return text
    if isinstance(items, list) and all(isinstance(i, str | int | float) for i in items):
        return [str(i) for i in items]
    return text


def _markers(command: str, inputs: dict[str, Any]) -> list[tuple[int, int, str]]:
    """``name=`` and ``name:`` of declared inputs (with a ``with`` before
    them): (start, end of the marker, input name), in order."""
    found = []
    for name in inputs:
        pattern = rf"(?:(?<=\s)with\s+)?(?<![\w-]){re.escape(name)}\s*[=:]\s*"
        for match in re.finditer(pattern, command, re.I):
            found.append((match.start(), match.end(), name))
    return sorted(found)


def _frame_end(text: str, entry: dict[str, Any]) -> tuple[int, bool]:
    """Where the words naming the workflow end in ``text`` ("Please run the
    research workflow for ..."), past one preposition after them; and
    whether a preposition was passed."""
    own = _own_words(entry)
    tokens = [(m.start(), m.end(), m.group().lower().strip(_PUNCTUATION)) for m in re.finditer(r"\S+", text)]
    last_own = -1
    for i, (_start, _end, word) in enumerate(tokens):
        if _is_own(word, own) or word in {"workflow", "workflows"}:
            last_own = i
        elif word not in _FRAME_WORDS:
            break
    if last_own < 0:
        return 0, False
    i = last_own + 1
    if i < len(tokens) and tokens[i][2] in _PREPOSITIONS:
        return (tokens[i + 1][0] if i + 1 < len(tokens) else len(text)), True
    return (tokens[i][0] if i < len(tokens) else len(text)), False


def _spaced_pair(head: str, inputs: dict[str, Any]) -> tuple[str, str] | None:
    """``topic tides`` at the start of what follows the workflow's name."""
    words = head.split(maxsplit=1)
    if len(words) < 2 or words[0].lower() not in inputs:
        return None
    value = words[1]
    # "regions to eu": the preposition belongs to the sentence, not the value.
    first, _, rest = value.partition(" ")
    if first.lower() in _PREPOSITIONS and rest:
        value = rest
    return words[0].lower(), _value_text(value)


def _value_text(text: str) -> str:
    text = text.strip()
    quoted = re.match(r"^([\"'“‘])(.*?)([\"'”’])", text, re.S)
    if quoted:
        return quoted.group(2)
    return _clean(_without_dangling_word(text))


def _without_dangling_word(text: str) -> str:
    """``text`` without trailing spaces, commas, semicolons and one dangling
    "and" or "with" ("eu, and" is "eu"). Read from the end: a regular
    expression for it backtracks, and takes seconds on a command of 2,000
    spaces."""
    end = len(text.rstrip())
    for word in ("and", "with"):
        start = end - len(word)
        if start >= 0 and text[start:end].lower() == word and not (start and _is_word_char(text[start - 1])):
            end = start
            break
    while end and (text[end - 1].isspace() or text[end - 1] in ",;"):
        end -= 1
    return text[:end]


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


def _without_polite_tail(text: str) -> str:
    """``text`` (its spaces single) without "please", "thanks" or "thank you"
    at its end, each after a space or comma ("eu, please thanks" is "eu")."""
    cut = end = len(text.rstrip())
    while True:
        word = next((w for w in _POLITE_WORDS if end >= len(w) and text[end - len(w) : end].lower() == w), None)
        if word is None:
            break
        before = end - len(word)
        while before and (text[before - 1].isspace() or text[before - 1] == ","):
            before -= 1
        if before == end - len(word):
            break  # glued to the word before it: not a polite word
        cut = end = before
    return text[:cut] if cut < len(text.rstrip()) else text


def _clean(text: str) -> str:
    """A value as said: without the sentence's end, a "please", surrounding
    quotes or one leading article."""
    text = _without_polite_tail(" ".join(text.split()))
    text = text.rstrip(".!?,;: ").strip("\"'“”‘’ ")
    first, _, rest = text.partition(" ")
    if first.lower() in _ARTICLES and rest:
        text = rest
    return text


def _words(text: str) -> list[str]:
    return [w for w in (t.lower().strip(_PUNCTUATION) for t in text.split()) if w]


def _name_phrases(name: str) -> set[str]:
    return {name, name.replace("_", " ").replace("-", " ")}


def _own_words(entry: dict[str, Any]) -> set[str]:
    words = {entry["name"].lower()}
    for phrase in [*_name_phrases(entry["name"]), *entry.get("triggers", [])]:
        words |= set(phrase.lower().split())
    return words


def _is_own(word: str, own: set[str]) -> bool:
    return word in own or any(_typo_of(word, target) for target in own | {"workflow"})


def _phrase_score(words: list[str], phrase: str) -> int:
    """2 when ``phrase`` occurs in ``words`` exactly, 1 with typos, else 0."""
    wanted = phrase.lower().split()
    if not wanted:
        return 0
    best = 0
    for i in range(len(words) - len(wanted) + 1):
        window = words[i : i + len(wanted)]
        if window == wanted:
            return 2
        if all(w == t or _typo_of(w, t) for w, t in zip(window, wanted, strict=True)):
            best = 1
    return best


def _typo_of(word: str, target: str) -> bool:
    """One letter added, dropped, changed or two swapped, in a word long
    enough for that to be a slip rather than another word."""
    if word == target or min(len(word), len(target)) < _TYPO_MIN_LENGTH or abs(len(word) - len(target)) > 1:
        return False
    return _edit_distance(word, target) <= 1


def _edit_distance(a: str, b: str) -> int:
    """Optimal string alignment distance: insertions, deletions,
    substitutions and swaps of neighbours."""
    rows = [list(range(len(b) + 1))]
    for i in range(1, len(a) + 1):
        row = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            row[j] = min(rows[i - 1][j] + 1, row[j - 1] + 1, rows[i - 1][j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], rows[i - 2][j - 2] + 1)
        rows.append(row)
    return rows[-1][-1]
