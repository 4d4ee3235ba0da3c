/**
 * `client.silences`: silence matching work for a while, list silences, expire one early.
 *
 * Each matcher given must match: `kind`, `runId`, `title` (a glob over the whole title, or
 * with `titleSyntax: "regex"` a regular expression searched in it) and `origin`
 * (`PLATFORM:CHAT` or `PLATFORM:CHAT/THREAD`).
 */

import { ApiPart } from "./part.js";
import type { Silence } from "./types.js";
import { present } from "./wire.js";

export interface SilenceOptions {
  /** Seconds, or text such as `"1h"` or `"30m"`. */
  duration: string | number;
  kind?: string;
  runId?: string;
  title?: string;
  titleSyntax?: "glob" | "regex";
  origin?: string;
  comment?: string;
}

/** Create, list and expire silences (creating and expiring need an admin token). */
export class Silences extends ApiPart {
  /** Silence matching work from now for `duration`. */
  add(options: SilenceOptions): Promise<Silence> {
    return this.post<Silence>("/api/v1/silences", {
      ...present({ kind: options.kind, run_id: options.runId, title: options.title, origin: options.origin }),
      duration: options.duration,
      comment: options.comment ?? "",
      title_syntax: options.titleSyntax ?? "glob",
    });
  }

  /** Silences, newest first: the active ones, or with `all` ended ones too. */
  list(options: { all?: boolean } = {}): Promise<Silence[]> {
    return this.listed<Silence>("/api/v1/silences", "silences", { state: options.all ? "all" : "active" });
  }

  /** One silence, with the ids of the incidents it held back under `incidents`. */
  get(silenceId: number): Promise<Silence> {
    return this.client.requestObject<Silence>("GET", `/api/v1/silences/${silenceId}`);
  }

  /** End a silence now. */
  expire(silenceId: number): Promise<Silence> {
    return this.client.requestObject<Silence>("DELETE", `/api/v1/silences/${silenceId}`);
  }
}
