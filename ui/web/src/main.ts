import "./style.css";
import { FlowLog, type FlowFilter } from "./flows";
import { drawGraph, fillSessions } from "./topology";
import type { Topology } from "./types";

const pollMs = 3000;

const form = document.getElementById("filters") as HTMLFormElement;
const log = new FlowLog(
  document.getElementById("flows") as HTMLTableElement,
  document.getElementById("flow-status")!,
  document.getElementById("flow-count")!,
);

function readFilter(): FlowFilter {
  const d = new FormData(form);
  const s = (k: string) => String(d.get(k) ?? "").trim();
  return { from: s("from"), to: s("to"), verdict: s("verdict"), node: s("node") };
}

// The filter lives in the address too, so a link opens the same view (?verdict=deny).
function applyFilter(): void {
  const f = readFilter();
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(f)) if (v) q.set(k, v);
  history.replaceState(null, "", q.size ? `?${q}` : location.pathname);
  log.follow(f);
}

const initial = new URLSearchParams(location.search);
for (const k of ["from", "to", "verdict", "node"]) {
  const input = form.elements.namedItem(k) as HTMLInputElement | HTMLSelectElement | null;
  const v = initial.get(k);
  if (input && v) input.value = v;
}
let timer: number | undefined;
form.addEventListener("input", () => {
  clearTimeout(timer);
  timer = window.setTimeout(applyFilter, 300);
});
form.addEventListener("submit", (ev) => {
  ev.preventDefault();
  clearTimeout(timer);
  applyFilter();
});
applyFilter();

const graph = document.getElementById("graph") as unknown as SVGSVGElement;
const sessions = (document.getElementById("sessions") as HTMLTableElement).tBodies[0];
const topoStatus = document.getElementById("topology-status")!;

async function refresh(): Promise<void> {
  try {
    const res = await fetch("api/topology", { cache: "no-store" });
    if (!res.ok) throw new Error(`${res.status}: ${(await res.text()).trim()}`);
    const t = (await res.json()) as Topology;
    drawGraph(graph, t);
    fillSessions(sessions, t);
    const silent = t.errors?.length ? `, ${t.errors.length} not answering` : "";
    const up = t.edges.filter((e) => e.state === "established").length;
    topoStatus.textContent = `${t.nodes.filter((v) => v.kind === "node").length} nodes, ${up}/${t.edges.length} sessions established${silent} · ${new Date().toLocaleTimeString([], { hour12: false })}`;
    topoStatus.className = `status ${silent || up < t.edges.length ? "warn" : "ok"}`;
    document.body.dataset.topologyVersion = String(Number(document.body.dataset.topologyVersion ?? 0) + 1);
  } catch (err) {
    topoStatus.textContent = `topology: ${err instanceof Error ? err.message : String(err)}`;
    topoStatus.className = "status error";
  } finally {
    window.setTimeout(refresh, pollMs);
  }
}
void refresh();
