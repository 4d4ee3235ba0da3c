/**
 * The shapes of the server's answers. Fields keep the API's own names (snake_case), as
 * the JSON comes; each type names the fields a caller most often reads and lets the
 * rest through, so a newer server's extra fields are never lost.
 */

/** Any JSON object the API answers. */
export type JsonObject = { [key: string]: unknown };

/** Where a piece of work was asked for: a chat platform, a chat, maybe a thread. */
export interface Origin {
  platform: string;
  chat_id: string;
  thread_id?: string;
  [key: string]: unknown;
}

/** A reported run, as the reports answer it. */
export interface Run extends JsonObject {
  kind: string;
  run_id: string;
  title: string;
  status: string;
  state_token: string;
  step: string | null;
  failure: { reason: string; fingerprint: string | null } | null;
  /** When the latest progress report came, whether or not it moved the run. */
  reported_at?: string | null;
  /** Progress reports in a row that said the same step and counters (0: none to compare). */
  repeats?: number;
  /** The budget and expected time the latest report gave its step. */
  step_budget_s?: number | null;
  step_expected_s?: number | null;
  done?: number | null;
  total?: number | null;
}

/** One run as `getRun` reads it: with what the judge says and its incident. */
export interface RunDetail extends Run {
  verdict: { condition: string; since: string; reason: string; paged: boolean } | null;
  incident_id: number | null;
  decision: JsonObject | null;
  card: JsonObject | null;
}

/** What needs attention, what runs and (with `all`) what finished. */
export interface Overview extends JsonObject {
  generated_at: string;
  attention: JsonObject[];
  running: JsonObject[];
  finished: JsonObject[];
}

/** The replicas sharing the server's database. */
export interface Replicas extends JsonObject {
  leader: string | null;
  epoch: number;
  replicas: JsonObject[];
}

export interface Incident extends JsonObject {
  id: number;
  kind: string;
  run_id: string;
  condition: string;
  status: string;
  state_token: string;
}

export interface Runbook extends JsonObject {
  name: string;
  action: string;
  enabled: boolean;
}

/** A process run on the server's host. */
export interface ProcRun extends JsonObject {
  id: string;
  name: string | null;
  argv: string[];
  status: string;
  exit_code: number | null;
  effective_status?: string;
}

/** A piece of a process run's output, from `logFrom`. */
export interface LogPiece extends JsonObject {
  text: string;
  offset: number;
  next_offset: number;
  size: number;
  ended: boolean;
}

export interface AbortResult extends JsonObject {
  outcome: "signaled" | "already_exited" | "not_ours" | string;
  detail: string | null;
  run: ProcRun;
}

export interface Park extends JsonObject {
  id: number;
  session: string;
  until: string;
  state: string;
}

export interface Task extends JsonObject {
  id: string;
  job_id: string;
  status: string;
  attempt: number;
  payload: JsonObject;
  lease_token?: string;
  blocked?: JsonObject | null;
}

export interface Job extends JsonObject {
  id: string;
  title: string;
  org: string;
  fleet: string;
  status: string;
  payload: JsonObject;
  /** The pull request or issue it came from (`github:OWNER/REPO#N`), if any. */
  origin: string | null;
  tasks: Task[];
}

/** The answer of a cancel, retry or delete: how many tasks it touched. */
export interface Affected extends JsonObject {
  affected: number;
}

export interface Runner extends JsonObject {
  id: string;
  fleet: string;
  org: string | null;
  capacity: number;
  alive: boolean;
}

/** One outcome of `runners.report`. */
export interface Outcome {
  task_id: string;
  lease_token: string;
  exit_code?: number | null;
  reason?: string;
  fingerprint?: string;
}

export interface Silence extends JsonObject {
  id: number;
  matchers: JsonObject;
  comment: string;
  state: string;
  ends_at: string;
}

/** A timeline event to store: `phase` and what else is known (see the API's docs). */
export interface TimelineEventIn {
  phase: string;
  at?: string | Date;
  [key: string]: unknown;
}

/** A stored timeline event. */
export interface TimelineEvent extends JsonObject {
  id: number;
  phase: string;
  at: string;
}

export interface Emitted extends JsonObject {
  accepted: number;
  cost: number;
  unpriced: number;
}

export interface SpendRow extends JsonObject {
  cost: number;
  calls: number;
  unpriced: number;
}

export interface Spend extends JsonObject {
  by: string;
  groups: (SpendRow & { key: string })[];
  totals: SpendRow;
}
