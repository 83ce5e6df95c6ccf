// The JSON the Go server sends: apis/flow.Record and ui.Topology.

export interface Endpoint {
  namespace?: string;
  pod?: string;
  ip: string;
}

export interface FlowRecord {
  start: string;
  end: string;
  node: string;
  src: Endpoint;
  dst: Endpoint;
  protocol: string;
  dstPort?: number;
  verdict: "allow" | "deny";
  direction: string;
  rule: string;
  connections: number;
  packets: number;
  bytes: number;
}

export interface Vertex {
  id: string;
  kind: "node" | "external";
  name: string;
  routerID?: string;
  asn?: number;
  routeReflector?: boolean;
  answered: boolean;
  error?: string;
  advertised?: number;
  learned?: number;
  problems?: string[];
}

export interface FamilyRoutes {
  family: string;
  state?: string;
  received: number;
  accepted: number;
  sent: number;
}

export interface Edge {
  from: string;
  to: string;
  address: string;
  type: string;
  state: string;
  since?: string;
  info?: string;
  bfd?: string;
  received: number;
  accepted: number;
  sent: number;
  families?: FamilyRoutes[];
}

export interface Topology {
  nodes: Vertex[];
  edges: Edge[];
  errors?: { node: string; error: string }[];
}
