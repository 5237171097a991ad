// Elements, and figures and times in words, as every page writes them.

// Binary units, as the core's explanations write them.
export const fmtBytes = (n) => {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${i ? n.toFixed(1) : Math.round(n)} ${units[i]}/s`;
};

export const utc = (iso) => iso ? `${iso.slice(0, 10)} ${iso.slice(11, 19)} UTC` : "never";
// A CV in words: below two serving brokers there is no spread to measure (one broker's CV
// is 0 however loaded it is), said instead of a reassuring 0.000.
export const cvText = (cv, serving, digits = 3) => (serving !== undefined && serving < 2)
  ? `— (${serving} serving broker${serving === 1 ? "" : "s"})` : cv.toFixed(digits);

// A drain's progress in words (selectors.drain_progress): what is left before "drained".
export const drainSaid = (d) => {
  if (!d) return "";
  const since = d.since ? ` since ${d.since.slice(11, 19)} UTC` : "";
  const failed = d.failed ? `, ${d.failed} failed` : "";
  if (d.state === "drained") {
    if (!(d.bundles || d.queued || d.inFlight)) return `drained${since}: no bundle, nothing in flight${failed}`;
    return `drained${since}, yet ${d.bundles} bundle${d.bundles === 1 ? "" : "s"} on it, ${d.queued} queued, ${d.inFlight} in flight${failed}`;
  }
  return `draining${since}: ${d.bundles} bundle${d.bundles === 1 ? "" : "s"} left, ${d.queued} queued, ` +
    `${d.inFlight} in flight${failed}`;
};
export const pct = (f) => `${(f * 100).toFixed(1)} %`;
export function el(tag, attrs, text) {
  const node = document.createElement(tag);
  Object.entries(attrs || {}).forEach(([k, v]) => { if (v !== undefined && v !== null) node.setAttribute(k, v); });
  if (text !== undefined) node.textContent = text;
  return node;
}
