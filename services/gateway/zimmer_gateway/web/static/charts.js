// The operator pages' charts (issue 32 #4): every <figure data-chart> with a JSON spec (web/chart_specs.py)
// is drawn with uPlot (vendored, static/vendor/uPlot-*.iife.min.js). Without JavaScript, or if uPlot did not
// load, the figure keeps its summary sentence and its table. Times on the axis and in the legend are the
// reader's own zone (uPlot's default), as clock.js does for the rest of the page.
(function () {
  "use strict";

  function age(s) {
    s = Math.round(s);
    if (s < 60) return s + " s";
    if (s < 3600) return Math.floor(s / 60) + " min";
    var h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
    return m ? h + " h " + m + " min" : h + " h";
  }

  var UNITS = {
    percent: function (v) { return (v * 100).toFixed(v < 0.1 && v > 0 ? 1 : 0) + "%"; },
    count: function (v) { return String(Math.round(v * 10) / 10); },
    seconds: age,
    dollars: function (v) { return "$" + v.toFixed(v < 10 ? 2 : 0); },
    dollars_per_minute: function (v) { return "$" + v.toFixed(v < 0.01 && v > 0 ? 3 : 2); }  // the title says per minute
  };
  var LEGEND = {
    percent: function (v) { return (v * 100).toFixed(1) + "%"; },
    count: function (v) { return String(v); },
    seconds: age,
    dollars: function (v) { return "$" + v.toFixed(2); },
    dollars_per_minute: function (v) { return "$" + v.toFixed(4) + "/min"; }
  };
  // Events on the time axis: holds as a bar along the bottom, pauses and resumes as triangles.
  var MARKS = { hold: "#c9a227", pause: "#a4161a", resume: "#156f2e" };

  function shown(unit) {
    var f = LEGEND[unit] || LEGEND.count;
    return function (v) { return v == null ? "—" : f(v); };
  }

  function drawMarks(u, marks, step) {
    if (!marks.length) return;
    var ctx = u.ctx, b = u.bbox, px = Math.max(1, window.devicePixelRatio || 1), size = 5 * px;
    ctx.save();
    marks.forEach(function (m) {
      var x = u.valToPos(m.at + step / 2, "x", true);
      if (x < b.left || x > b.left + b.width) return;
      ctx.fillStyle = MARKS[m.kind] || "#5b6570";
      ctx.beginPath();
      if (m.kind === "hold") {
        ctx.rect(x - px, b.top + b.height - size, 2 * px, size);
      } else if (m.kind === "pause") {  // pointing down, at the top of the plot
        ctx.moveTo(x - size, b.top); ctx.lineTo(x + size, b.top); ctx.lineTo(x, b.top + 1.6 * size);
      } else {  // a resume: pointing up, just above the holds' bar
        var y = b.top + b.height - size - px;
        ctx.moveTo(x - size, y); ctx.lineTo(x + size, y); ctx.lineTo(x, y - 1.6 * size);
      }
      ctx.fill();
    });
    ctx.restore();
  }

  function heightFor(width) { return width < 500 ? 200 : 260; }

  function draw(figure) {
    var spec = JSON.parse(figure.querySelector("[data-chart-spec]").textContent);
    var box = figure.querySelector("[data-chart-canvas]");
    var left = spec.left || "count", right = spec.right;
    var step = spec.x.length > 1 ? spec.x[1] - spec.x[0] : 60;
    var series = [{ value: function (u, ts) { return ts == null ? "—" : new Date(ts * 1000).toLocaleString(); } }];
    spec.series.forEach(function (s) {
      var fmt = shown(s.axis === "right" ? right : left);
      // A series of one or two points draws no line: show them as dots.
      var few = s.values.filter(function (v) { return v != null; }).length <= 2 && (s.width === undefined || s.width > 0);
      series.push({
        label: s.label, stroke: s.color, width: s.width === undefined ? 1.5 : s.width, dash: s.dash,
        scale: s.axis === "right" ? "r" : "y", spanGaps: false,
        points: few ? { show: true, size: 7, fill: s.color } : { show: false },
        paths: s.step && uPlot.paths && uPlot.paths.stepped ? uPlot.paths.stepped({ align: 1 }) : undefined,
        value: s.legend ? function (u, v, si, i) { return fmt(i == null ? null : s.legend[i]); }
                        : function (u, v) { return fmt(v); }
      });
    });
    var tick = function (unit) {
      var f = UNITS[unit] || UNITS.count;
      return function (u, values) { return values.map(function (v) { return v == null ? "" : f(v); }); };
    };
    var axes = [{}, { scale: "y", values: tick(left), size: 64 }];
    if (right) axes.push({ scale: "r", side: 1, grid: { show: false }, values: tick(right), size: right === "seconds" ? 80 : 48 });
    var scales = {
      x: { time: true },
      y: { range: spec.leftMax ? [0, spec.leftMax] : function (u, min, max) { return [0, max > 0 ? max * 1.1 : 1]; } },
      // Counts on the right keep to the lower part of the plot, under the levels drawn on the left.
      r: { range: function (u, min, max) { return [0, spec.left === "percent" ? Math.max(4, (max || 0) * 2.5)
                                                                               : Math.max(1, (max || 0) * 1.15)]; } }
    };
    var width = box.clientWidth || figure.clientWidth || 600;
    var opts = {
      width: width, height: heightFor(width), series: series, axes: axes, scales: scales,
      bands: (spec.bands || []).map(function (b) { return { series: b.series, fill: b.fill }; }),
      legend: { live: true }, cursor: { drag: { x: false, y: false } },
      hooks: { draw: [function (u) { drawMarks(u, spec.marks || [], step); }] }
    };
    var data = [spec.x].concat(spec.series.map(function (s) { return s.values; }));
    var plot = new uPlot(opts, data, box);
    figure.setAttribute("data-rendered", "uplot");
    figure.setAttribute("data-series", String(spec.series.length));
    figure.setAttribute("data-marks", String((spec.marks || []).length));
    if (window.ResizeObserver) {
      new ResizeObserver(function () {
        var w = box.clientWidth;
        if (w && Math.abs(w - plot.width) > 2) plot.setSize({ width: w, height: heightFor(w) });
      }).observe(box);
    }
  }

  function drawAll() {
    if (typeof uPlot === "undefined") return;  // the text and tables stand on their own
    document.querySelectorAll("figure[data-chart]").forEach(function (figure) {
      if (!figure.querySelector("[data-chart-spec]") || figure.hasAttribute("data-rendered")) return;
      try {
        draw(figure);
      } catch (err) {
        figure.setAttribute("data-chart-error", String(err));
      }
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", drawAll);
  else drawAll();
  document.addEventListener("zimmer:live-updated", drawAll);  // a chart a live refresh brought (live.js)
})();
