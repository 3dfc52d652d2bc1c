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
// it; the graph card (hx-trigger "every 1s [zenwebGraphStale(this)]") then
// fetches itself, at most once a second, while it is older than the mark.
window.zenwebGraphStale = function (graph) {
  var mark = document.getElementById("graph-stale");
  return !!mark && Number(mark.dataset.seq) > Number(graph.dataset.seq || 0);
};

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
