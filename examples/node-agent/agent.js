// A flock agent in Node.js, with the npm `nats` client and nothing of
// flock's: what an agent of any language does to live in a flock.
//
//   - connect with NATS_URL, the nkey seed in the file NATS_NKEY names
//     (systemd's credential), and the inbox prefix NATS_INBOX_PREFIX;
//   - heartbeat on agent.<AGENT_ID>.heartbeat every FLOCK_HEARTBEAT;
//   - as a worker, pull tasks from its own consumer (agent-<id>) and the
//     workers' shared one (worker) of the stream TASKS; for each, write its
//     output under its own directory ($HOME), store the result on
//     task.result (deduplicated by the task's id) and then acknowledge;
//   - log JSON lines to FLOCK_LOG_FILE (and stdout, the journal);
//   - on SIGTERM, give a running task back and drain.
//
// Run it with `jit: true` in the spec: V8 needs writable-then-executable
// memory (flockctl status names that wall if you forget).
"use strict";

const fs = require("node:fs");
const path = require("node:path");
const { connect, nkeyAuthenticator, headers } = require("nats");

const id = Number(process.env.AGENT_ID);
const role = process.env.AGENT_ROLE || "worker";
const home = process.env.HOME || process.cwd();
const logFile = process.env.FLOCK_LOG_FILE;
const started = Date.now();
let done = 0;
let failed = 0;
let stopping = false;

function log(level, msg, fields = {}) {
  const line = JSON.stringify({ time: new Date().toISOString(), level, msg, agent: id, ...fields });
  console.log(line);
  if (logFile) {
    try {
      fs.appendFileSync(logFile, line + "\n");
    } catch (e) {
      console.error(`cannot write ${logFile}: ${e.message}`);
    }
  }
}

// duration reads a Go duration as flock writes it ("30s", "1m0s", "500ms").
function duration(s, fallbackMs) {
  let ms = 0;
  const re = /(\d+(?:\.\d+)?)(ms|s|m|h)/g;
  let m;
  while ((m = re.exec(s || "")) !== null) {
    ms += Number(m[1]) * { ms: 1, s: 1e3, m: 60e3, h: 3600e3 }[m[2]];
  }
  return ms > 0 ? ms : fallbackMs;
}

// taskId is the id flock gives a task: its Flock-Task-Id header, else its
// Nats-Msg-Id, else its place in TASKS.
function taskId(m) {
  for (const name of ["Flock-Task-Id", "Nats-Msg-Id"]) {
    const v = m.headers && m.headers.get(name);
    if (v) return v;
  }
  return `seq-${m.seq}`;
}

// work is this agent's job: here, upper-case the payload and keep a copy.
async function work(payload, tid) {
  if (payload.trim() === "fail") throw new Error("asked to fail");
  const out = payload.toUpperCase();
  const dir = path.join(home, "outputs");
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, tid.replace(/[^A-Za-z0-9._-]/g, "_") + ".txt"), out);
  return out;
}

async function handle(js, m) {
  const tid = taskId(m);
  const t0 = Date.now();
  const working = setInterval(() => m.working(), 10_000); // still on it
  let res;
  try {
    const output = await work(new TextDecoder().decode(m.data), tid);
    res = { task_id: tid, agent: id, ok: true, exit_status: 0, output, truncated: false };
    done++;
  } catch (e) {
    res = { task_id: tid, agent: id, ok: false, exit_status: 1, output: "", truncated: false, error: e.message };
    failed++;
  } finally {
    clearInterval(working);
  }
  res.duration_ms = Date.now() - t0;
  const h = headers();
  h.set("Flock-Task-Id", tid);
  h.set("Flock-Task-Subject", m.subject);
  // Stored once per task: a second delivery's result is dropped by the bus.
  await js.publish("task.result", JSON.stringify(res), { msgID: `result-${tid}`, headers: h });
  await m.ackAck(); // only now is the task done
  log("INFO", "task done", { task_id: tid, ok: res.ok, duration_ms: res.duration_ms });
}

async function serveTasks(nc) {
  const js = nc.jetstream();
  let consumers = null;
  while (!stopping) {
    try {
      consumers = consumers || [
        await js.consumers.get("TASKS", `agent-${id}`), // tasks for this agent alone
        await js.consumers.get("TASKS", "worker"), //       tasks for any worker
      ];
      let m = null;
      for (const c of consumers) {
        m = await c.next({ expires: c === consumers[0] ? 1000 : 5000 });
        if (m) break;
      }
      if (!m) continue;
      if (stopping) {
        m.nak(); // back to the queue for another worker
        break;
      }
      await handle(js, m);
    } catch (e) {
      log("WARN", "pulling tasks failed; retrying", { error: e.message });
      consumers = null; // the bus may have restarted
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
}

async function main() {
  const seed = fs.readFileSync(process.env.NATS_NKEY, "utf8").trim();
  const nc = await connect({
    servers: process.env.NATS_URL,
    authenticator: nkeyAuthenticator(new TextEncoder().encode(seed)),
    inboxPrefix: process.env.NATS_INBOX_PREFIX, // the only inbox it may listen on
    name: `flock-${id}`,
    maxReconnectAttempts: -1,
    waitOnFirstConnect: true,
  });
  log("INFO", "agent started", { runtime: `node ${process.version}`, role, pid: process.pid });
  const beat = () =>
    nc.publish(
      `agent.${id}.heartbeat`,
      JSON.stringify({
        agent: id,
        time: new Date().toISOString(),
        uptime_s: (Date.now() - started) / 1000,
        rss_bytes: process.memoryUsage.rss(),
        tasks_done: done,
        tasks_failed: failed,
      }),
    );
  beat();
  const beats = setInterval(beat, duration(process.env.FLOCK_HEARTBEAT, 30_000));
  const stop = () => {
    stopping = true;
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  if (role === "worker") {
    await serveTasks(nc);
  } else {
    while (!stopping) await new Promise((r) => setTimeout(r, 500));
  }
  clearInterval(beats);
  await nc.drain();
  log("INFO", "agent stopped", { tasks_done: done, tasks_failed: failed });
}

main().catch((e) => {
  log("ERROR", "agent failed", { error: e.message });
  process.exit(1);
});
