// The run's graph (#routing-graph): laid out by dagre (static/vendor/dagre/)
// from the JSON the server embeds (#routing-graph-data, runs/graph.py) and
// drawn as SVG, with every node and edge tagged (data-node, data-kind,
// data-status; data-source, data-target, data-count). A live update swaps
// the card and it is drawn again here, keeping the node a person picked and
// where they had scrolled. Clicking a node shows only its events (the event
// stream's step chip, kept in the address) and opens its step's row.
(function () {
  var SVG = "http://www.w3.org/2000/svg";
  var FAMILY = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";
  var LABEL = 12, DETAIL = 11, LINE = 15, PAD_X = 9, PAD_Y = 6, MIN_W = 64, MAX_W = 172, MAX_LINES = 3;
  // Never drawn smaller than this, so that 11 px text stays over 9 px.
  var MIN_SCALE = 0.85;
  var GLYPHS = { pending: "○", running: "◐", completed: "✓", failed: "✕", skipped: "–", cancelled: "–", partial: "◑",
                 blocked: "■", awaiting_approval: "…" };
  // Loops, forEach and their iterations are boxes (dagre's compound nodes)
  // up to this many nodes; past it their cost dominates the layout (a
  // 500-node run took several times as long), so a big run's nodes name
  // their box in their tooltip instead.
  var BOXED_UP_TO = 150;
  var state = { picked: null, scroll: null };
  var measure = document.createElement("canvas").getContext("2d");

  function textWidth(text, size) {
    measure.font = size + "px " + FAMILY;
    return measure.measureText(text).width;
  }

  // Cut ``text`` to fit ``width`` with an ellipsis.
  function truncated(text, width, size) {
    if (textWidth(text, size) <= width) return text;
    var end = text.length;
    while (end > 1 && textWidth(text.slice(0, end) + "…", size) > width) end -= 1;
    return text.slice(0, end) + "…";
  }

  // An id in lines of at most ``width``, broken only after a separator
  // (. [ ] _ - : /), never inside a word; a word too wide for a line, or a
  // line past MAX_LINES, is truncated (the node's tooltip has the whole id).
  function wrapped(text, width, size) {
    var words = text.match(/[^.\[\]_\-:/\s]+[.\[\]_\-:/\s]*|[.\[\]_\-:/\s]+/g) || [text];
    var lines = [], line = "";
    words.forEach(function (word) {
      if (line && textWidth(line + word, size) > width) {
        lines.push(line);
        line = "";
      }
      line += word;
    });
    if (line) lines.push(line);
    if (lines.length > MAX_LINES) {
      lines = lines.slice(0, MAX_LINES);
      lines[MAX_LINES - 1] += "…";
    }
    return lines.map(function (l) { return truncated(l, width, size); });
  }

  function box(node) {
    var inner = MAX_W - 2 * PAD_X;
    var glyph = node.kind === "nowhere" ? "?" : (GLYPHS[node.status] || "·");
    var lines = wrapped(glyph + " " + (node.kind === "child" ? node.detail : node.id), inner, LABEL);
    var detail = node.kind === "child" ? "child run" : node.detail;
    detail = detail ? truncated(detail, inner, DETAIL) : "";
    var widest = Math.max.apply(null, lines.map(function (l) { return textWidth(l, LABEL); })
      .concat([detail ? textWidth(detail, DETAIL) : 0]));
    var width = Math.max(MIN_W, Math.ceil(widest) + 2 * PAD_X);
    var height = 2 * PAD_Y + LINE * (lines.length + (detail ? 1 : 0));
    return { width: width, height: height, lines: lines, detail: detail };
  }

  function el(name, attrs, parent) {
    var e = document.createElementNS(SVG, name);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (parent) parent.appendChild(e);
    return e;
  }

  function titled(parent, text) {
    el("title", {}, parent).textContent = text;
  }

  // Messages all go through the coordinator: laid out with the structure
  // they would pull every node towards it over every rank, which costs
  // dagre most of its time on a big run. dagre places the structure
  // (dependencies, spawns, child runs; the coordinator above what nothing
  // else starts); messages are drawn afterwards as curves (message()).
  function isMessage(edge) {
    return edge.kind === "sent" || edge.kind === "forward" || edge.kind === "drop";
  }

  function layout(data) {
    var g = new dagre.graphlib.Graph({ compound: true, multigraph: true });
    g.setGraph({ rankdir: "TB", nodesep: 22, ranksep: 40, edgesep: 8, marginx: 12, marginy: 12 });
    g.setDefaultEdgeLabel(function () { return {}; });
    var boxed = data.nodes.length <= BOXED_UP_TO;
    if (boxed) {
      data.containers.forEach(function (c) { g.setNode("box:" + c.id, { box: c.id }); });
      data.containers.forEach(function (c) { if (c.parent) g.setParent("box:" + c.id, "box:" + c.parent); });
    }
    data.nodes.forEach(function (node) {
      var b = box(node);
      g.setNode(node.id, { node: node, width: b.width, height: b.height, shape: b });
      if (boxed && node.container) g.setParent(node.id, "box:" + node.container);
    });
    var started = {};
    data.edges.forEach(function (edge, n) {
      if (isMessage(edge)) return;
      started[edge.target] = true;
      g.setEdge(edge.source, edge.target, { edge: edge }, String(n));
    });
    data.nodes.forEach(function (node) {
      if (node.kind !== "coordinator" && !started[node.id] && g.hasNode("coordinator")) {
        g.setEdge("coordinator", node.id, { layoutOnly: true }, "start:" + node.id);
      }
    });
    dagre.layout(g);
    return g;
  }

  // Where a line from the centre of ``n`` towards (x, y) leaves its box.
  function rim(n, x, y) {
    var dx = x - n.x, dy = y - n.y;
    if (!dx && !dy) return { x: n.x, y: n.y };
    var sx = dx ? (n.width / 2) / Math.abs(dx) : Infinity, sy = dy ? (n.height / 2) / Math.abs(dy) : Infinity;
    var k = Math.min(sx, sy);
    return { x: n.x + dx * k, y: n.y + dy * k };
  }

  // A message edge: a curve between the two boxes, the two directions and
  // the drops side by side; its count sits near the step's end.
  var SIDE = { sent: -8, forward: 8, drop: 0 }, AT = { sent: 0.35, forward: 0.8, drop: 0.55 };
  function message(g, edge) {
    var s = g.node(edge.source), t = g.node(edge.target);
    if (!s || !t) return null;
    var shift = SIDE[edge.kind];
    var a = rim(s, t.x + shift, t.y), b = rim(t, s.x + shift, s.y);
    a.x += shift; b.x += shift;
    var midY = (a.y + b.y) / 2;
    var c1 = { x: a.x, y: midY }, c2 = { x: b.x, y: midY };
    var k = AT[edge.kind], u = 1 - k;
    var label = {
      x: u * u * u * a.x + 3 * u * u * k * c1.x + 3 * u * k * k * c2.x + k * k * k * b.x,
      y: u * u * u * a.y + 3 * u * u * k * c1.y + 3 * u * k * k * c2.y + k * k * k * b.y,
    };
    var d = "M" + r(a.x) + " " + r(a.y) + "C" + r(c1.x) + " " + r(c1.y) + " " + r(c2.x) + " " + r(c2.y) + " " + r(b.x) + " " + r(b.y);
    return { edge: edge, d: d, x: label.x, y: label.y, width: Math.ceil(textWidth(edge.label, DETAIL)) + 6 };
  }

  function r(v) { return Math.round(v * 10) / 10; }

  function path(points) {
    var d = "M" + points[0].x + " " + points[0].y;
    for (var i = 1; i < points.length - 1; i++) {
      var mx = (points[i].x + points[i + 1].x) / 2, my = (points[i].y + points[i + 1].y) / 2;
      d += "Q" + points[i].x + " " + points[i].y + " " + mx + " " + my;
    }
    var last = points[points.length - 1];
    return d + "L" + last.x + " " + last.y;
  }

  // A structural edge as dagre routed it: its points into a path.
  function routed(e) {
    return { edge: e.edge, d: path(e.points.map(function (p) { return { x: r(p.x), y: r(p.y) }; })) };
  }

  function drawEdge(layer, e) {
    var edge = e.edge;
    var g = el("g", { "class": "rg-edge rg-" + edge.kind + (edge.kind === "drop" ? " rg-dropped" : ""), "data-kind": edge.kind,
                      "data-source": edge.source, "data-target": edge.target }, layer);
    if (edge.label) g.setAttribute("data-count", edge.count);
    if (edge.kind === "drop") g.setAttribute("data-dropped", "true");
    titled(g, edge.title);
    el("path", { d: e.d, "marker-end": "url(#rg-arrow-" + edge.kind + ")" }, g);
    if (edge.label) {
      el("rect", { x: r(e.x - e.width / 2), y: r(e.y - 7), width: e.width, height: 14, rx: 3, "class": "rg-count-bg" }, g);
      var t = el("text", { x: r(e.x), y: r(e.y), dy: ".35em", "text-anchor": "middle", "class": "rg-count" }, g);
      t.textContent = edge.label;
    }
  }

  function drawNode(layer, n, clickable) {
    var node = n.node, shape = n.shape;
    var x = n.x - n.width / 2, y = n.y - n.height / 2;
    var classes = "rg-node kind-" + node.kind + " status-" + (node.status || "none")
      + (node.kind === "coordinator" ? " rg-hub" : "") + (node.working ? " rg-working" : "")
      + (node.id === state.picked ? " rg-picked" : "");
    var parent = layer;
    if (node.url) parent = el("a", { href: node.url, "class": "rg-link" }, layer);
    var g = el("g", { "class": classes, "data-node": node.id, "data-kind": node.kind, "data-status": node.status,
                      transform: "translate(" + x + " " + y + ")" }, parent);
    if (clickable && node.kind !== "nowhere" && !node.url) {
      g.setAttribute("tabindex", "0");
      g.setAttribute("role", "button");
    }
    titled(g, node.title);
    el("rect", { width: n.width, height: n.height, rx: node.kind === "loop" ? 2 : 7, "class": "rg-box" }, g);
    shape.lines.forEach(function (line, i) {
      var t = el("text", { x: n.width / 2, y: PAD_Y + LINE * (i + 1) - 4, "text-anchor": "middle", "class": "rg-label" }, g);
      t.textContent = line;
    });
    if (shape.detail) {
      var d = el("text", { x: n.width / 2, y: PAD_Y + LINE * (shape.lines.length + 1) - 4, "text-anchor": "middle",
                           "class": "rg-detail" }, g);
      d.textContent = shape.detail;
    }
  }

  function drawBox(layer, b) {
    var g = el("g", { "class": "rg-group", "data-group": b.box }, layer);
    titled(g, b.box);
    el("rect", { x: b.x - b.width / 2, y: b.y - b.height / 2, width: b.width, height: b.height, rx: 6 }, g);
    var t = el("text", { x: b.x - b.width / 2 + 5, y: b.y - b.height / 2 + 11, "class": "rg-group-label" }, g);
    t.textContent = truncated(b.box, Math.max(20, b.width - 10), DETAIL - 1);
  }

  function markers(svg) {
    var defs = el("defs", {}, svg);
    ["depends", "spawn", "child", "sent", "forward", "drop"].forEach(function (kind) {
      var m = el("marker", { id: "rg-arrow-" + kind, "class": "rg-arrow rg-arrow-" + kind, viewBox: "0 0 10 10", refX: 9,
                             refY: 5, markerWidth: 7, markerHeight: 7, markerUnits: "userSpaceOnUse", orient: "auto" }, defs);
      el("path", { d: "M0 0L10 5L0 10z" }, m);
    });
  }

  // Draws the graph card ``card`` (#routing-graph); returns the SVG.
  function render(card) {
    var source = card.querySelector("#routing-graph-data");
    var canvas = card.querySelector(".graph-canvas");
    if (!source || !canvas || !window.dagre) return null;
    var data = JSON.parse(source.textContent);
    var g = layout(data);
    var size = g.graph();
    var width = Math.ceil(size.width), height = Math.ceil(size.height);
    var room = canvas.clientWidth || width;
    var scale = Math.min(1, Math.max(MIN_SCALE, room / width));
    var svg = el("svg", { "class": "routing" + (width * scale > room ? " wide" : ""), viewBox: "0 0 " + width + " " + height,
                          width: Math.round(width * scale), height: Math.round(height * scale), "font-family": FAMILY,
                          "data-nodes": data.nodes.length, "data-edges": data.edges.length });
    titled(svg, "The run's graph: " + data.nodes.length + " nodes, " + data.edges.length + " edges");
    markers(svg);
    var boxes = el("g", { "class": "rg-groups" }, svg), edges = el("g", { "class": "rg-edges" }, svg);
    var nodes = el("g", { "class": "rg-nodes" }, svg);
    var clickable = canvas.dataset.clickable === "true";
    g.nodes().forEach(function (id) {
      var n = g.node(id);
      if (n.box !== undefined) drawBox(boxes, n);
      else if (n.node) drawNode(nodes, n, clickable);
    });
    g.edges().forEach(function (e) {
      var laid = g.edge(e);
      if (laid.edge) drawEdge(edges, routed(laid));
    });
    data.edges.forEach(function (edge) {
      var curve = isMessage(edge) && message(g, edge);
      if (curve) drawEdge(edges, curve);
    });
    canvas.replaceChildren(svg);
    card.dataset.drawn = "true";
    return svg;
  }

  function draw(card) {
    render(card);
    var canvas = card.querySelector(".graph-canvas");
    if (state.scroll && canvas) {
      canvas.scrollLeft = state.scroll[0];
      canvas.scrollTop = state.scroll[1];
    }
  }

  // Only the events of ``stepId``: the stream's step chips (in the
  // address) become that one step, and its row in the steps table opens.
  function showStep(stepId) {
    var form = document.getElementById("event-filters");
    if (form) {
      form.querySelectorAll(".chip-step input[name=step]").forEach(function (input) { input.closest(".chip").remove(); });
      var chip = window.zenwebEventFilter.stepChip(stepId);
      var pick = form.querySelector("select.step-pick");
      if (pick) pick.before(chip); else form.append(chip);
      chip.querySelector("input").dispatchEvent(new Event("change", { bubbles: true }));
    }
    document.querySelectorAll("tbody.step.picked").forEach(function (row) { row.classList.remove("picked"); });
    var row = document.getElementById("step-" + stepId);
    if (row) {
      row.classList.add("picked");
      row.querySelectorAll("details").forEach(function (d) { if (!d.id.endsWith("-transcript")) d.open = true; });
      row.scrollIntoView({ block: "nearest" });
    }
  }

  function pick(target) {
    var node = target.closest && target.closest(".rg-node[role=button]");
    if (!node || !node.closest("#routing-graph")) return false;
    state.picked = node.dataset.node;
    document.querySelectorAll("#routing-graph .rg-picked").forEach(function (n) { n.classList.remove("rg-picked"); });
    node.classList.add("rg-picked");
    showStep(node.dataset.node);
    return true;
  }

  document.addEventListener("click", function (e) { pick(e.target); });
  document.addEventListener("keydown", function (e) {
    if ((e.key === "Enter" || e.key === " ") && pick(e.target)) e.preventDefault();
  });

  // A swap replaces the card: keep where its canvas was scrolled.
  function remember(e) {
    var target = e.detail && e.detail.target;
    if (!target || target.id !== "routing-graph") return;
    var canvas = target.querySelector(".graph-canvas");
    if (canvas) state.scroll = [canvas.scrollLeft, canvas.scrollTop];
  }
  document.addEventListener("htmx:oobBeforeSwap", remember);
  document.addEventListener("htmx:beforeSwap", remember);

  function drawIn(root) {
    var card = root && root.id === "routing-graph" ? root : root && root.querySelector && root.querySelector("#routing-graph");
    if (card && card.dataset.drawn !== "true") draw(card);
  }
  document.addEventListener("htmx:load", function (e) { drawIn(e.target); });
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", function () { drawIn(document); });
  else drawIn(document);

  window.zenwebGraph = { render: render, showStep: showStep };
})();
