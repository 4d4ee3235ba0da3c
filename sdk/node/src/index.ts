/** The Node SDK over watchkeeper's HTTP API: start with {@link Client}. */

export { CLIENT_HEADER, Client, Incidents, RunHandle, Runbooks } from "./client.js";
export type { ClientOptions, FailOptions, ProgressOptions, StartOptions } from "./client.js";
export { Busy, DEFAULT_PAUSE_S, MAX_PAUSE_S, MIN_PAUSE_S, WatchkeeperError, retryAfter } from "./errors.js";
export type { RequestOptions } from "./part.js";
export { ABORT_SETTLE_S, ENDED, MAX_ASK_S, Procs, SERVER_GRACE_S } from "./procs.js";
export type { ProcStartOptions } from "./procs.js";
export { Jobs, Runners } from "./queue.js";
export type { RegisterOptions, ShipOptions, SubmitOptions } from "./queue.js";
export { Silences } from "./silences.js";
export type { SilenceOptions } from "./silences.js";
export { MAX_BATCH, Timeline } from "./timeline.js";
export type { SpendOptions } from "./timeline.js";
export type * from "./types.js";
export { DEFAULT_URL, TIMEOUT_S, TOKEN_ENV, URL_ENV } from "./wire.js";
