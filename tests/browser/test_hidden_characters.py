"""Issue 45 in a real browser: an approval whose command holds bidi controls
says so, in red, and shows them as escapes; a command's box never splits a
token, so ``rm -rf -- build`` reads as it runs. Screenshot:
test-output/screenshots/approval-hidden-characters.png."""

from __future__ import annotations

import pytest

from tests.browser.harness import log_in, screenshot

pytestmark = pytest.mark.browser

# The isolates and the override would draw the rm as part of the comment; the
# long folder name is wider than the box in a 600 px window.
NOTE = (
    "ok #\u2067\u2066 ; rm -rf -- build\u2069\u202e\u2069 && rm -rf -- build/"
    + "cache-of-a-rather-long-folder-name-" * 4
)
REGISTER = f"""
from pathlib import Path
from django.contrib.auth.models import User
from runs.actions import do_create_run, do_register_workflow
path = Path("tests/workflows/approvals/hidden_note.yaml")
workflow, _ = do_register_workflow(path.read_text(), str(path))
print(do_create_run(workflow, {{"note": {NOTE!a}}}, user=User.objects.get(username="viewer")).approvals.get().pk)
"""
# Where each line of the box after the first begins: the character before it,
# and the one it starts with. A break may only follow or start at a space.
LINE_STARTS = """box => {
  const walker = document.createTreeWalker(box, NodeFilter.SHOW_TEXT);
  const starts = [];
  let top = null, previous = "\\n";
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (let i = 0; i < node.data.length; i++) {
      const range = document.createRange();
      range.setStart(node, i);
      range.setEnd(node, i + 1);
      const rect = range.getClientRects()[0];
      const char = node.data[i];
      if (rect && char !== "\\n") {
        if (top !== null && rect.top > top + 2 && previous !== "\\n") starts.push([previous, char]);
        top = rect.top;
      }
      previous = char;
    }
  }
  return starts;
}"""


def test_an_approval_with_hidden_characters_says_so_in_red_and_splits_no_token(open_page, server):
    approval = int(server.shell(REGISTER).strip())
    page = open_page(viewport={"width": 600, "height": 900})
    log_in(page, server, next_path="/approvals/", user="approver")
    request = page.locator(f"#approval-{approval}")

    flag = request.locator(".hidden-flag").first
    assert flag.is_visible()
    assert flag.inner_text() == "contains hidden characters: shown escaped"
    assert flag.evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(180, 35, 24)"
    command = request.locator("ul.actions pre.arguments")
    text = command.inner_text()
    assert "\\u202e" in text and "\u202e" not in text
    assert "rm -rf -- build\\u2069\\u202e\\u2069 && rm -rf -- build/cache-of-a-rather" in text
    assert request.locator("ul.actions .hidden-char").count() == 5
    screenshot(page, "approval-hidden-characters")
    # The box is narrower than the folder name: it scrolls sideways, and
    # every line it wraps into begins after a space, never inside a token.
    assert command.evaluate("e => e.scrollWidth > e.clientWidth")
    starts = command.evaluate(LINE_STARTS)
    assert starts, "the command should wrap in a 600 px window"
    assert all(before == " " or first == " " for before, first in starts), starts
