// Reconnects resume from the last event on the page, not the one the page
// was rendered with: the server then sends exactly what is missing.
(function () {
  if (!window.htmx) return;
  htmx.createWebSocket = function (url) {
    var marker = document.getElementById("last-seq");
    var seq = marker ? marker.dataset.seq : "0";
    var socket = new WebSocket(url.replace(/([?&])after=\d*/, "$1after=" + seq));
    socket.binaryType = htmx.config.wsBinaryType;
    retryAfterTryAgain(socket);
    return socket;
  };

  // The server closes with 4503 when Redis or the database failed under it
  // (daphne sends no 1011/1012/1013). The extension reconnects only after
  // 1006, 1011, 1012 and 1013: its onclose handler sees 4503 as 1012
  // (service restart), and so tries again, with its backoff.
  var TRY_AGAIN = 4503;
  function retryAfterTryAgain(socket) {
    var handler = null;
    Object.defineProperty(socket, "onclose", {
      get: function () { return handler; },
      set: function (fn) { handler = fn; },
    });
    socket.addEventListener("close", function (e) {
      if (!handler) return;
      if (e.code !== TRY_AGAIN) return handler.call(socket, e);
      handler.call(socket, new CloseEvent("close", { code: 1012, reason: e.reason, wasClean: e.wasClean }));
    });
  }
})();

// A big run's live updates mark its routing graph stale instead of sending
// it; the graph card (hx-trigger "graph-stale") then fetches itself, at most
// once a second, while it is older than the mark.
window.zenwebGraphStale = function (graph) {
  var mark = document.getElementById("graph-stale");
  return !!mark && Number(mark.dataset.seq) > Number(graph.dataset.seq || 0);
};

// Polls that depend on the page's state. htmx would evaluate a trigger's
// [condition] as script, which the Content-Security-Policy forbids (no
// 'unsafe-eval'), so the condition is checked here and htmx gets an event.
(function () {
  function every(ms, selector, event, when) {
    setInterval(function () {
      if (!window.htmx) return;
      document.querySelectorAll(selector).forEach(function (el) {
        if (when(el)) htmx.trigger(el, event);
      });
    }, ms);
  }
  every(1000, "#routing-graph[data-seq][hx-get]", "graph-stale", window.zenwebGraphStale);
  // The approvals queue refreshes unless someone is typing a reason into it.
  var typing = "#approval-queue form :focus, #approval-queue :is(textarea, input[name=reason]):not(:placeholder-shown)";
  every(2000, "#approvals-poll", "approvals-poll", function () {
    return !document.querySelector(typing);
  });
})();

// A live update appends every new event to #event-list; while the event
// filter is applied, only the matching ones stay. The cursor (#last-seq)
// comes in its own swap, so a dropped event is not taken for a missing one.
document.addEventListener("htmx:oobBeforeSwap", function (e) {
  var list = e.detail.target;
  var form = document.getElementById("event-filters");
  if (!list || list.id !== "event-list" || !form) return;
  var types = Array.from(form.elements.type.selectedOptions, function (o) { return o.value; });
  var step = form.elements.step.value;
  if (!types.length && !step) return;
  var rows = e.detail.fragment.querySelectorAll("details.event");
  var kept = 0;
  rows.forEach(function (row) {
    if ((types.length && types.indexOf(row.dataset.type) < 0) || (step && row.dataset.step !== step)) {
      row.remove();
    } else {
      kept += 1;
    }
  });
  var none = list.querySelector(".no-events");
  if (kept && none) none.remove();
});

// A live update redraws what it touched (a step's rows, the tool calls):
// what a person opened there (a tool call's result, a step's output or
// transcript, an artifact) stays open in the redrawn rows, matched by id. A
// transcript opened again loads afresh (its hx-trigger is the toggle).
document.addEventListener("htmx:oobBeforeSwap", function (e) {
  var target = e.detail.target;
  var fragment = e.detail.fragment;
  if (!target || !fragment || !fragment.querySelector) return;
  target.querySelectorAll("details[id][open]").forEach(function (open) {
    var fresh = fragment.querySelector("#" + CSS.escape(open.id));
    if (fresh) fresh.open = true;
  });
});

// The start form's inputs hint follows the chosen workflow, also a choice
// the browser restored on a reload or going back (the page is drawn with
// the first workflow's hint).
(function () {
  function hint(select) {
    var chosen = select.selectedOptions[0];
    select.form.elements.inputs.placeholder = chosen ? chosen.dataset.inputs || "" : "";
  }
  document.addEventListener("change", function (e) {
    if (e.target.name === "workflow" && e.target.closest(".start-form")) hint(e.target);
  });
  window.addEventListener("pageshow", function () {
    var select = document.querySelector(".start-form select[name=workflow]");
    if (select) hint(select);
  });
})();

// Answers while they are generated. The websocket sends a step's answer so
// far as a JSON frame ({"partial": {...}}), at most every 100 ms; it is drawn
// here as text (model output is untrusted, never parsed as HTML) and removed
// when the turn's stored event (agent_turn, error, loop_judged, ...) for that step arrives.
(function () {
  var FINAL = /data-type="(?:agent_turn|error|step_end|resume_completed|resume_failed|loop_judged|loop_end)" data-step="([^"]*)"/g;

  function boxFor(list, step) {
    var boxes = list.querySelectorAll(".partial");
    for (var i = 0; i < boxes.length; i++) {
      if (boxes[i].dataset.step === step) return boxes[i];
    }
    var box = document.createElement("article");
    box.className = "partial";
    box.dataset.step = step;
    var head = document.createElement("h3");
    var name = document.createElement("span");
    name.className = "partial-step";
    name.textContent = step;
    var note = document.createElement("span");
    note.className = "muted";
    note.textContent = " generating…";
    head.append(name, note);
    var text = document.createElement("pre");
    text.className = "partial-text";
    var calls = document.createElement("ul");
    calls.className = "partial-calls";
    box.append(head, text, calls);
    list.append(box);
    return box;
  }

  function show(partial) {
    var section = document.getElementById("live-answers");
    var list = document.getElementById("live-answer-list");
    if (!section || !list || typeof partial.step !== "string") return;
    var box = boxFor(list, partial.step);
    if (Number(box.dataset.at || 0) > Number(partial.at || 0)) return;  // an older one, late
    box.dataset.at = partial.at;
    box.querySelector(".partial-text").textContent = (partial.cut ? "…" : "") + (partial.text || "");
    var calls = box.querySelector(".partial-calls");
    calls.replaceChildren();
    (partial.calls || []).forEach(function (call) {
      var item = document.createElement("li");
      var code = document.createElement("code");
      code.textContent = call.name + "(" + call.arguments + ")";
      item.append(code);
      calls.append(item);
    });
    section.hidden = false;
  }

  function settle(message) {
    var list = document.getElementById("live-answer-list");
    if (!list || !list.children.length) return;
    var match;
    FINAL.lastIndex = 0;
    while ((match = FINAL.exec(message)) !== null) {
      var step = match[1];
      list.querySelectorAll(".partial").forEach(function (box) {
        if (box.dataset.step === step) box.remove();
      });
    }
    document.getElementById("live-answers").hidden = !list.children.length;
  }

  document.addEventListener("htmx:wsBeforeMessage", function (e) {
    var message = e.detail.message;
    if (typeof message !== "string") return;
    if (message.charAt(0) === "{") {
      e.preventDefault();
      var parsed;
      try { parsed = JSON.parse(message); } catch (err) { return; }
      if (parsed && parsed.partial) show(parsed.partial);
      return;
    }
    settle(message);
  });
})();
