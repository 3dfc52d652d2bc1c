// Reconnects resume from the last event on the page, not the one the page
// was rendered with: the server then sends exactly what is missing.
(function () {
  if (!window.htmx) return;
  htmx.createWebSocket = function (url) {
    var marker = document.getElementById("last-seq");
    var seq = marker ? marker.dataset.seq : "0";
    var socket = new WebSocket(url.replace(/([?&])after=\d*/, "$1after=" + seq));
    socket.binaryType = htmx.config.wsBinaryType;
    return socket;
  };
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
