// The dashboard's script: acting forms answer in place, live parts follow /web/stream (read by
// event_stream.js),
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
    markTab();
    for (const badge of document.querySelectorAll(`[data-task-status="${id}"]`)) {
      badge.textContent = update.status;
      badge.className = `badge badge-${update.status}`;
    }
    for (const fact of document.querySelectorAll(`[data-task-fact="${id}"]`)) {
      fact.textContent = factOf(update);
    }
    for (const reason of document.querySelectorAll(`[data-task-reason="${id}"]`)) {
      const blocked = update.status === "queued" && update.blocked;
      reason.textContent = blocked ? update.blocked.message : "";
    }
  }

  // A task page's "Status" fact, as the server writes it (status, step, exit code).
  function factOf(task) {
    let text = task.status || "";
    if (task.step) text += ` · ${task.step}`;
    if (task.exit_code !== null && task.exit_code !== undefined) text += ` · exit ${task.exit_code}`;
    return text;
  }

  function csrf() {
    const meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.content : "";
  }

  // An answer shows once: in the page's log of answers when it has one (it outlives live
  // refreshes of the form), else beside the form.
  function say(form, message, ok) {
    const log = document.getElementById("answers");
    const output = form.querySelector("output.answer");
    if (output && !log) output.textContent = message;
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
    // The press moved what the part around it shows (its buttons follow the new state).
    const part = form.closest("[data-src]");
    if (part && part.id) refresh(part);
  }

  const FOCUSABLE = "a[href], button, summary, input, select, textarea, [tabindex]";

  // A phone shows tables as stacked cards: each cell is labelled with its column's heading.
  function labelCells(root) {
    for (const table of root.querySelectorAll("table")) {
      const heads = [...table.querySelectorAll("thead th")].map((th) => th.textContent.trim());
      for (const row of table.querySelectorAll("tbody tr")) {
        [...row.children].forEach((cell, i) => {
          if (cell.tagName === "TD" && heads[i] && !cell.hasAttribute("colspan")) {
            cell.dataset.label = heads[i];
          }
        });
      }
    }
  }

  // The tab's icon (what a phone's task switcher shows) and title turn red while the page
  // shows a task a restart interrupted.
  const TAB_ICON = (fill) => "data:image/svg+xml," + encodeURIComponent(
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><circle cx="8" cy="8" r="7" fill="${fill}"/>`
    + (fill === "#d32f2f" ? '<rect x="7" y="3.5" width="2" height="6" fill="#fff"/><rect x="7" y="11" width="2" height="2" fill="#fff"/>' : "")
    + "</svg>");
  const ALERT = "(!) ";
  function markTab() {
    const link = document.getElementById("favicon");
    if (!link) return;
    const alert = Boolean(document.querySelector(".ticon-interrupted"));
    const href = TAB_ICON(alert ? "#d32f2f" : "#3949ab");
    if (link.getAttribute("href") !== href) link.setAttribute("href", href);
    const plain = document.title.startsWith(ALERT) ? document.title.slice(ALERT.length) : document.title;
    const title = alert ? ALERT + plain : plain;
    if (document.title !== title) document.title = title;
  }

  // The phone's menu button shows and hides the navigation; Escape closes it and the bell,
  // and gives focus back to the button that opened them.
  function menus() {
    const button = document.getElementById("menu-btn");
    const nav = document.getElementById("nav");
    if (button && nav) {
      button.hidden = false;
      button.addEventListener("click", () => {
        const open = button.getAttribute("aria-expanded") !== "true";
        button.setAttribute("aria-expanded", String(open));
        nav.classList.toggle("open", open);
      });
    }
    document.addEventListener("keydown", (event) => {
      if (event.key !== "Escape") return;
      const bell = document.querySelector("details.bell[open]");
      if (bell) {
        bell.open = false;
        bell.querySelector("summary").focus();
        return;
      }
      if (button && nav && nav.classList.contains("open")) {
        nav.classList.remove("open");
        button.setAttribute("aria-expanded", "false");
        button.focus();
      }
    });
  }

  // Live parts: an element with data-src and data-on="event ..." is fetched again on those events.
  const busy = new Map();
  async function refresh(element) {
    const id = element.id;
    if (busy.get(id)) { busy.set(id, "again"); return; }
    busy.set(id, "yes");
    try {
      let url = element.dataset.src;
      const keep = element.dataset.keep;
      if (keep) {
        // Rows the viewer has on screen stay there while they still exist (see keep_shown).
        const attribute = `data-${keep.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
        const ids = [...element.querySelectorAll(`[${attribute}]`)].map((e) => e.getAttribute(attribute));
        if (ids.length) url += `${url.includes("?") ? "&" : "?"}shown=${encodeURIComponent(ids.join(","))}`;
      }
      const response = await fetch(url, { credentials: "same-origin" });
      if (refused(response)) {
        sessionEnded();
        return;
      }
      if (response.ok) {
        const current = document.getElementById(id);
        const open = current ? [...current.querySelectorAll("details")].map((d) => d.open) : [];
        // Focus inside the part (the bell's button, a row's button) stays where it was.
        const focusables = current ? [...current.querySelectorAll(FOCUSABLE)] : [];
        const focused = focusables.indexOf(document.activeElement);
        const holder = document.createElement("div");
        holder.innerHTML = await response.text();
        const fresh = holder.querySelector(`#${CSS.escape(id)}`) || holder;
        if (current && fresh.id === id) {
          current.replaceWith(fresh);
        } else if (current) {
          current.replaceChildren(...holder.childNodes);
        }
        const now = document.getElementById(id);
        if (now) {
          now.querySelectorAll("details").forEach((d, i) => { if (open[i]) d.open = true; });
          labelCells(now);
          if (focused >= 0) {
            const again = now.querySelectorAll(FOCUSABLE)[focused];
            if (again) again.focus();
          }
        }
        markTab();
      }
    } finally {
      const again = busy.get(id) === "again";
      busy.delete(id);
      if (again) refresh(document.getElementById(id));
    }
  }

  // A page's own script follows an event as `wk:<event>` on the document (the canvas does).
  function refreshOn(event) {
    for (const element of document.querySelectorAll("[data-src][data-on]")) {
      if (element.dataset.on.split(" ").includes(event)) refresh(element);
    }
    document.dispatchEvent(new CustomEvent(`wk:${event}`));
  }

  const PAUSED = "Live updates paused, reconnecting…";
  const BACK = "Connection back: the page shows what changed meanwhile.";
  const STOPPED = "Live updates stopped: your session ended. Reload the page to log in again.";
  // How long the note that the connection is back stays up.
  const BACK_MS = 6000;
  let backUntil = 0;
  let backTimer = null;

  function sayLive() {
    const notice = document.getElementById("live-notice");
    if (!notice) return;
    let text = "";
    if (document.body.dataset.stream === "ended") text = STOPPED;
    else if (wkEventStreams.paused()) text = PAUSED;
    else if (Date.now() < backUntil) text = BACK;
    if (notice.textContent !== text) notice.textContent = text;
  }

  // Said once a lost connection is back, until BACK_MS have passed.
  function sayBack() {
    backUntil = Date.now() + BACK_MS;
    clearTimeout(backTimer);
    backTimer = setTimeout(sayLive, BACK_MS + 50);
    sayLive();
  }

  // The server said the session has ended: a 401 (a script's request, the event stream), or
  // a redirect that a fetch followed to the login page.
  function refused(response) {
    if (response.status === 401) return true;
    if (!response.redirected) return false;
    try { return new URL(response.url).pathname === "/web/login"; } catch (_e) { return false; }
  }

  // Asking again will not mend an ended session: every stream stops and the page says to
  // reload and log in, whichever request was refused first.
  function sessionEnded() {
    if (document.body.dataset.stream === "ended") return;
    document.body.dataset.stream = "ended";
    wkEventStreams.closeAll();
    document.dispatchEvent(new CustomEvent("wk:ended"));
    sayLive();
  }

  // Lists the stream signs: an event carries the list's new signature.
  const SIGNED = [
    "incidents", "runs", "topology", "jobs", "procs", "silences", "runbooks", "supervision",
  ];

  function refreshAll() {
    for (const element of document.querySelectorAll("[data-src][data-on]")) refresh(element);
    document.dispatchEvent(new CustomEvent("wk:resync"));
  }

  function listen() {
    if (!document.querySelector('meta[name="csrf-token"]')?.content) return;
    // The signatures the page was drawn with: a list is fetched again only when it moved.
    let seen = {};
    try { seen = JSON.parse(document.body.dataset.sigs || "{}"); } catch (_e) { seen = {}; }
    const onSig = (name) => (message) => {
      const data = JSON.parse(message.data);
      if (seen[name] === data.sig) return;
      seen[name] = data.sig;
      refreshOn(name);
    };
    const handlers = {
      "task.updated": (message) => {
        applyTaskUpdate(JSON.parse(message.data));
        refreshOn("task.updated");
      },
      // Events were lost (a restart, a long sleep): live parts are fetched again, and a page
      // whose task icons are not in one of them is loaded again.
      resync: () => {
        const drawn = [...document.querySelectorAll("[data-task-id]")];
        if (drawn.some((icon) => !icon.closest("[data-src]"))) { window.location.reload(); return; }
        refreshAll();
      },
      // A page drew what it drew before it listened: anything seen differently is fetched again.
      hello: (message) => {
        const sigs = JSON.parse(message.data);
        for (const [name, sig] of Object.entries(sigs)) {
          if (seen[name] !== sig) { seen[name] = sig; refreshOn(name); }
        }
        document.body.dataset.stream = "open";
      },
      state: (name) => { if (document.body.dataset.stream !== "ended") document.body.dataset.stream = name; },
    };
    for (const name of SIGNED) handlers[name] = onSig(name);
    wk.source = subscribe("/web/stream", handlers, "stream", document.body.dataset.streamAt || "");
  }

  function followLog() {
    const pre = document.querySelector("pre[data-follow]");
    if (!pre) return;
    const state = document.getElementById("log-state");
    const follow = subscribe(pre.dataset.follow, {
      log: (message) => {
        const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
        pre.append(document.createTextNode(message.data));
        if (atEnd) pre.scrollTop = pre.scrollHeight;
      },
      end: (message) => {
        follow.close();
        if (state) state.textContent = `ended: ${message.data}`;
        const badge = document.getElementById("proc-status");
        if (badge) { badge.textContent = message.data; badge.className = `badge badge-${message.data}`; }
        // Nothing is left to abort: the button would only be told so.
        document.getElementById("proc-abort")?.remove();
      },
    }, "log");
  }

  // A <time datetime> the server wrote in UTC reads in the browser's zone; its title keeps UTC.
  function localTimes(root) {
    const two = (n) => String(n).padStart(2, "0");
    for (const time of root.querySelectorAll("time[datetime]")) {
      const at = new Date(time.getAttribute("datetime"));
      if (Number.isNaN(at.getTime())) continue;
      time.textContent = `${at.getFullYear()}-${two(at.getMonth() + 1)}-${two(at.getDate())} `
        + `${two(at.getHours())}:${two(at.getMinutes())}:${two(at.getSeconds())}`;
    }
  }

  const { subscribe } = wkEventStreams;
  wkEventStreams.use({ sayLive, sayBack, refused, sessionEnded });

  document.addEventListener("submit", submit);
  document.documentElement.classList.add("js");
  document.addEventListener("DOMContentLoaded", () => {
    menus();
    labelCells(document);
    localTimes(document);
    markTab();
    listen();
    followLog();
  });
  return {
    taskIcon, taskLabel, applyTaskUpdate, refreshOn, refused, sessionEnded, factOf, source: null,
  };
})();
window.wk = wk;
