import type { Edge, Topology, Vertex } from "./types";

const svgNS = "http://www.w3.org/2000/svg";
const width = 800;
const height = 540;

// stateClass groups BGP FSM states by what an operator does about them.
export function stateClass(state: string): string {
  switch (state) {
    case "established":
      return "established";
    case "opensent":
    case "openconfirm":
      return "connecting";
    case "not configured":
      return "unconfigured";
    default:
      return "down"; // idle, connect, active, or a state this page does not know
  }
}

const rank: Record<string, number> = { established: 0, connecting: 1, down: 2, unconfigured: 3 };

interface Point {
  x: number;
  y: number;
}

function ring(ids: string[], cx: number, cy: number, r: number, turn: number, out: Map<string, Point>): void {
  ids.forEach((id, i) => {
    if (ids.length === 1) {
      out.set(id, { x: cx, y: cy });
      return;
    }
    const a = -Math.PI / 2 + turn + (2 * Math.PI * i) / ids.length;
    out.set(id, { x: cx + r * Math.cos(a), y: cy + r * Math.sin(a) });
  });
}

// layout places routers that are not tabby nodes in a row across the top, route reflectors on
// an inner ring and the other nodes around them: the same input gives the same picture, so a
// refresh does not move anything.
export function layout(t: Topology): Map<string, Point> {
  const pos = new Map<string, Point>();
  const external = t.nodes.filter((v) => v.kind === "external").map((v) => v.id);
  const nodes = t.nodes.filter((v) => v.kind === "node");
  const rrs = nodes.filter((v) => v.routeReflector).map((v) => v.id);
  const others = nodes.filter((v) => !v.routeReflector).map((v) => v.id);
  external.forEach((id, i) => pos.set(id, { x: ((i + 1) * width) / (external.length + 1), y: 40 }));
  const cx = width / 2;
  const cy = external.length ? height / 2 + 40 : height / 2;
  const outer = Math.min(width, height) / 2 - (external.length ? 110 : 75);
  // With routers above, no node sits right under them, where their lines to the others pass.
  const ringNodes = rrs.length && others.length ? others : [...rrs, ...others];
  const turn = external.length && ringNodes.length > 1 ? Math.PI / ringNodes.length : 0;
  if (rrs.length && others.length) {
    ring(rrs, cx, cy, rrs.length === 1 ? 0 : outer * 0.35, 0, pos);
  }
  ring(ringNodes, cx, cy, outer, turn, pos);
  return pos;
}

function el<K extends keyof SVGElementTagNameMap>(
  name: K,
  attrs: Record<string, string | number>,
  parent: Element,
): SVGElementTagNameMap[K] {
  const e = document.createElementNS(svgNS, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  parent.appendChild(e);
  return e;
}

function title(parent: Element, text: string): void {
  el("title", {}, parent).textContent = text;
}

export function routes(e: Edge): string {
  return `${e.accepted}/${e.received}↓ ${e.sent}↑`;
}

function edgeTitle(e: Edge): string {
  const lines = [`${e.from} → ${e.to} (${e.address}, ${e.type}): ${e.state}`];
  if (e.since) lines.push(`since ${new Date(e.since).toLocaleString()}`);
  if (e.bfd) lines.push(`BFD ${e.bfd}`);
  for (const f of e.families ?? []) {
    lines.push(`${f.family}${f.state ? ` (${f.state})` : ""}: ${f.accepted}/${f.received} accepted/received, ${f.sent} sent`);
  }
  if (e.info) lines.push(e.info);
  return lines.join("\n");
}

// drawGraph redraws the mesh: a line per pair of speakers, coloured by the worse of the two
// ends' session states, with each end's route counts near that end.
export function drawGraph(svg: SVGSVGElement, t: Topology): void {
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.replaceChildren();
  const pos = layout(t);
  const pairs = new Map<string, Edge[]>();
  for (const e of t.edges) {
    const key = [e.from, e.to].sort().join("|");
    pairs.set(key, [...(pairs.get(key) ?? []), e]);
  }
  const edges = el("g", { class: "edges" }, svg);
  const labels = el("g", { class: "labels" }, svg);
  for (const [key, es] of pairs) {
    const [a, b] = key.split("|");
    const pa = pos.get(a);
    const pb = pos.get(b);
    if (!pa || !pb) continue;
    const worst = es.map((e) => stateClass(e.state)).reduce((x, y) => (rank[y] > rank[x] ? y : x));
    const bfdDown = es.some((e) => e.bfd === "down");
    const g = el("g", { class: `pair ${worst}${bfdDown ? " bfd-down" : ""}`, "data-pair": key, "data-state": worst }, edges);
    el("line", { x1: pa.x, y1: pa.y, x2: pb.x, y2: pb.y }, g);
    title(g, es.map(edgeTitle).join("\n\n"));
    for (const e of es) {
      const from = pos.get(e.from)!;
      const to = pos.get(e.to)!;
      const x = from.x + (to.x - from.x) * 0.3;
      const y = from.y + (to.y - from.y) * 0.3;
      const lg = el("g", { class: `session ${stateClass(e.state)}`, "data-from": e.from, "data-to": e.to, "data-state": e.state }, labels);
      const text = el("text", { x, y: y - 4, "text-anchor": "middle" }, lg);
      text.textContent = e.state === "established" ? routes(e) : e.state;
      if (e.bfd) {
        el("text", { x, y: y + 10, "text-anchor": "middle", class: "bfd" }, lg).textContent = `BFD ${e.bfd}`;
      }
      title(lg, edgeTitle(e));
    }
  }
  const vertices = el("g", { class: "vertices" }, svg);
  for (const v of t.nodes) {
    const p = pos.get(v.id)!;
    drawVertex(vertices, v, p);
  }
}

function drawVertex(parent: Element, v: Vertex, p: Point): void {
  const cls = ["vertex", v.kind];
  if (v.routeReflector) cls.push("rr");
  if (v.kind === "node" && !v.answered) cls.push("silent");
  const g = el("g", { class: cls.join(" "), "data-node": v.id, transform: `translate(${p.x},${p.y})` }, parent);
  if (v.kind === "external") {
    el("rect", { x: -46, y: -18, width: 92, height: 36, rx: 4 }, g);
  } else {
    el("circle", { r: v.routeReflector ? 34 : 28 }, g);
  }
  el("text", { class: "name", "text-anchor": "middle", y: 4 }, g).textContent = v.kind === "external" ? v.name : v.name;
  const sub: string[] = [];
  if (v.asn) sub.push(`AS ${v.asn}`);
  if (v.routerID) sub.push(v.routerID);
  const below = v.kind === "external" ? 32 : v.routeReflector ? 48 : 42;
  el("text", { class: "sub", "text-anchor": "middle", y: below }, g).textContent = sub.join(" · ");
  let extra = below + 14;
  if (v.routeReflector) {
    el("text", { class: "badge", "text-anchor": "middle", y: extra }, g).textContent = "route reflector";
    extra += 14;
  }
  if (v.error) {
    el("text", { class: "error", "text-anchor": "middle", y: extra }, g).textContent = "no answer";
  } else if (v.kind === "node" && v.answered) {
    el("text", { class: "sub", "text-anchor": "middle", y: extra }, g).textContent = `${v.advertised ?? 0} own, ${v.learned ?? 0} learned`;
  }
  const lines = [v.kind === "external" ? `router ${v.name}` : `node ${v.name}`];
  if (v.asn) lines.push(`AS ${v.asn}`);
  if (v.routerID) lines.push(`router ID ${v.routerID}`);
  if (v.error) lines.push(`did not answer: ${v.error}`);
  for (const pr of v.problems ?? []) lines.push(pr);
  title(g, lines.join("\n"));
}

// fillSessions lists every session, each family's routes in its own line.
export function fillSessions(body: HTMLTableSectionElement, t: Topology): void {
  const name = new Map(t.nodes.map((v) => [v.id, v.name]));
  body.replaceChildren(
    ...t.edges.map((e) => {
      const tr = document.createElement("tr");
      tr.className = `session ${stateClass(e.state)}`;
      tr.dataset.from = e.from;
      tr.dataset.to = e.to;
      tr.dataset.state = e.state;
      const fams = (e.families ?? []).map((f) => `${f.family} ${f.accepted}/${f.received}↓ ${f.sent}↑`);
      for (const text of [
        e.from,
        `${name.get(e.to) ?? e.to}${e.to.startsWith("peer/") ? "" : ` (${e.address})`}`,
        e.type,
        e.state,
        e.bfd ?? "",
        fams.length ? fams.join(", ") : routes(e),
        e.info ?? "",
      ]) {
        tr.insertCell().textContent = text;
      }
      return tr;
    }),
  );
}
