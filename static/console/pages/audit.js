// Imported by templates/console/audit.html, which calls audit().

import {post} from "../shared/http.js";
import {overrideSaid, renderPlan} from "../shared/plans.js";

// The audit page: Undo… on a completed unload (operators): a preview of the move back (the same
// vetoes as any unload, which the operator may override), then the confirmed undo.
export function audit(isOperator) {
  const result = document.getElementById("result");
  const dialog = document.getElementById("undo-dialog");
  if (!isOperator || !dialog) return;
  const parts = {
    summary: document.getElementById("undo-summary"),
    actions: document.getElementById("undo-actions"),
    stats: document.getElementById("undo-stats"),
  };
  const force = document.getElementById("undo-force");
  const forceRow = document.getElementById("undo-force-row");
  const confirmButton = document.getElementById("undo-confirm");
  let pending = null;
  const say = (text, cls) => { result.textContent = text; result.className = `result ${cls || ""}`; };

  async function preview(button) {
    pending = button;
    force.checked = false;
    say("Planning the move back…");
    try {
      const body = await post(`/api/audit/${button.dataset.audit}/undo/`, {preview: true});
      document.getElementById("undo-title").textContent =
        `Undo: ${button.dataset.bundle} back to ${button.dataset.from} (now on ${button.dataset.to})`;
      renderPlan(body, parts);
      forceRow.hidden = !body.overridable;
      document.getElementById("undo-force-what").textContent = overrideSaid(body.overrides);
      overrides = body.overrides || [];
      vetoed = body.vetoed;  // a veto: confirmed only with the override ticked
      confirmButton.disabled = vetoed;
      if (body.vetoed) parts.summary.textContent = `Vetoed: ${body.summary}`;
      say("");
      dialog.showModal();
    } catch (err) { say(err.message, "error"); }
  }
  let vetoed = false, overrides = [];
  force.addEventListener("change", () => { confirmButton.disabled = vetoed && !force.checked; });
  document.getElementById("undo-cancel").addEventListener("click", () => dialog.close());
  confirmButton.addEventListener("click", async () => {
    dialog.close();
    if (!pending) return;
    try {
      const body = await post(`/api/audit/${pending.dataset.audit}/undo/`, {
        reason: document.getElementById("undo-reason").value, force: force.checked,
        ...(force.checked ? {overrides} : {}),
      });
      say(`Undone: ${body.bundle} ${body.source} → ${body.destination} (audit row ${body.audit}).`, "ok");
      setTimeout(() => location.reload(), 1200);
    } catch (err) { say(err.message, "error"); }
  });
  document.querySelectorAll("button.undo").forEach((b) => b.addEventListener("click", () => preview(b)));
}
