// The run page's connection, shown in its header (#connection): live,
// reconnecting (attempt N, next try in X s) or offline. This code, not the
// htmx ws extension, decides when to reconnect: at once on the browser's
// "online" event, else with a backoff from 0.5 s to 1.5 s (a restarted
// server is seen within a couple of seconds). A reconnect resumes from the
// last event on the page, not the one it was rendered with: the server sends
// exactly what is missing, then {"caught_up": seq}, and the header says how
// many events came in meanwhile.
(function () {
  if (!window.htmx) return;
  var FIRST_DELAY = 500, MAX_DELAY = 1500;
  // Closes after which trying again cannot help (runs/consumers.py, zenweb/websockets.py).
  var FINAL = { 4403: "not allowed to watch this run", 4404: "no such live page", 4429: "too many live pages open" };
  var state = { name: "connecting", attempt: 0, timer: null, nextAt: 0, tick: null, seqAtDrop: null,
                current: null, wrapper: null, leaving: false, caughtUp: null };
  window.zenwebConnection = state;

  function seq() {
    var marker = document.getElementById("last-seq");
    return marker ? Number(marker.dataset.seq) : 0;
  }

  function show(name, text) {
    state.name = name;
    var live = document.getElementById("run-live");
    if (live) live.dataset.connection = name;
    var el = document.getElementById("connection");
    if (!el) return;
    el.dataset.state = name;
    el.textContent = text;
  }

  function showReconnecting() {
    clearInterval(state.tick);
    function draw() {
      var left = Math.max(0, state.nextAt - Date.now()) / 1000;
      var when = left > 0 ? "next try in " + left.toFixed(1) + " s" : "trying now";
      show("reconnecting", "reconnecting (attempt " + state.attempt + ", " + when + ")");
    }
    draw();
    state.tick = setInterval(draw, 200);
  }

  // The delay before attempt n (1, 2, ...): htmx.config.wsReconnectDelay if
  // a page or test set a function there, else this backoff with jitter.
  htmx.config.wsReconnectDelay = function (n) {
    var base = Math.min(MAX_DELAY, FIRST_DELAY * Math.pow(2, Math.max(0, n - 1)));
    return base * (0.75 + Math.random() * 0.25);
  };

  function connectNow() {
    clearTimeout(state.timer);
    state.timer = null;
    if (!state.wrapper || state.leaving) return;
    if (state.current && state.current.readyState === WebSocket.CONNECTING) return;
    state.wrapper.reconnect();
  }

  function scheduleRetry() {
    clearTimeout(state.timer);
    if (!navigator.onLine) {
      clearInterval(state.tick);
      show("offline", "offline: no network; reconnecting when it returns");
      return;
    }
    state.attempt += 1;
    var delay = htmx.config.wsReconnectDelay(state.attempt);
    state.nextAt = Date.now() + delay;
    state.timer = setTimeout(connectNow, delay);
    showReconnecting();
  }

  function closed(socket, e) {
    if (socket !== state.current || state.leaving) return;  // a socket already replaced
    if (state.seqAtDrop === null) state.seqAtDrop = seq();
    if (FINAL[e.code]) {
      clearInterval(state.tick);
      show("offline", "offline: " + (e.reason || FINAL[e.code]) + "; reload to try again");
      return;
    }
    scheduleRetry();
  }

  htmx.createWebSocket = function (url) {
    var socket = new WebSocket(url.replace(/([?&])after=\d*/, "$1after=" + seq()));
    socket.binaryType = htmx.config.wsBinaryType;
    state.current = socket;
    // The extension's own handlers: its onclose is given a normal close
    // (1000), so that it never schedules a reconnect of its own beside this
    // one; its onerror is not called, as it would log the bare Event
    // ("[object Event]") on every failed attempt: the header says it instead.
    var onclose = null, onerror = null;
    function forward(e) {
      if (onclose) onclose.call(socket, new CloseEvent("close", { code: 1000, reason: e.reason, wasClean: e.wasClean }));
    }
    Object.defineProperty(socket, "onclose", { get: function () { return forward; }, set: function (fn) { onclose = fn; } });
    Object.defineProperty(socket, "onerror", { get: function () { return onerror; }, set: function (fn) { onerror = fn; } });
    socket.addEventListener("close", function (e) {
      forward(e);
      closed(socket, e);
    });
    return socket;
  };

  document.addEventListener("htmx:wsOpen", function (e) {
    state.wrapper = e.detail.socketWrapper;
    clearInterval(state.tick);
    clearTimeout(state.timer);
    state.timer = null;
    state.caughtUp = state.seqAtDrop;  // the next {"caught_up"} frame reports from here
    show("live", state.seqAtDrop === null ? "live" : "live, catching up…");
  });
  document.addEventListener("htmx:wsClose", function (e) {
    state.wrapper = e.detail.socketWrapper;
  });
  document.addEventListener("htmx:wsBeforeMessage", function (e) {
    var message = e.detail.message;
    if (typeof message !== "string" || message.indexOf('{"caught_up"') !== 0) return;
    e.preventDefault();
    if (state.caughtUp === null) return;  // the first connection: nothing was missed
    var missed = Math.max(0, seq() - state.caughtUp);
    state.caughtUp = null;
    state.seqAtDrop = null;
    state.attempt = 0;
    show("live", "live, caught up " + missed + " event" + (missed === 1 ? "" : "s"));
  });

  window.addEventListener("online", function () {
    if (state.name === "live" || state.name === "connecting") return;
    state.nextAt = Date.now();
    connectNow();
  });
  window.addEventListener("offline", function () {
    if (state.name !== "live") return;
    // The socket may take a while to notice; the header says it at once.
    if (state.seqAtDrop === null) state.seqAtDrop = seq();
    show("offline", "offline: no network; reconnecting when it returns");
  });
  window.addEventListener("pagehide", function () { state.leaving = true; });
})();

// An action (Cancel, Resume, an approval...) whose request failed says so,
// instead of failing silently: the server away, the network down, or a
// refusal. The message stays until dismissed or the next action.
(function () {
  function label(elt) {
    var button = elt.matches("form") ? elt.querySelector("button") : elt;
    return ((button && button.textContent) || "the action").trim();
  }
  function notice(text) {
    var box = document.getElementById("action-notices");
    if (!box) {
      box = document.createElement("div");
      box.id = "action-notices";
      box.setAttribute("role", "alert");
      document.body.append(box);
    }
    var item = document.createElement("p");
    item.className = "action-failed";
    item.textContent = text + " ";
    var close = document.createElement("button");
    close.type = "button";
    close.className = "link";
    close.textContent = "dismiss";
    close.addEventListener("click", function () { item.remove(); });
    item.append(close);
    box.replaceChildren(item);
  }
  document.addEventListener("htmx:sendError", function (e) {
    notice("“" + label(e.detail.elt) + "” failed: the server could not be reached (offline). Nothing was done; try again once the page says live.");
  });
  document.addEventListener("htmx:responseError", function (e) {
    var xhr = e.detail.xhr;
    notice("“" + label(e.detail.elt) + "” failed: the server answered " + xhr.status + " " + (xhr.statusText || "") + ".");
  });
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

// The event filters (chips: groups, severities, steps) are kept in the
// page's address, so a reload or a shared link shows the same events. A step
// picked from the list becomes a chip. A live update appends every new event
// to #event-list; while a filter is on, only the matching ones stay. The
// cursor (#last-seq) comes in its own swap, so a dropped event is not taken
// for a missing one.
(function () {
  function chosen(form) {
    var data = new FormData(form);
    return {
      group: data.getAll("group"), severity: data.getAll("severity"),
      step: data.getAll("step").filter(Boolean), type: data.getAll("type"),
    };
  }
  function matches(row, c) {
    return (!c.group.length || c.group.indexOf(row.dataset.group) >= 0)
      && (!c.severity.length || c.severity.indexOf(row.dataset.severity) >= 0)
      && (!c.step.length || c.step.indexOf(row.dataset.step) >= 0)
      && (!c.type.length || c.type.indexOf(row.dataset.type) >= 0);
  }
  // A ticked chip of the stream's step filter: it keeps ``step``'s events.
  function stepChip(step) {
    var chip = document.createElement("label");
    chip.className = "chip chip-step";
    var box = document.createElement("input");
    box.type = "checkbox"; box.name = "step"; box.value = step; box.checked = true;
    var text = document.createElement("span");
    text.textContent = step;
    chip.append(box, text);
    return chip;
  }
  window.zenwebEventFilter = { chosen: chosen, matches: matches, stepChip: stepChip };

  document.addEventListener("change", function (e) {
    var form = e.target.closest && e.target.closest("#event-filters");
    if (!form) return;
    if (e.target.matches("select.step-pick") && e.target.value) {
      var step = e.target.value;
      var exists = Array.from(form.querySelectorAll("input[name=step]")).some(function (i) { return i.value === step; });
      if (!exists) e.target.before(stepChip(step));
      e.target.value = "";
    } else if (e.target.matches(".chip-step input") && !e.target.checked) {
      e.target.closest(".chip").remove();
    }
    var query = new URLSearchParams();
    var c = chosen(form);
    ["step", "group", "severity", "type"].forEach(function (name) {
      c[name].forEach(function (value) { query.append(name, value); });
    });
    var search = query.toString();
    history.replaceState(history.state, "", location.pathname + (search ? "?" + search : "") + location.hash);
  });

  document.addEventListener("htmx:oobBeforeSwap", function (e) {
    var list = e.detail.target;
    var form = document.getElementById("event-filters");
    if (!list || list.id !== "event-list") return;
    var rows = e.detail.fragment.querySelectorAll("details.event");
    var c = form ? chosen(form) : null;
    var kept = 0;
    rows.forEach(function (row) {
      if (c && !matches(row, c)) row.remove();
      else kept += 1;
    });
    list.dataset.arriving = kept;
    var none = list.querySelector(".no-events");
    if (kept && none) none.remove();
    if (pending) rows.forEach(function (row) { if (row.parentNode) pending.push(row.cloneNode(true)); });
  });

  // A new choice of filters replaces the list with a page the server read
  // when asked: live events that came in while it was on its way are added
  // to it again, so none goes missing.
  var pending = null;
  function fromFilters(e) {
    var elt = e.detail.requestConfig ? e.detail.requestConfig.elt : e.detail.elt;
    return !!elt && elt.id === "event-filters";
  }
  document.addEventListener("htmx:beforeRequest", function (e) { if (fromFilters(e)) pending = []; });
  document.addEventListener("htmx:afterRequest", function (e) {
    if (fromFilters(e) && !e.detail.successful) pending = null;
  });
  document.addEventListener("htmx:afterSwap", function (e) {
    if (!fromFilters(e) || !pending || !e.detail.target || e.detail.target.id !== "event-list") return;
    var list = e.detail.target;
    var shown = list.querySelectorAll("details.event");
    var newest = shown.length ? Number(shown[shown.length - 1].dataset.seq) : 0;
    pending.forEach(function (row) {
      if (Number(row.dataset.seq) > newest && !document.getElementById(row.id)) list.append(row);
    });
    pending = null;
  });
})();

// The event list follows the newest event while it is scrolled to its end
// (and opens there: a run opens at its latest events). Scrolled up, it stays
// where the person reads, and a button counts the events that arrived below
// and jumps back to them.
(function () {
  var SLACK = 40;  // px from the end that still count as "at the end"
  var following = true, unseen = 0;

  function list() { return document.getElementById("event-list"); }
  function atEnd(el) { return el.scrollHeight - el.scrollTop - el.clientHeight <= SLACK; }
  function button() { return document.getElementById("new-events"); }
  function toEnd() {
    var el = list();
    if (!el) return;
    el.scrollTop = el.scrollHeight;
    following = true;
    unseen = 0;
    if (button()) button().hidden = true;
  }
  window.zenwebFollow = { isFollowing: function () { return following; }, toEnd: toEnd };

  function start() {
    var el = list();
    if (!el || !button()) return;  // only the run page follows
    toEnd();
    el.addEventListener("scroll", function () {
      following = atEnd(el);
      if (following) {
        unseen = 0;
        button().hidden = true;
      }
    }, { passive: true });
    button().addEventListener("click", toEnd);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();

  document.addEventListener("htmx:oobAfterSwap", function (e) {
    var el = e.detail.target;
    if (!el || el.id !== "event-list" || !button()) return;
    var arrived = Number(el.dataset.arriving || 0);
    if (following) {
      el.scrollTop = el.scrollHeight;
    } else if (arrived) {
      unseen += arrived;
      button().textContent = unseen + " new event" + (unseen === 1 ? "" : "s") + " ↓";
      button().hidden = false;
    }
  });
  // A new choice of filters: its newest events, at the end.
  document.addEventListener("htmx:afterSwap", function (e) {
    if (e.detail.target && e.detail.target.id === "event-list" && e.detail.requestConfig
        && e.detail.requestConfig.elt && e.detail.requestConfig.elt.id === "event-filters") toEnd();
  });
})();

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
// no workflow chosen). A destructive workflow's fieldset (what it will do,
// and the tick it needs) shows, enabled, only while it is the one chosen: a
// hidden fieldset stays disabled, so its required tick holds back no other.
(function () {
  function hint(select) {
    var chosen = select.selectedOptions[0];
    var inputs = select.form.elements.inputs;
    inputs.placeholder = chosen && chosen.value ? chosen.dataset.inputs || "" : "choose a workflow to see its inputs";
    select.form.querySelectorAll("fieldset.destructive-confirm").forEach(function (fieldset) {
      var shown = fieldset.dataset.workflow === select.value;
      fieldset.hidden = !shown;
      fieldset.disabled = !shown;
    });
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

// The run's approvals card is drawn for the person looking (who may decide
// what), so a live update does not carry it: it marks it changed
// (#approvals-changed) and the card fetches itself again. A reason being
// typed into one of its forms, or an answer to a question, is kept across
// that redraw.
(function () {
  var typed = {};
  var FORMS = "form.decide[data-approval], form.answer[data-question]";
  var field = function (form) { return form.querySelector("input[name=reason], textarea[name=answer]"); };
  var key = function (form) { return form.dataset.approval || "question-" + form.dataset.question; };
  document.addEventListener("htmx:oobAfterSwap", function (e) {
    if (!e.target || e.target.id !== "approvals-changed") return;
    var card = document.getElementById("run-approvals");
    if (card) htmx.trigger(card, "approvals-changed");
  });
  document.addEventListener("htmx:beforeSwap", function (e) {
    if (!e.detail.target || e.detail.target.id !== "run-approvals") return;
    typed = {};
    e.detail.target.querySelectorAll(FORMS).forEach(function (form) {
      var typedInto = field(form);
      // A form that was sent is not typed into any more: its decision is in the answer.
      if (typedInto && typedInto.value && !(e.detail.requestConfig && form === e.detail.requestConfig.elt)) typed[key(form)] = typedInto.value;
    });
  });
  // On the swap itself, not at settle (20 ms later): nobody sees the field empty.
  document.addEventListener("htmx:afterSwap", function (e) {
    var card = document.getElementById("run-approvals");
    if (!card || e.detail.elt !== card) return;
    card.querySelectorAll(FORMS).forEach(function (form) {
      var kept = typed[key(form)];
      var typedInto = field(form);
      if (kept && typedInto && !typedInto.value) typedInto.value = kept;
    });
    typed = {};
  });
})();
