// Imported by templates/console/broker.html, which calls broker() with the page's data.

import {connect, liveRefresh} from "../shared/live.js";
import {drainSaid} from "../shared/dom.js";
import {stateDialog} from "../shared/plans.js";

// A broker's page: load over time with the moves that touched it as markers; Drain/Activate.
export function broker(name, initial, isOperator) {
  const result = document.getElementById("result");
  let history = initial;
  const moveTrace = (top) => ({type: "scatter", mode: "markers", name: "moves", x: history.moves.map((m) => m.at),
    y: history.moves.map(() => top), marker: {symbol: "triangle-down", size: 10, color: "#1d2330"},
    customdata: history.moves.map((m) => m.decision),
    hovertext: history.moves.map((m) => `${m.action} ${m.target}: ${m.source || "—"} → ${m.destination || "—"} (${m.actor})`),
    hoverinfo: "text+x"});
  const lines = (top) => history.moves.map((m) => ({type: "line", xref: "x", yref: "paper", x0: m.at, x1: m.at, y0: 0, y1: 1,
    line: {color: m.destination === name ? "#59a14f" : m.source === name ? "#e15759" : "#888", width: 1, dash: "dot"}}));
  function draw() {
    const range = [new Date(Date.now() - history.rangeS * 1000).toISOString(), new Date().toISOString()];
    const common = {margin: {t: 10, r: 60, b: 40, l: 60}, legend: {orientation: "h"}, hovermode: "x unified",
      xaxis: {type: "date", range, title: {text: "time (UTC)"}}, shapes: lines()};
    Plotly.react("usage-chart", [
      {type: "scatter", mode: "lines", name: "CPU %", x: history.at, y: history.cpu},
      {type: "scatter", mode: "lines", name: "bandwidth in %", x: history.at, y: history.bandwidthIn},
      {type: "scatter", mode: "lines", name: "bandwidth out %", x: history.at, y: history.bandwidthOut},
      moveTrace(Math.max(10, ...[...history.cpu, ...history.bandwidthIn, ...history.bandwidthOut].filter((v) => v !== null)))],
      {...common, yaxis: {title: {text: "% of capacity"}, rangemode: "tozero"}}, {displayModeBar: false, responsive: true});
    Plotly.react("rate-chart", [
      {type: "scatter", mode: "lines", name: "msg rate (msg/s)", x: history.at, y: history.msgRate},
      {type: "scatter", mode: "lines", name: "throughput (bytes/s)", x: history.at, y: history.throughput, yaxis: "y2"}],
      {...common, yaxis: {title: {text: "msg/s"}, rangemode: "tozero"},
       yaxis2: {title: {text: "bytes/s"}, overlaying: "y", side: "right", rangemode: "tozero"}}, {displayModeBar: false, responsive: true});
    document.getElementById("range-note").textContent =
      `${history.at.length} points, ${history.moves.length} moves touching ${name}; green: a bundle arrived, red: one left.`;
  }
  const url = () => `/api/brokers/${encodeURIComponent(name)}/history/?range=${history.rangeS}`;
  document.querySelectorAll("button.range").forEach((button) => button.addEventListener("click", async () => {
    document.querySelectorAll("button.range").forEach((b) => b.classList.toggle("on", b === button));
    history = {...history, rangeS: Number(button.dataset.range)};
    const response = await fetch(url(), {credentials: "same-origin"});
    if (response.ok) { history = await response.json(); draw(); }
  }));
  const refresh = liveRefresh({toString: url}, (fresh) => { history = fresh; draw(); }, 10000);
  const progress = document.getElementById("drain-progress");
  if (progress) {
    progress.textContent = drainSaid(JSON.parse(document.getElementById("drain-data").textContent));
    // Live while it drains: the same figures as the domains page's card.
    liveRefresh("/api/domains/", (fresh) => {
      const row = fresh.domains.flatMap((d) => d.brokers).find((b) => b.name === name);
      progress.textContent = row && row.drain ? drainSaid(row.drain) : "";
    }, 2000);
  }
  if (isOperator) {
    // The page reloads with the broker's new state; what the change said is shown after it.
    const open = stateDialog(result, (answer) => {
      sessionStorage.setItem("fulcrum.brokerSaid", `${answer.broker} is now ${answer.state}.`);
      location.reload();
    });
    const said = sessionStorage.getItem("fulcrum.brokerSaid");
    if (said) { sessionStorage.removeItem("fulcrum.brokerSaid"); result.textContent = said; }
    document.querySelectorAll("button.drain, button.activate").forEach((button) =>
      button.addEventListener("click", () => open(name, button.classList.contains("drain") ? "drain" : "activate")));
  }
  draw();
  const chart = document.getElementById("usage-chart");
  chart.on("plotly_click", (ev) => {
    const point = ev.points.find((p) => p.data.name === "moves");
    if (point && point.customdata) location.href = `/decisions/${point.customdata}/`;
  });
  connect();
  return refresh;
}
