// Imported by templates/console/decision.html, which calls decision() with the page's data.

// A decision's broker usage: before, predicted after, observed at the next tick (percent).
export function decision(d) {
  const names = d.brokers.map((b) => b.name);
  const bar = (key, name, colour) => ({type: "bar", name, x: names, marker: {color: colour},
    y: d.brokers.map((b) => (b[key] === null || b[key] === undefined ? null : b[key] * 100))});
  const traces = [bar("before", "before", "#9db4d8"), bar("after", "predicted after", "#2456a6")];
  if (d.brokers.some((b) => b.observed !== null && b.observed !== undefined)) traces.push(bar("observed", "observed at the next tick", "#f28e2b"));
  const shapes = d.before.avgUsage === null || d.before.avgUsage === undefined ? [] : [{type: "line", xref: "paper", x0: 0, x1: 1,
    y0: d.before.avgUsage * 100, y1: d.before.avgUsage * 100, line: {dash: "dash", color: "#667"}}];
  Plotly.newPlot("usage-chart", traces, {barmode: "group", margin: {t: 10, r: 10, b: 40, l: 60}, shapes,
    yaxis: {title: {text: "usage %"}, rangemode: "tozero"}, legend: {orientation: "h"}}, {displayModeBar: false, responsive: true});
}
