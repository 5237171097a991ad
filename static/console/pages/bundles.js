// Imported by templates/console/bundles.html, which calls bundles().

import {connect, on} from "../shared/live.js";

// A namespace's bundle table: owners change live (its actions are on the bundle map).
export function bundles() {
  on("balancer.bundle_moved", (p) => {
    const row = document.querySelector(`tr[data-bundle="${CSS.escape(p.target)}"]`);
    if (!row) return;
    row.querySelector(".owner").textContent = p.destination || "unassigned";
    row.classList.add("changed");
  });
  connect();
}
