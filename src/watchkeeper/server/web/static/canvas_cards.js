// The supervision canvas's cards: process runs (each probed for liveness as it is read)
// and the health endpoint, with what a tap, a press, a flick or a key does to them.
// canvas.js draws them and carries the gestures; this file says what each one means.
"use strict";

(() => {
  const PROGRAMS = "programs";
  let api = null;
  // What stays open in the panel across redraws: the node spread open (the health node's
  // checks fanned out, or a breaker's recent calls), and the node whose backoff timeline
  // counts down (re-read from the server every second).
  let fanned = null;
  let timeline = null;
  let ticking = 0;
  const seconds = (value) => `${Number.isInteger(value) ? value : value.toFixed(1)} s`;

  const isRunsTree = (row) => row && row.type === "tree" && row.item.id === PROGRAMS;
  const probeUrl = (item) => new URL(item.path, window.location.origin).href;

  function button(parent, label, onClick) {
    const element = document.createElement("button");
    element.type = "button";
    element.className = "btn";
    element.textContent = label;
    element.addEventListener("click", onClick);
    parent.append(element);
    return element;
  }

  function counts(runs) {
    const found = { live: 0, ended: 0, stale: 0 };
    for (const run of runs) found[run.liveness] = (found[run.liveness] || 0) + 1;
    return found;
  }

  // Every card asks the server again whether its run's owner lives (the read probes it).
  async function refresh(key) {
    api.say(key, "Probing every run…");
    const svg = document.getElementById("sup-canvas");
    await api.load();
    const runs = api.data().runs || [];
    const found = counts(runs);
    svg.dataset.probed = String(Number(svg.dataset.probed || 0) + 1);
    api.say(key, `Runs probed: ${found.live} live, ${found.ended} ended, ${found.stale} stale.`);
  }

  async function startRun(key, program) {
    api.say(key, `Starting a run of ${program}…`);
    const answer = await api.post("/web/canvas/runs", { program });
    api.say(key, answer.message);
    await api.load();
    if (answer.body.run_id) {
      document.querySelector(`#sup-canvas .sn[data-run="${CSS.escape(answer.body.run_id)}"]`)
        ?.classList.add("fresh");
    }
  }

  // A stale ghost flung away: the server settles its record and ends what is left.
  async function reclaim(row) {
    const node = document.querySelector(`#sup-canvas .sn[data-run="${CSS.escape(row.item.id)}"]`);
    node?.classList.add("flung");
    api.say(row.key, `Reclaiming ${row.item.id}…`);
    const answer = await api.post(`/web/canvas/runs/${encodeURIComponent(row.item.id)}/reclaim`, {});
    api.say(row.key, answer.message);
    await api.load();
  }

  const SVGNS = "http://www.w3.org/2000/svg";
  const TONES = { healthy: "ok", degraded: "warn", unhealthy: "bad" };

  function dialFigure(parent, name, status, ring) {
    const figure = document.createElement("figure");
    figure.className = `sup-dial ${TONES[status] || "off"}${ring ? " sup-ring" : ""}`;
    figure.dataset.check = name;
    figure.dataset.status = status;
    figure.setAttribute("role", "listitem");
    figure.setAttribute("aria-label", `${name}: ${status}`);
    const svg = document.createElementNS(SVGNS, "svg");
    svg.setAttribute("viewBox", "0 0 40 40");
    svg.setAttribute("aria-hidden", "true");
    const circle = document.createElementNS(SVGNS, "circle");
    circle.setAttribute("cx", "20");
    circle.setAttribute("cy", "20");
    circle.setAttribute("r", ring ? "17" : "14");
    svg.append(circle);
    const caption = document.createElement("figcaption");
    caption.textContent = name;
    figure.append(svg, caption);
    parent.append(figure);
  }

  // A node spread: the health node's checks, each a dial around the overall ring; a
  // breaker's recent calls (canvas_calls.js).
  function fan(key) {
    const row = api.nodes().get(key);
    if (!row || (row.type !== "monitor" && row.type !== "breaker")) return false;
    fanned = key;
    api.select(key);
    drawFan(row);
    // No event tells the page of a breaker's successes: its calls are read again when asked for.
    if (row.type === "breaker") api.load();
    return true;
  }

  function drawFan(row) {
    const box = document.getElementById("sup-extra");
    if (row.type === "breaker") {
      window.wkCanvasCalls?.draw(box, row);
      return;
    }
    box.querySelector(".sup-dials")?.remove();
    const dials = document.createElement("div");
    dials.className = "sup-dials";
    dials.setAttribute("role", "list");
    dials.setAttribute("aria-label", "Health checks");
    dialFigure(dials, `overall: ${row.item.status}`, row.item.status, true);
    for (const check of row.item.checks) dialFigure(dials, check.name, check.status, false);
    box.append(dials);
  }

  // A restart edge pinched: the delays before each restart in a row, the one waited out now,
  // and what is left of it by the server's clock.
  function openTimeline(key) {
    const row = api.nodes().get(key);
    if (!row || !row.item.backoff_plan) return false;
    timeline = key;
    api.select(key);
    drawTimeline(row);
    clearInterval(ticking);
    ticking = setInterval(() => {
      const panel = document.getElementById("sup-panel");
      if (timeline !== key || panel.hidden || panel.dataset.key !== key) {
        clearInterval(ticking);
        return;
      }
      api.load();
    }, 1000);
    return true;
  }

  function drawTimeline(row) {
    const plan = row.item.backoff_plan;
    const box = document.getElementById("sup-extra");
    box.querySelector(".sup-backoff")?.remove();
    const wrap = document.createElement("div");
    wrap.className = "sup-backoff";
    const steps = document.createElement("ol");
    steps.className = "sup-timeline";
    steps.setAttribute("aria-label", "Delay before each restart in a row");
    const waiting = plan.restart_in_s !== null;
    const now = waiting ? plan.attempt - 1 : plan.attempt;
    plan.delays_s.forEach((delay, index) => {
      const step = document.createElement("li");
      step.textContent = seconds(delay);
      step.dataset.delay = String(delay);
      step.className = index < now ? "done" : index === now ? "now" : "next";
      if (index === now) step.setAttribute("aria-current", "step");
      steps.append(step);
    });
    const countdown = document.createElement("p");
    countdown.className = "sup-countdown";
    countdown.setAttribute("role", "timer");
    countdown.textContent = waiting
      ? `restart ${plan.attempt} in ${seconds(plan.restart_in_s)} (of ${seconds(plan.delays_s[now])})`
      : `not waiting: the next restart waits ${seconds(plan.delays_s[now])}`;
    if (waiting) countdown.dataset.left = String(plan.restart_in_s);
    wrap.append(steps, countdown);
    box.append(wrap);
  }

  // Open and past its reset timeout: the next call through it is its one probe.
  const halfOpen = (row) => row && row.type === "breaker"
    && (row.item.state === "half-open" || (row.item.state === "open" && row.item.probe_in_s === 0));

  async function probe(row) {
    api.say(row.key, `Probing ${row.item.name}…`);
    const answer = await api.post(`/web/canvas/breakers/${encodeURIComponent(row.item.name)}/probe`, {});
    api.say(row.key, answer.message);
    await api.load();
  }

  const OWNERSHIP = {
    ours: (run) => `Ownership check: its owner (pid ${run.owner_pid}) is the process this server started for it, so the signal goes to that run's processes and nothing else.`,
    gone: () => "Ownership check: its owner is gone, so nothing is signalled; the run is settled instead.",
    recycled: (run) => `Ownership check: pid ${run.owner_pid} belongs to another process now, so nothing is signalled.`,
    unknown: (run) => `Ownership check: its owner on ${run.host} cannot be seen from here, so nothing is signalled from here.`,
  };

  function ended(run) {
    if (run.liveness === "live") return "no, it runs";
    if (run.liveness === "stale") return "its processes are gone, but nothing recorded their end";
    if (run.status === "exited") return "yes, exited (its exit is read into the record at the next sweep)";
    const how = run.exit_code !== null && run.exit_code !== undefined
      ? `exit ${run.exit_code}` : run.signal ? `signal ${run.signal}` : run.status;
    return `yes, ${run.status} (${how})`;
  }

  function cleanup(run) {
    if (run.liveness === "live") return "not yet: it runs; abort it first";
    if (run.liveness === "stale") return "yes, once reclaimed (flick the card away)";
    return "yes: nothing of it runs";
  }

  const extra = {
    init(found) { api = found; },

    before(found, place) {
      if (found.endpoint) place("endpoint", { id: "endpoint", name: `GET ${found.endpoint.path}`, ...found.endpoint }, 0, null);
      if (found.monitor) place("monitor", found.monitor, 0, null);
    },

    after(found, place) {
      const agents = found.agents || [];
      if (agents.length) {
        const group = place("group", { id: "agents", name: "Agents" }, 0, null);
        for (const agent of agents) place("agent", agent, 1, group);
      }
      const runs = found.runs || [];
      if (!runs.length) return;
      const group = place("group", { id: "runs", name: "Process runs" }, 0, null);
      for (const run of runs) place("run", run, 1, group);
    },

    stateOf(row) {
      if (row.type === "run") return row.item.liveness;
      if (halfOpen(row)) return "half-open";
      if (row.type === "agent") {
        const item = row.item;
        return item.left_s < 0 ? "late" : item.heartbeat_age_s > item.timeout_s / 2 ? "quiet" : "alive";
      }
      if (row.type === "endpoint" || row.type === "monitor") return row.item.status;
      return undefined;
    },

    kindOf(row) {
      if (row.type === "run") return "process run";
      if (row.type === "agent") return `agent, ${row.item.kind}`;
      if (row.type === "endpoint") return "health endpoint";
      if (row.type === "monitor") return "health monitor";
      if (row.type === "health" && row.item.dial) return `${row.item.dial.kind} dial`;
      return "";
    },

    subline(row) {
      const item = row.item;
      if (row.type === "run") return `run · ${item.liveness} · ${item.status}`;
      if (row.type === "agent") return `agent · heard ${seconds(item.heartbeat_age_s)} ago of ${seconds(item.timeout_s)}`;
      if (row.type === "endpoint") return `endpoint · ${item.status} · flag ${item.flag_healthy ? "on" : "off"}`;
      if (row.type === "monitor") return `health · ${item.status} · ${item.checks.length} checks`;
      if (row.type === "health" && item.dial) {
        const d = item.dial;
        return `dial · ${d.headroom_mb >= 0 ? "+" : "−"}${Math.abs(d.headroom_mb).toLocaleString("en")} MB · ${d.closed ? "holds starts" : item.status}`;
      }
      return "";
    },

    classOf(row) {
      if (row.type === "health" && row.item.dial) return " dial";
      if (row.type !== "run") return "";
      return row.item.liveness === "stale" ? " ghost" : row.item.liveness === "live" ? " pulse" : "";
    },

    describe(row, fact, box) {
      const item = row.item;
      if (fanned !== row.key) fanned = null;
      if (timeline !== row.key) timeline = null;
      if (row.type === "agent") {
        fact("Heartbeat", `${seconds(item.heartbeat_age_s)} ago`);
        fact("Timeout", seconds(item.timeout_s));
        fact("Left", item.left_s >= 0 ? seconds(item.left_s) : `none: late by ${seconds(-item.left_s)}`);
        fact("Work", item.title);
      }
      if (item.backoff_plan) button(box, "Backoff timeline", () => openTimeline(row.key));
      if (row.type === "run") {
        fact("Run", item.id);
        fact("Status", item.status);
        fact("Ended", ended(item));
        fact("Clean up", cleanup(item));
        fact("Owner", `${item.ownership}${item.owner_pid ? `, pid ${item.owner_pid}` : ""}`);
        if (item.program) fact("Program", item.program);
      }
      if (row.type === "endpoint") {
        fact("Probe URL", probeUrl(item));
        fact("Answers", `${item.status} (HTTP ${item.code})`);
        if (item.causes.length) fact("Because", item.causes.join("; "));
        // The flag is the health monitor's (the health node's), not a cause /healthz weighs.
        fact("Healthy flag", item.flag_healthy ? "on (the health monitor's)" : `off (the health monitor's): ${item.flag_reason}`);
        button(box, "Copy probe URL", async () => {
          const url = probeUrl(item);
          try {
            await navigator.clipboard.writeText(url);
            api.say(row.key, `Copied ${url}`);
          } catch (error) {
            api.say(row.key, `${url} (the clipboard refused: ${error.message})`);
          }
        });
        if (api.mayAct()) {
          const healthy = !item.flag_healthy;
          button(box, healthy ? "Switch healthy flag on" : "Switch healthy flag off", async () => {
            const answer = await api.post("/web/canvas/health-flag", { healthy, reason: "switched off on the canvas" });
            api.say(row.key, answer.message);
            api.load();
          });
        }
      }
      if (isRunsTree(row)) {
        window.wkCanvasBuild?.draw(box, api, row.key);
        button(box, "Refresh runs", () => refresh(row.key));
        if (api.mayAct()) {
          for (const program of api.data().programs || []) {
            const start = button(box, `New run of ${program.name}`, () => startRun(row.key, program.name));
            // A low dial holds the start: the server would refuse it too.
            if (program.paused) { start.disabled = true; start.title = program.paused; }
          }
        }
      }
      if (row.type === "monitor") {
        fact("Overall", item.status);
        fact("Checks", String(item.checks.length));
        button(box, "Fan out the checks", () => fan(row.key));
      }
      if (row.type === "breaker") {
        button(box, "Recent calls", () => fan(row.key)).title =
          "Its recent successes and failures (or spread two fingers on the breaker, or H on it)";
      }
      if (fanned === row.key) drawFan(row);
      if (timeline === row.key) drawTimeline(row);
      if (row.type === "health" && item.dial) {
        const dial = item.dial;
        const mb = (value) => `${Math.abs(value).toLocaleString("en")} MB`;
        fact("Now", `${mb(dial.value_mb)} ${dial.kind === "disk" ? "free" : "available"} of ${mb(dial.total_mb)}`);
        fact("Headroom", `${mb(dial.headroom_mb)} ${dial.headroom_mb >= 0 ? "above" : "below"} the ${mb(dial.floor_mb)} floor`);
        fact("Starts", dial.closed ? `paused: ${dial.pauses.join(", ")}` : "allowed");
        if (api.mayAct()) {
          for (const program of dial.pauses) {
            const start = button(box, `Start ${program}`, async () => {
              api.say(row.key, `Starting ${program}…`);
              const answer = await api.post(`/web/programs/${encodeURIComponent(program)}/start`);
              api.say(row.key, answer.message);
              api.load();
            });
            if (dial.closed) { start.disabled = true; start.title = item.detail; }
          }
        }
      }
    },

    doubleTaps(row) {
      return halfOpen(row) && api.mayAct();
    },

    doubleTap(row) {
      if (!halfOpen(row) || !api.mayAct()) return false;
      probe(row);
      return true;
    },

    actions(row) {
      if (halfOpen(row)) {
        return [{
          label: "Send one probe", verb: "probe",
          url: `/web/canvas/breakers/${encodeURIComponent(row.item.name)}/probe`, body: {},
          question: `Send ${row.item.name} its one probe? It closes if the probe gets through, and opens again if not.`,
        }];
      }
      if (row.type === "health" && row.item.dial) {
        const dial = row.item.dial;
        return [{
          label: "Change the floor", verb: "change",
          url: `/web/canvas/host-checks/${encodeURIComponent(row.item.check)}/floor`,
          input: { name: "mb", label: `Fails below (MB of ${dial.kind === "disk" ? "free space" : "available memory"})`, value: dial.floor_mb },
          note: `Now ${dial.value_mb.toLocaleString("en")} MB; it fails below ${dial.floor_mb.toLocaleString("en")} MB and then holds the start of ${dial.pauses.join(", ")}.`,
          question: `Change the floor of ${row.item.check}? Until the server restarts; watchkeeper.toml is left as it is.`,
        }];
      }
      if (row.type !== "run" || row.item.liveness !== "live") return [];
      const run = row.item;
      return [{
        label: "Abort", verb: "abort",
        url: `/web/procs/${encodeURIComponent(run.id)}/abort`,
        note: (OWNERSHIP[run.ownership] || OWNERSHIP.unknown)(run),
        question: `Abort run ${run.id}? Its processes get SIGTERM, then SIGKILL after the grace period.`,
      }];
    },

    flick(row, vx, vy) {
      if (isRunsTree(row) && vy > Math.abs(vx)) {
        refresh(row.key);
        return true;
      }
      if (row.type === "run" && row.item.liveness === "stale" && api.mayAct()) {
        reclaim(row);
        return true;
      }
      return false;
    },

    spread(row) {
      return fan(row.key);
    },

    pinch(row) {
      return openTimeline(row.key);
    },

    key(row, key) {
      if (key === "d" && row.type === "monitor") return fan(row.key);
      if (key === "h" && row.type === "breaker") return fan(row.key);
      if (key === "b" && row.item.backoff_plan) return openTimeline(row.key);
      if (key === "r") {
        refresh(row.key);
        return true;
      }
      if (key === "Delete" && row.type === "run" && row.item.liveness === "stale" && api.mayAct()) {
        reclaim(row);
        return true;
      }
      return false;
    },
  };

  window.wkCanvasExtra = extra;
})();
