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
