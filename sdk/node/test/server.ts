/**
 * A real `watchkeeper serve` for the tests: a fresh data folder, a free port, its first
 * admin token, and tokens of other roles made with `watchkeeper token create`.
 */

import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import type { Client } from "../src/index.js";

/** The repository (this file runs from `sdk/node/dist/test/`). */
export const REPO = resolve(fileURLToPath(import.meta.url), "../../../../..");
/** The command line of the repository's virtualenv, unless `WATCHKEEPER_BIN` names another. */
export const WATCHKEEPER = process.env.WATCHKEEPER_BIN ?? join(REPO, ".venv", "bin", "watchkeeper");
/** Longest the server may take to answer `/healthz`, in milliseconds. */
const START_MS = 30_000;

const run = promisify(execFile);

export interface Served {
  url: string;
  /** The first admin token, printed once by the server. */
  admin: string;
  config: string;
  /** A new token of `role` made with the command line. */
  token(role: "admin" | "reporter" | "viewer", name: string): Promise<string>;
  /** SIGINT, then the exit (SIGKILL if it does not come). */
  stop(): Promise<void>;
}

/** A port nobody listens on now. */
export function freePort(): Promise<number> {
  return new Promise((done, failed) => {
    const probe = createServer();
    probe.once("error", failed);
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      probe.close(() => done(port));
    });
  });
}

/** Start a server on a fresh data folder; `extra` is appended to its configuration. */
export async function serve(extra = ""): Promise<Served> {
  const folder = mkdtempSync(join(tmpdir(), "watchkeeper-node-"));
  const config = join(folder, "watchkeeper.toml");
  writeFileSync(config, `data_dir = ${JSON.stringify(join(folder, "data"))}\n${extra}`);
  const port = await freePort();
  const child = spawn(WATCHKEEPER, ["--config", config, "serve", "--port", String(port)], {
    cwd: folder,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const url = `http://127.0.0.1:${port}`;
  let log = "";
  child.stdout.setEncoding("utf8").on("data", (text: string) => (log += text));
  child.stderr.setEncoding("utf8").on("data", (text: string) => (log += text));
  try {
    await healthy(url, child, () => log);
  } catch (error) {
    await stop(child);
    rmSync(folder, { recursive: true, force: true });
    throw error;
  }
  const admin = /^\s*(wk_\S+)\s*$/m.exec(log)?.[1];
  if (admin === undefined) {
    await stop(child);
    throw new Error(`the server printed no first admin token:\n${log}`);
  }
  return {
    url,
    admin,
    config,
    async token(role, name) {
      const made = await run(WATCHKEEPER, [
        "--config",
        config,
        "token",
        "create",
        "--role",
        role,
        "--name",
        name,
        "--server",
        url,
        "--token",
        admin,
      ]);
      const secret = /^\s*(wk_\S+)\s*$/m.exec(made.stdout)?.[1];
      if (secret === undefined) {
        throw new Error(`token create printed no token:\n${made.stdout}\n${made.stderr}`);
      }
      return secret;
    },
    async stop() {
      await stop(child);
      rmSync(folder, { recursive: true, force: true });
    },
  };
}

async function healthy(url: string, child: ChildProcess, log: () => string): Promise<void> {
  const deadline = Date.now() + START_MS;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) {
      throw new Error(`the server exited with ${child.exitCode}:\n${log()}`);
    }
    try {
      const answer = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(1000) });
      if (answer.ok) {
        return;
      }
    } catch {
      // Not listening yet.
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`the server did not answer /healthz within ${START_MS / 1000} s:\n${log()}`);
}

function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) {
    return Promise.resolve();
  }
  return new Promise((done) => {
    const kill = setTimeout(() => child.kill("SIGKILL"), 15_000);
    child.once("exit", () => {
      clearTimeout(kill);
      done();
    });
    child.kill("SIGINT");
  });
}

/** Ask `check` again until it holds (at most `seconds`); a condition, never a verdict by time. */
export async function until<T>(
  what: string,
  check: () => Promise<T | undefined | null | false>,
  seconds = 20,
): Promise<T> {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const value = await check();
    if (value) {
      return value;
    }
    if (Date.now() > deadline) {
      throw new Error(`waited ${seconds} s for ${what}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The server the suites share and a client for each role, set in the test file's `before`. */
export interface Api {
  server: Served;
  admin: Client;
  reporter: Client;
  viewer: Client;
  /** A viewer whose token the procs suite fills with held waits. */
  waiter: Client;
}
