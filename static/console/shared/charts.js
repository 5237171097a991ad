// Charts drawn by more than one page. Plotly is the global of the classic script base.html
// loads before any page's module runs; it is served locally (/vendor/plotly-<digest>.min.js): a
// partial bundle of the trace types the console's modules draw (js/plotly-fulcrum.js); a new type
// needs `make plotly` (tests/console/test_plotly_bundle.py scans every module under static/console/).

import {el} from "./dom.js";

// A replay's comparison: a table of each run's figures and, above one another, its CV and
// max / mean over time. ``runs``: [[label, run (its summary and points), colour]]; a run
// without moves (what was recorded) shows "—" there.
export function replayCompare(body, chartId, runs) {
  const fixed = (v, n) => (v === null || v === undefined ? "—" : v.toFixed(n));
  const rows = [
    ["median CV", (r) => fixed(r.cvMedian, 3)],
    ["median max / mean", (r) => fixed(r.maxOverMeanMedian, 2)],
    ["p95 max / mean", (r) => fixed(r.maxOverMeanP95, 2)],
    ["moves (per hour)", (r) => (r.moves === undefined ? "—" : `${r.moves} (${r.movesPerHour.toFixed(1)}/h)`)],
    ["moved back within the hour", (r) => (r.oscillations === undefined ? "—" : String(r.oscillations))],
    ["vetoed", (r) => (r.vetoed === undefined ? "—" : String(r.vetoed))],
    ["splits planned (not applied)", (r) => (r.splitsPlanned === undefined ? "—" : String(r.splitsPlanned))],
    ["cycles × interval", (r) => (r.cycles === undefined ? "—" : `${r.cycles} × ${r.intervalS.toFixed(0)} s`)],
  ];
  body.innerHTML = "";
  rows.forEach(([label, value]) => {
    const tr = el("tr");
    tr.appendChild(el("th", {}, label));
    runs.forEach(([, r]) => tr.appendChild(el("td", {}, value(r))));
    body.appendChild(tr);
  });
  const line = (r, name, color, key, axis, dotted) => ({type: "scatter", mode: "lines", name, x: r.at, y: r[key],
    line: {color, width: dotted ? 1.5 : 2, dash: dotted ? "dot" : "solid"},
    xaxis: "x", yaxis: axis, legendgroup: name, showlegend: axis === "y"});
  const traces = [];
  runs.forEach(([name, r, color], i) => {
    traces.push(line(r, name, color, "cv", "y", i === 0), line(r, name, color, "maxOverMean", "y2", i === 0));
  });
  Plotly.react(chartId, traces, {
    margin: {t: 10, r: 20, b: 40, l: 60}, height: 420, legend: {orientation: "h"}, hovermode: "x unified",
    grid: {rows: 2, columns: 1, shared_xaxes: true},
    xaxis: {type: "date", title: {text: "time (UTC)"}, anchor: "y2"},
    yaxis: {title: {text: "CV of broker usage"}, rangemode: "tozero", domain: [0.55, 1]},
    yaxis2: {title: {text: "max / mean"}, rangemode: "tozero", domain: [0, 0.45]},
  }, {displayModeBar: false, responsive: true});
}
