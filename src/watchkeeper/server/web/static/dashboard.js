// The dashboard's only script: acting forms answer in place, live parts follow /web/stream,
// task icons follow task.updated, process logs follow their stream. No build step.
"use strict";

const wk = (() => {
  const WAITING = new Set(["awaiting_runner", "provisioning", "runners_busy"]);
  const PROBLEMS = new Set([
    "no_runner", "runner_offline", "concurrency_cap", "compute_cap", "provision_failed",
  ]);
  const TERMINAL = { succeeded: "completed", failed: "failed", cancelled: "cancelled" };
  const INTERRUPTED = "Interrupted by restart";
  const LABELS = {
    completed: "Completed", failed: "Failed", cancelled: "Cancelled",
    approval: "Waiting for approval", running: "Running", interrupted: INTERRUPTED,
    stuck: "Stuck: its lease lapsed", waiting: "Waiting", warning: "Blocked", queued: "Queued",
  };

  // The same precedence as watchkeeper/server/web/tasks.py.
  function taskIcon(task) {
    const status = task.status || "";
    if (TERMINAL[status]) return TERMINAL[status];
    if (task.pending_approval || status === "waiting") return "approval";
    if (status === "running") return "running";
    if (task.interrupted || task.interrupted_at) return "interrupted";
    if (status === "stuck") return "stuck";
    const code = task.blocked && task.blocked.code;
    if (WAITING.has(code)) return "waiting";
    if (PROBLEMS.has(code)) return "warning";
    return "queued";
  }

  function taskLabel(task) {
    const name = taskIcon(task);
    if ((name === "waiting" || name === "warning") && task.blocked && task.blocked.message) {
      return task.blocked.message;
    }
    return LABELS[name];
  }

  function stateOf(span) {
    let blocked = null;
    if (span.dataset.blocked) {
      try { blocked = JSON.parse(span.dataset.blocked); } catch (_e) { blocked = null; }
    }
    return {
      id: span.dataset.taskId,
      status: span.dataset.status,
      interrupted: span.dataset.interrupted === "1",
      blocked,
    };
  }

  function draw(span, task) {
    const name = taskIcon(task);
    const label = taskLabel(task);
    span.dataset.status = task.status || "";
    span.dataset.interrupted = task.interrupted || task.interrupted_at ? "1" : "";
    span.dataset.blocked = task.blocked ? JSON.stringify(task.blocked) : "";
    if (span.dataset.icon !== name) {
      const template = document.getElementById(`icon-${name}`);
      span.replaceChildren(...(template ? template.content.cloneNode(true).childNodes : []));
      span.className = `ticon ticon-${name}`;
      span.dataset.icon = name;
    }
    span.setAttribute("aria-label", label);
    span.setAttribute("title", label);
  }

  // An update that leaves out `interrupted` keeps the marker the task had.
  function applyTaskUpdate(update) {
    const id = CSS.escape(String(update.id));
    for (const span of document.querySelectorAll(`[data-task-id="${id}"]`)) {
      const merged = { ...stateOf(span), ...update };
      if (!("interrupted" in update) && !("interrupted_at" in update)) {
        merged.interrupted = stateOf(span).interrupted;
      }
      draw(span, merged);
    }
    for (const badge of document.querySelectorAll(`[data-task-status="${id}"]`)) {
      badge.textContent = update.status;
      badge.className = `badge badge-${update.status}`;
    }
    for (const reason of document.querySelectorAll(`[data-task-reason="${id}"]`)) {
      const blocked = update.status === "queued" && update.blocked;
      reason.textContent = blocked ? update.blocked.message : "";
    }
  }

  function csrf() {
    const meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.content : "";
  }

  function say(form, message, ok) {
    const output = form.querySelector("output.answer");
    if (output) output.textContent = message;
    const log = document.getElementById("answers");
    if (log) {
      const line = document.createElement("p");
      line.className = ok ? "answer-ok" : "answer-lost";
      line.textContent = message;
      log.prepend(line);
    }
  }

  async function submit(event) {
    const form = event.target.closest("form[data-fetch]");
    if (!form) return;
    event.preventDefault();
    if (form.dataset.confirm && !window.confirm(form.dataset.confirm)) return;
    const body = new URLSearchParams(new FormData(form, event.submitter));
    for (const button of form.querySelectorAll("button")) button.disabled = true;
    try {
      const response = await fetch(form.getAttribute("action"), {
        method: "POST",
        body,
        credentials: "same-origin",
        headers: { Accept: "application/json", "X-CSRF-Token": csrf() },
      });
      const answer = await response.json();
      say(form, answer.message, Boolean(answer.ok));
    } catch (error) {
      say(form, `no answer from the server: ${error}`, false);
    } finally {
      for (const button of form.querySelectorAll("button")) button.disabled = false;
    }
  }

  // Live parts: an element with data-src and data-on="event ..." is fetched again on those events.
  const busy = new Map();
  async function refresh(element) {
    const id = element.id;
    if (busy.get(id)) { busy.set(id, "again"); return; }
    busy.set(id, "yes");
    try {
      const response = await fetch(element.dataset.src, { credentials: "same-origin" });
      if (response.ok) {
        const current = document.getElementById(id);
        const open = current ? [...current.querySelectorAll("details")].map((d) => d.open) : [];
        const holder = document.createElement("div");
        holder.innerHTML = await response.text();
        const fresh = holder.querySelector(`#${CSS.escape(id)}`) || holder;
        if (current && fresh.id === id) {
          current.replaceWith(fresh);
        } else if (current) {
          current.replaceChildren(...holder.childNodes);
        }
        const now = document.getElementById(id);
        if (now) now.querySelectorAll("details").forEach((d, i) => { if (open[i]) d.open = true; });
      }
    } finally {
      const again = busy.get(id) === "again";
      busy.delete(id);
      if (again) refresh(document.getElementById(id));
    }
  }

  function refreshOn(event) {
    for (const element of document.querySelectorAll("[data-src][data-on]")) {
      if (element.dataset.on.split(" ").includes(event)) refresh(element);
    }
  }

  function listen() {
    if (!document.querySelector('meta[name="csrf-token"]')?.content) return;
    const source = new EventSource("/web/stream");
    const seen = {};
    const onSig = (name) => (message) => {
      const data = JSON.parse(message.data);
      if (seen[name] === data.sig) return;
      seen[name] = data.sig;
      refreshOn(name);
    };
    source.addEventListener("incidents", onSig("incidents"));
    source.addEventListener("runs", onSig("runs"));
    source.addEventListener("topology", onSig("topology"));
    source.addEventListener("task.updated", (message) => {
      applyTaskUpdate(JSON.parse(message.data));
      refreshOn("task.updated");
    });
    // Events were lost (a restart, a long sleep): live parts are fetched again, and a page
    // whose task icons are not in one of them is loaded again.
    source.addEventListener("resync", () => {
      const drawn = [...document.querySelectorAll("[data-task-id]")];
      if (drawn.some((icon) => !icon.closest("[data-src]"))) { window.location.reload(); return; }
      for (const name of ["incidents", "runs", "topology", "task.updated"]) refreshOn(name);
    });
    // A page drew what it drew before it listened: anything seen differently is fetched again.
    source.addEventListener("hello", (message) => {
      const sigs = JSON.parse(message.data);
      for (const [name, sig] of Object.entries(sigs)) {
        if (seen[name] !== sig) { seen[name] = sig; refreshOn(name); }
      }
      document.body.dataset.stream = "open";
    });
    wk.source = source;
  }

  function followLog() {
    const pre = document.querySelector("pre[data-follow]");
    if (!pre) return;
    const state = document.getElementById("log-state");
    const source = new EventSource(pre.dataset.follow);
    source.addEventListener("log", (message) => {
      const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
      pre.append(document.createTextNode(message.data));
      if (atEnd) pre.scrollTop = pre.scrollHeight;
    });
    source.addEventListener("end", (message) => {
      source.close();
      if (state) state.textContent = `ended: ${message.data}`;
      const badge = document.getElementById("proc-status");
      if (badge) { badge.textContent = message.data; badge.className = `badge badge-${message.data}`; }
    });
  }

  document.addEventListener("submit", submit);
  document.addEventListener("DOMContentLoaded", () => { listen(); followLog(); });
  return { taskIcon, taskLabel, applyTaskUpdate, refreshOn, source: null };
})();
window.wk = wk;
