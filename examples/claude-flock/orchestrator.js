// The orchestrator of a flock of Claude Code workers (flock.yaml beside
// this file). It holds no model key and calls no model: it hands jobs to
// the workers over the bus and keeps their answers. Each worker is Claude
// Code run by flock-agent once per task (command:), reaching Anthropic's
// API through flock-proxy, which adds the operator's key and meters it.
//
//   - every line of $SHARED_DIR/jobs.txt is a job: a prompt; new lines are
//     picked up as they are added (the file is read every few seconds);
//   - each job is a task on tasks.worker (any worker takes it), sent
//     through the bus's desk (agent.<AGENT_ID>.task.send, within this
//     orchestrator's share of the store), its id "job-<n>" (Flock-Task-Id:
//     the bus stores it once); a job refused (the share or the store
//     full) is sent again at the next read;
//   - each result on task.result is written to $SHARED_DIR/results/<n>.md
//     with the worker that did it and how long it took;
//   - it heartbeats on agent.<AGENT_ID>.heartbeat.
//
// Run it with jit: true (V8) and common: rw.
"use strict";

const fs = require("node:fs");
const path = require("node:path");
const { connect, nkeyAuthenticator, headers } = require("nats");

const id = Number(process.env.AGENT_ID);
const shared = process.env.SHARED_DIR;
const jobsFile = path.join(shared, "jobs.txt");
const resultsDir = path.join(shared, "results");

function log(msg, fields = {}) {
  console.log(JSON.stringify({ time: new Date().toISOString(), msg, agent: id, ...fields }));
}

async function main() {
  const seed = fs.readFileSync(process.env.NATS_NKEY);
  const nc = await connect({
    servers: process.env.NATS_URL,
    authenticator: nkeyAuthenticator(new TextEncoder().encode(seed.toString().trim())),
    inboxPrefix: process.env.NATS_INBOX_PREFIX,
    name: `orchestrator-${id}`,
    maxReconnectAttempts: -1,
  });
  log("connected", { server: nc.getServer() });
  fs.mkdirSync(resultsDir, { recursive: true });

  // Results of the jobs it sent (other tasks' results are not its own).
  (async () => {
    for await (const m of nc.subscribe("task.result")) {
      const task = m.headers && m.headers.get("Flock-Task-Id");
      if (!task || !task.startsWith("job-")) continue;
      const r = JSON.parse(new TextDecoder().decode(m.data));
      const n = task.slice("job-".length);
      const body = `# job ${n}: ${r.ok ? "done" : "failed"} by agent ${r.agent} in ${(r.duration_ms / 1000).toFixed(1)} s\n\n` +
        (r.output || "") + (r.ok ? "" : `\n\n${r.error || ""}\n${r.stderr || ""}`);
      fs.writeFileSync(path.join(resultsDir, `${n}.md`), body);
      log("result", { job: n, ok: r.ok, worker: r.agent });
    }
  })();

  // Jobs: every line not sent yet. After a restart, a job whose answer is
  // in results/ is not sent again; one sent but not answered is (the bus
  // stores one copy of an id within 10 minutes, so a quick restart costs
  // nothing twice).
  let sent = 0;
  let polling = false;
  const poll = async () => {
    if (polling) return;
    polling = true;
    let lines = [];
    try {
      lines = fs.readFileSync(jobsFile, "utf8").split("\n").map((l) => l.trim()).filter(Boolean);
    } catch (e) {
      if (e.code !== "ENOENT") log("cannot read jobs", { error: e.message });
    }
    try {
      for (; sent < lines.length; sent++) {
        const n = String(sent + 1);
        if (fs.existsSync(path.join(resultsDir, `${n}.md`))) continue;
        const h = headers();
        h.set("Flock-Task-Subject", "tasks.worker");
        h.set("Flock-Task-Id", `job-${n}`);
        const m = await nc.request(`agent.${id}.task.send`, lines[sent], { headers: h, timeout: 5000 });
        const refused = m.headers && m.headers.get("Flock-Refusal");
        if (refused) {
          log("job refused, sending again later", { job: n, refusal: refused, error: m.headers.get("Flock-Error") });
          break;
        }
        log("job sent", { job: n });
      }
    } catch (e) {
      log("job not sent, sending again later", { job: String(sent + 1), error: e.message });
    } finally {
      polling = false;
    }
  };
  const beat = () => nc.publish(`agent.${id}.heartbeat`, JSON.stringify({ agent: id, time: new Date().toISOString() }));
  poll();
  beat();
  const timers = [setInterval(poll, 3000), setInterval(beat, 10000)];
  for (const sig of ["SIGTERM", "SIGINT"]) {
    process.on(sig, async () => {
      timers.forEach(clearInterval);
      await nc.drain();
      process.exit(0);
    });
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
