// The failure domains page, imported by templates/console/domains.html, which calls domains()
// with the page's data: each domain's brokers as cards, the anti-affinity groups and their
// violations; Drain/Activate for operators.

import {connect, liveRefresh} from "../shared/live.js";
import {drainSaid, el, fmtBytes, utc} from "../shared/dom.js";
import {stateDialog} from "../shared/plans.js";

// Broker cards a failure domain shows before "Show all" (a domain of 200 brokers stays a page).
const DOMAIN_CARDS = 24;

export function domains(initial, isOperator) {
  let data = initial;
  const result = document.getElementById("result");
  const expanded = new Set();  // the domains whose every card is shown
  const filter = document.getElementById("domains-filter");
  if (filter) filter.addEventListener("input", () => draw());

  function markers(broker) {
    return data.groups.filter((g) => g.brokers[broker]).map((g) => ({group: g.group, namespaces: g.brokers[broker],
      violated: g.violations.some((v) => v.broker === broker)}));
  }

  function draw() {
    document.getElementById("domains-note").textContent =
      `failure domains ${data.failureDomainsEnabled ? "enabled" : "disabled"} (failureDomainsEnabled); as of ${utc(data.at)}`;
    const root = document.getElementById("domains");
    root.innerHTML = "";
    const violatedDomains = new Set(data.groups.flatMap((g) => g.violations.filter((v) => v.domain).map((v) => v.domain)));
    const violating = new Set(data.groups.flatMap((g) => g.violations.map((v) => v.broker)));
    // A broker that needs a look (not active, draining, hot, or holding a violation) comes first.
    const attention = (b) => (b.state !== "active" || b.drain || b.score >= 85 || violating.has(b.name) ? 0 : 1);
    const q = filter ? filter.value.trim().toLowerCase() : "";
    data.domains.forEach((domain) => {
      const column = el("section", {class: `domain${violatedDomains.has(domain.name) ? " violated" : ""}`, "data-domain": domain.name});
      const serving = domain.brokers.filter((b) => b.state === "active").length;
      column.appendChild(el("h2", {}, `${domain.name}`));
      column.appendChild(el("p", {class: "muted"}, `${domain.brokers.length} brokers, ${serving} active`));
      const kept = domain.brokers.filter((b) => !q || b.name.toLowerCase().includes(q) || b.state.includes(q))
        .sort((a, b) => attention(a) - attention(b) || (a.name < b.name ? -1 : 1));
      const all = expanded.has(domain.name) || kept.length <= DOMAIN_CARDS;
      const shown = all ? kept : kept.slice(0, DOMAIN_CARDS);
      if (q) column.appendChild(el("p", {class: "muted"}, `${kept.length} whose name or state contains “${q}”`));
      shown.forEach((b) => {
        const card = el("article", {class: `broker-card state-${b.state}`, "data-broker": b.name});
        const head = el("header");
        const title = el("b");
        title.appendChild(el("a", {href: `/brokers/${encodeURIComponent(b.name)}/`}, b.name));
        head.appendChild(title);
        head.appendChild(el("span", {class: "rank", title: "rank, least loaded first"}, `#${b.rank}`));
        head.appendChild(el("span", {class: `state ${b.state}`}, b.state));
        card.appendChild(head);
        const bar = el("div", {class: "usage", title: `weighted max usage ${b.score} %`});
        const fill = el("div", {class: "fill"});
        fill.style.width = `${Math.min(100, b.score)}%`;
        fill.classList.toggle("hot", b.score >= 85);
        bar.appendChild(fill);
        card.appendChild(bar);
        card.appendChild(el("p", {}, `usage ${b.score} % · CPU ${b.cpu} % · ${b.bundles} bundles · ${fmtBytes(b.throughput)}`));
        if (b.drain) card.appendChild(el("p", {class: `drain-progress ${b.drain.state}`, role: "status"}, drainSaid(b.drain)));
        const tags = el("p", {class: "tags"});
        markers(b.name).forEach((m) => tags.appendChild(el("span", {class: `tag${m.violated ? " violated" : ""}`,
          title: m.namespaces.join(", ")}, `⚑ ${m.group}: ${m.namespaces.length} ns`)));
        card.appendChild(tags);
        if (isOperator) {
          const actions = el("p", {class: "actions"});
          if (b.state === "active") actions.appendChild(el("button", {class: "drain", "data-broker": b.name}, "Drain…"));
          else actions.appendChild(el("button", {class: "activate", "data-broker": b.name}, "Activate…"));
          card.appendChild(actions);
        }
        column.appendChild(card);
      });
      if (kept.length > DOMAIN_CARDS) {
        column.appendChild(el("button", {class: "more", "data-domain": domain.name, type: "button"},
          all ? `Show the first ${DOMAIN_CARDS} only` : `Show all ${kept.length} brokers (${kept.length - DOMAIN_CARDS} more)`));
      }
      root.appendChild(column);
    });
    root.querySelectorAll("button.more").forEach((button) => button.addEventListener("click", () => {
      const name = button.dataset.domain;
      if (expanded.has(name)) expanded.delete(name); else expanded.add(name);
      draw();
    }));
    const violations = document.getElementById("violations");
    violations.innerHTML = "";
    const all = data.groups.flatMap((g) => g.violations);
    if (all.length) {
      violations.appendChild(el("h2", {}, `${all.length} anti-affinity violation${all.length > 1 ? "s" : ""}`));
      const ul = el("ul");
      all.forEach((v) => ul.appendChild(el("li", {}, v.reason)));
      violations.appendChild(ul);
    } else {
      violations.appendChild(el("p", {class: "ok"}, "No anti-affinity violation: every group is spread as Pulsar's placement filter wants."));
    }
    const body = document.querySelector("#groups tbody");
    body.innerHTML = "";
    data.groups.forEach((g) => {
      const tr = el("tr", {"data-group": g.group});
      [g.group, g.namespaces.join(", "),
       Object.entries(g.brokers).map(([b, ns]) => `${b} (${ns.length})`).join(", ") || "none yet",
       Object.entries(g.domains).map(([d, n]) => `${d}: ${n}`).join(", "),
       g.violations.length ? g.violations.map((v) => v.reason).join("; ") : "none"]
        .forEach((v) => tr.appendChild(el("td", {}, v)));
      body.appendChild(tr);
    });
    if (!data.groups.length) body.appendChild(el("tr")).appendChild(el("td", {colspan: 5, class: "muted"}, "No namespace has an anti-affinity group."));
    root.querySelectorAll("button.drain, button.activate").forEach((button) =>
      button.addEventListener("click", () => openState(button.dataset.broker, button.classList.contains("drain") ? "drain" : "activate")));
  }

  const openState = stateDialog(result, () => refreshNow());
  const refreshNow = liveRefresh("/api/domains/", (fresh) => { data = fresh; draw(); }, 2000);
  draw();
  connect();
}
