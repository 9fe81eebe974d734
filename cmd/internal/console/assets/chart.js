// Sluice console: a small time-series line chart on a canvas.
//
// drawChart(canvas, {lines: [{name, color, axis: "left"|"right", points: [[tMs, v], ...]}],
//                    left: "msg/s", right: "messages"})
// Lines on the right axis are scaled separately (e.g. backlog next to rates).
// The newest value of each line is kept in canvas.dataset["last" + name] so
// tests and scripts can read what the chart shows.
"use strict";

(function () {
  function niceMax(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 2.5, 5, 10]) {
      if (m * p >= v) return m * p;
    }
    return 10 * p;
  }

  function fmtNum(v) {
    if (Math.abs(v) >= 1e6) return (v / 1e6).toFixed(1) + "M";
    if (Math.abs(v) >= 1e4) return (v / 1e3).toFixed(0) + "k";
    if (Math.abs(v) >= 100 || Number.isInteger(v)) return String(Math.round(v));
    return v.toFixed(1);
  }

  function fmtClock(ms) {
    const d = new Date(ms);
    const pad = (n) => String(n).padStart(2, "0");
    return pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds());
  }

  function drawChart(canvas, spec) {
    const dpr = window.devicePixelRatio || 1;
    const cssW = canvas.clientWidth || 600;
    const cssH = canvas.clientHeight || 220;
    canvas.width = Math.round(cssW * dpr);
    canvas.height = Math.round(cssH * dpr);
    const g = canvas.getContext("2d");
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, cssW, cssH);
    g.font = "11px system-ui, sans-serif";

    const pad = { l: 52, r: spec.right ? 60 : 14, t: 24, b: 24 };
    const w = cssW - pad.l - pad.r;
    const h = cssH - pad.t - pad.b;
    let t0 = Infinity, t1 = -Infinity;
    const ymax = { left: 0, right: 0 };
    for (const line of spec.lines) {
      for (const [t, v] of line.points) {
        t0 = Math.min(t0, t);
        t1 = Math.max(t1, t);
        ymax[line.axis || "left"] = Math.max(ymax[line.axis || "left"], v);
      }
      const last = line.points.length ? line.points[line.points.length - 1][1] : "";
      canvas.dataset["last" + line.name.replace(/[^A-Za-z]/g, "")] = String(last);
    }
    canvas.dataset.points = String(spec.lines.reduce((n, l) => Math.max(n, l.points.length), 0));
    const top = { left: niceMax(ymax.left), right: niceMax(ymax.right) };

    // Grid and axes.
    g.strokeStyle = "#e3e6ea";
    g.fillStyle = "#667";
    g.lineWidth = 1;
    for (let i = 0; i <= 4; i++) {
      const y = pad.t + h - (h * i) / 4;
      g.beginPath();
      g.moveTo(pad.l, y);
      g.lineTo(pad.l + w, y);
      g.stroke();
      g.textAlign = "right";
      g.fillText(fmtNum((top.left * i) / 4), pad.l - 6, y + 4);
      if (spec.right) {
        g.textAlign = "left";
        g.fillText(fmtNum((top.right * i) / 4), pad.l + w + 6, y + 4);
      }
    }
    g.textAlign = "left";
    if (spec.left) g.fillText(spec.left, 4, 12);
    if (spec.right) {
      g.textAlign = "right";
      g.fillText(spec.right, cssW - 4, 12);
    }
    if (!isFinite(t0)) {
      g.textAlign = "center";
      g.fillText("no samples yet", pad.l + w / 2, pad.t + h / 2);
      return;
    }
    if (t1 === t0) t1 = t0 + 1000;
    g.textAlign = "left";
    g.fillText(fmtClock(t0), pad.l, cssH - 6);
    g.textAlign = "right";
    g.fillText(fmtClock(t1), pad.l + w, cssH - 6);

    // Lines.
    const x = (t) => pad.l + ((t - t0) / (t1 - t0)) * w;
    for (const line of spec.lines) {
      const yt = top[line.axis || "left"];
      const y = (v) => pad.t + h - (Math.max(v, 0) / yt) * h;
      g.strokeStyle = line.color;
      g.lineWidth = 2;
      g.beginPath();
      line.points.forEach(([t, v], i) => (i ? g.lineTo(x(t), y(v)) : g.moveTo(x(t), y(v))));
      g.stroke();
      if (line.fill) {
        g.lineTo(x(line.points[line.points.length - 1][0]), pad.t + h);
        g.lineTo(x(line.points[0][0]), pad.t + h);
        g.closePath();
        g.globalAlpha = 0.15;
        g.fillStyle = line.color;
        g.fill();
        g.globalAlpha = 1;
      }
    }

    // Legend.
    let lx = pad.l + 8;
    g.textAlign = "left";
    for (const line of spec.lines) {
      g.fillStyle = line.color;
      g.fillRect(lx, 8, 10, 10);
      g.fillStyle = "#333";
      const label = line.name + (line.axis === "right" ? " (right)" : "");
      g.fillText(label, lx + 14, 17);
      lx += g.measureText(label).width + 30;
    }
  }

  window.drawChart = drawChart;
  window.fmtNum = fmtNum;
})();
