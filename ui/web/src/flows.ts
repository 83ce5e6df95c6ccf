import type { Endpoint, FlowRecord } from "./types";

// The page keeps the newest rows only: a busy cluster must not grow the page without bound.
const maxRows = 500;

export interface FlowFilter {
  from: string;
  to: string;
  verdict: string;
  node: string;
}

function endpoint(e: Endpoint): string {
  return e.pod ? `${e.namespace}/${e.pod}` : e.ip;
}

function cell(tr: HTMLTableRowElement, text: string, cls?: string): HTMLTableCellElement {
  const td = tr.insertCell();
  td.textContent = text;
  if (cls) td.className = cls;
  return td;
}

function time(s: string): string {
  const d = new Date(s);
  return Number.isNaN(d.getTime()) ? s : d.toLocaleTimeString([], { hour12: false });
}

export function flowRow(r: FlowRecord): HTMLTableRowElement {
  const tr = document.createElement("tr");
  tr.className = `flow ${r.verdict}`;
  tr.dataset.verdict = r.verdict;
  tr.dataset.from = endpoint(r.src);
  tr.dataset.to = endpoint(r.dst);
  tr.dataset.rule = r.rule;
  cell(tr, time(r.end), "time");
  cell(tr, r.node, "node");
  cell(tr, endpoint(r.src), "ep");
  cell(tr, endpoint(r.dst), "ep");
  cell(tr, r.dstPort ? `${r.protocol}/${r.dstPort}` : r.protocol);
  cell(tr, r.verdict, "verdict");
  const rule = cell(tr, r.rule, "rule");
  rule.title = `${r.direction} policy of the ${r.direction === "egress" ? "source" : "destination"}`;
  cell(tr, String(r.connections), "num");
  cell(tr, String(r.packets), "num");
  cell(tr, String(r.bytes), "num");
  return tr;
}

// FlowLog follows /api/flows with the current filter, newest row first.
export class FlowLog {
  private es?: EventSource;
  private body: HTMLTableSectionElement;

  constructor(
    table: HTMLTableElement,
    private statusEl: HTMLElement,
    private countEl: HTMLElement,
  ) {
    this.body = table.tBodies[0];
  }

  follow(f: FlowFilter): void {
    this.es?.close();
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(f)) if (v) q.set(k, v);
    const url = `api/flows?${q}`;
    const es = new EventSource(url);
    this.es = es;
    this.body.replaceChildren();
    this.count();
    this.status("connecting…", "");
    // The server sends the records it keeps first, again after a reconnection: start afresh.
    es.onopen = () => {
      this.body.replaceChildren();
      this.count();
      this.status("live", "ok");
    };
    es.onerror = () => {
      if (this.es !== es) return;
      if (es.readyState !== EventSource.CLOSED) {
        this.status("reconnecting…", "warn");
        return;
      }
      // EventSource gives up on an answer other than a stream, and does not say why: a
      // refused filter is a 400 whose text names the field.
      void this.why(url, es);
    };
    es.addEventListener("failure", (ev) => {
      const msg = JSON.parse((ev as MessageEvent).data) as string;
      this.status(msg, "error");
    });
    es.addEventListener("flow", (ev) => {
      const r = JSON.parse((ev as MessageEvent).data) as FlowRecord;
      this.body.insertBefore(flowRow(r), this.body.firstChild);
      while (this.body.rows.length > maxRows) this.body.deleteRow(-1);
      this.count();
    });
  }

  private async why(url: string, es: EventSource): Promise<void> {
    const ctl = new AbortController();
    try {
      const res = await fetch(url, { signal: ctl.signal });
      const text = res.ok ? "the flow stream ended" : (await res.text()).trim();
      if (this.es === es) this.status(text, "error");
    } catch (err) {
      if (this.es === es) this.status(`flows: ${err instanceof Error ? err.message : String(err)}`, "error");
    } finally {
      ctl.abort();
    }
  }

  private count(): void {
    const rows = this.body.rows.length;
    const denied = this.body.querySelectorAll("tr.deny").length;
    this.countEl.textContent = `${rows} flows, ${denied} denied`;
  }

  private status(text: string, cls: string): void {
    this.statusEl.textContent = text;
    this.statusEl.className = `status ${cls}`;
  }
}
