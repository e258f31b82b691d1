// The admin person page: draws the memory graph (Cytoscape.js) and the emotional
// timeline (uPlot) from the JSON the server embedded in the page. No network access.
(function () {
  "use strict";
  var EMOTION_COLOURS = {
    feliz: "#2e9d4b", triste: "#3b6fd6", agressivo: "#d63b3b", confuso: "#d69a3b",
    neutro: "#8a8a8a", none: "#c9c9c9"
  };
  var RELATION_COLOURS = {
    reply_to: "#555", follow_up: "#7b4bd6", shared_tags: "#2a9db0", similar: "#d6a13b"
  };
  var SHAPES = { user_message: "ellipse", akira_response: "diamond", observation: "rectangle" };

  function colour(table, key, fallback) { return table[key] || fallback; }

  function readJson(id) {
    var el = document.getElementById(id);
    return el ? JSON.parse(el.textContent) : null;
  }

  function drawGraph() {
    var data = readJson("graph-data");
    var box = document.getElementById("graph");
    if (!data || !box || typeof cytoscape === "undefined") { return; }
    var elements = [];
    data.nodes.forEach(function (n) {
      elements.push({ group: "nodes", data: {
        id: n.id, type: n.type, emotion: n.emotion, label: n.label, time: n.time } });
    });
    data.edges.forEach(function (e, i) {
      elements.push({ group: "edges", data: {
        id: "e" + i, source: e.source, target: e.target, type: e.type, strength: e.strength } });
    });
    var cy = cytoscape({
      container: box,
      elements: elements,
      wheelSensitivity: 0.3,
      minZoom: 0.1,
      maxZoom: 4,
      style: [
        { selector: "node", style: {
          "shape": function (n) { return SHAPES[n.data("type")] || "ellipse"; },
          "background-color": function (n) { return colour(EMOTION_COLOURS, n.data("emotion"), "#c9c9c9"); },
          "width": 16, "height": 16, "border-width": 1, "border-color": "#333",
          "label": "", "font-size": 8 } },
        { selector: "node:selected", style: { "label": "data(label)", "border-width": 3 } },
        { selector: "edge", style: {
          "width": function (e) { return 0.5 + 4 * (e.data("strength") || 0); },
          "line-color": function (e) { return colour(RELATION_COLOURS, e.data("type"), "#aaa"); },
          "curve-style": "bezier", "opacity": 0.8,
          "target-arrow-shape": "triangle", "arrow-scale": 0.6,
          "target-arrow-color": function (e) { return colour(RELATION_COLOURS, e.data("type"), "#aaa"); } } }
      ],
      layout: { name: data.nodes.length > 150 ? "concentric" : "cose", animate: false, randomize: false }
    });
    cy.on("tap", "node", function (evt) {
      var n = evt.target;
      box.title = n.data("time") + " · " + n.data("type") + " · " + n.data("emotion") + "\n" + n.data("label");
    });
    window.akiraGraph = cy;  // the browser test counts the drawn nodes through this
    var legend = document.getElementById("graph-legend");
    if (legend) {
      Object.keys(EMOTION_COLOURS).forEach(function (k) {
        var s = document.createElement("span");
        var i = document.createElement("i");
        i.style.background = EMOTION_COLOURS[k];
        s.appendChild(i);
        s.appendChild(document.createTextNode(k));
        legend.appendChild(s);
      });
      Object.keys(RELATION_COLOURS).forEach(function (k) {
        var s = document.createElement("span");
        var i = document.createElement("i");
        i.style.background = RELATION_COLOURS[k];
        i.style.borderRadius = "0";
        i.style.height = "3px";
        s.appendChild(i);
        s.appendChild(document.createTextNode(k.replace("_", " ")));
        legend.appendChild(s);
      });
    }
  }

  function drawTimeline() {
    var points = readJson("timeline-data");
    var box = document.getElementById("timeline");
    if (!points || !box || typeof uPlot === "undefined") { return; }
    if (!points.length) { box.textContent = "no emotion readings yet"; return; }
    points.sort(function (a, b) { return Date.parse(a.time) - Date.parse(b.time); });
    var labels = [];
    points.forEach(function (p) { if (labels.indexOf(p.emotion) < 0) { labels.push(p.emotion); } });
    var xs = points.map(function (p) { return Date.parse(p.time) / 1000; });
    var data = [xs];
    labels.forEach(function (label) {
      data.push(points.map(function (p) { return p.emotion === label ? p.confidence : null; }));
    });
    var series = [{}];
    labels.forEach(function (label) {
      series.push({ label: label, stroke: colour(EMOTION_COLOURS, label, "#333"), width: 0,
        points: { show: true, size: 8, fill: colour(EMOTION_COLOURS, label, "#333") } });
    });
    var plot = new uPlot({
      width: Math.max(300, box.clientWidth || 800), height: 240, series: series,
      scales: { y: { range: [0, 1] } },
      axes: [{}, { label: "confidence" }]
    }, data, box);
    window.akiraTimeline = plot;
  }

  function confirmDeletes() {
    document.querySelectorAll("button.delete").forEach(function (b) {
      b.addEventListener("click", function (evt) {
        if (!window.confirm("Delete this memory and its history?")) { evt.preventDefault(); }
      });
    });
  }

  drawGraph();
  drawTimeline();
  confirmDeletes();
})();
