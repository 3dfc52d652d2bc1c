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
// it; the graph card (hx-trigger "every 1s [zenwebGraphStale(this)]") then
// fetches itself, at most once a second, while it is older than the mark.
window.zenwebGraphStale = function (graph) {
  var mark = document.getElementById("graph-stale");
  return !!mark && Number(mark.dataset.seq) > Number(graph.dataset.seq || 0);
};
