// A flock agent in Node.js, with the npm `nats` client and nothing of
// flock's: what an agent of any language does to live in a flock.
//
//   - connect with NATS_URL, the nkey seed in the file NATS_NKEY names
//     (systemd's credential), and the inbox prefix NATS_INBOX_PREFIX;
//   - heartbeat on agent.<AGENT_ID>.heartbeat every FLOCK_HEARTBEAT;
//   - as a worker, ask the bus's task desk for tasks: a request on
//     agent.<id>.task.next (answered on its own inbox) hands a task and
//     its lease (the Flock-Lease header); it says "still working" on
//     agent.<id>.task.progress, hands the result in on
//     agent.<id>.task.result, or gives the task back on
//     agent.<id>.task.release, each with the lease. The bus stores the
//     result once per task and acknowledges it. For each task this one
//     writes its output under its own directory ($HOME);
//   - a task "fetch https://NAME/..." GETs NAME through flock's egress
//     proxy (HTTPS_PROXY), as an agent reaching its model's API does;
//   - log JSON lines to FLOCK_LOG_FILE (and stdout, the journal);
//   - on SIGTERM, give a running task back and drain.
//
// Run it with `jit: true` in the spec: V8 needs writable-then-executable
// memory (flockctl status names that wall if you forget).
"use strict";

const fs = require("node:fs");
const path = require("node:path");
const { connect, nkeyAuthenticator, headers, createInbox } = require("nats");

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

// work is this agent's job: here, upper-case the payload and keep a copy.
async function work(payload, tid) {
  if (payload.trim() === "fail") throw new Error("asked to fail");
  const url = payload.trim().match(/^fetch (https:\/\/\S+)$/);
  if (url) return fetchThroughProxy(url[1]);
  const out = payload.toUpperCase();
  const dir = path.join(home, "outputs");
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, tid.replace(/[^A-Za-z0-9._-]/g, "_") + ".txt"), out);
  return out;
}

// fetchThroughProxy GETs url the way an agent reaches its model's API: an
// agent has no DNS and no route out but the names in its spec's egress,
// which flock's proxy carries. Node's built-in fetch ignores HTTPS_PROXY;
// undici's EnvHttpProxyAgent reads it (and NO_PROXY, which keeps the bus
// off the proxy). A name the spec does not allow fails at the CONNECT,
// with the proxy's 403.
async function fetchThroughProxy(url) {
  const { fetch, EnvHttpProxyAgent } = require("undici");
  try {
    const r = await fetch(url, { dispatcher: new EnvHttpProxyAgent(), signal: AbortSignal.timeout(10000) });
    const body = await r.text();
    return `${r.status} ${body.split("\n")[0]}`;
  } catch (e) {
    // fetch's own message is "fetch failed"; its causes say why (a name
    // not allowed: "Proxy response (403) !== 200 when HTTP Tunneling").
    const why = [];
    for (let c = e; c; c = c.cause) why.push(c.message);
    throw new Error(`fetch ${url}: ${why.join(": ")}`);
  }
}

const inboxPrefix = process.env.NATS_INBOX_PREFIX; // the only inbox it may listen on
const desk = (verb) => `agent.${id}.task.${verb}`;

// refusal is the desk's "no" in an answer, or null.
function refusal(m) {
  const why = m.headers && m.headers.get("Flock-Error");
  return why ? `${m.headers.get("Flock-Refusal")}: ${why}` : null;
}

// leased says verb about a task to the desk, with its lease.
async function leased(nc, task, verb, body) {
  const h = headers();
  h.set("Flock-Lease", task.lease);
  const m = await nc.request(desk(verb), body || "", { timeout: 15_000, headers: h });
  const no = refusal(m);
  if (no) throw new Error(`the desk refused ${verb}: ${no}`);
}

// ask asks the desk for a task and waits for its one answer: a task, or
// null when none came within wait_ms. Unanswered (a bus restarting forgot
// the ask), it is withdrawn.
async function ask(nc) {
  const inbox = createInbox(inboxPrefix);
  const sub = nc.subscribe(inbox, { max: 1 });
  nc.publish(desk("next"), JSON.stringify({ wait_ms: 5000 }), { reply: inbox });
  const lost = setTimeout(() => {
    nc.publish(desk("next"), JSON.stringify({ withdraw: inbox }), { reply: createInbox(inboxPrefix) });
    setTimeout(() => sub.unsubscribe(), 2000);
  }, 10_000);
  let m = null;
  for await (const got of sub) m = got;
  clearTimeout(lost);
  if (!m) return null;
  const no = refusal(m);
  if (no) throw new Error(`the desk refused a task: ${no}`);
  const lease = m.headers && m.headers.get("Flock-Lease");
  if (!lease) return null;
  return {
    id: m.headers.get("Flock-Task-Id"),
    lease,
    ackWait: Number(m.headers.get("Flock-Ack-Wait")) || 30_000,
    payload: new TextDecoder().decode(m.data),
  };
}

async function handle(nc, task) {
  const t0 = Date.now();
  const working = setInterval(() => {
    const h = headers();
    h.set("Flock-Lease", task.lease);
    nc.publish(desk("progress"), "", { headers: h }); // still on it
  }, task.ackWait / 3);
  let res;
  try {
    const output = await work(task.payload, task.id);
    res = { ok: true, exit_status: 0, output, truncated: false };
    done++;
  } catch (e) {
    res = { ok: false, exit_status: 1, output: "", truncated: false, error: e.message };
    failed++;
  } finally {
    clearInterval(working);
  }
  res.duration_ms = Date.now() - t0;
  // The bus stores it under the task's id and this agent's, once per task.
  await leased(nc, task, "result", JSON.stringify(res));
  log("INFO", "task done", { task_id: task.id, ok: res.ok, duration_ms: res.duration_ms });
}

async function serveTasks(nc) {
  while (!stopping) {
    try {
      const task = await ask(nc);
      if (!task) continue;
      if (stopping) {
        await leased(nc, task, "release"); // back to the queue for another worker
        break;
      }
      await handle(nc, task);
    } catch (e) {
      log("WARN", "asking for tasks failed; retrying", { error: e.message });
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
}

async function main() {
  const seed = fs.readFileSync(process.env.NATS_NKEY, "utf8").trim();
  const nc = await connect({
    servers: process.env.NATS_URL,
    authenticator: nkeyAuthenticator(new TextEncoder().encode(seed)),
    inboxPrefix,
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
