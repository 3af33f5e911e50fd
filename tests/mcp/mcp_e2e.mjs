// SPDX-License-Identifier: MIT
// dotmon's /mcp end to end with the official MCP TypeScript SDK's client (Client +
// StreamableHTTPClientTransport, the token in requestInit's Authorization header), against the
// real test app. check_mcp_e2e.py starts dotmon and the app, then runs this under the Node.js the
// lock file pins (tests/mcp/package.json).
//
// Environment: MCP_NODE_MODULES (the build tree's node_modules of tests/mcp), DOTMON_URL
// (http://127.0.0.1:PORT), MCP_TOKEN (the bearer token), APP_PID, MCP_RULE (the collection rule
// dotmon was configured with).
//
// The app is driven through check_mcp_e2e.py: this script writes "@app ID COMMAND" on standard
// output and reads "ID ANSWER" (the app's ok/error line) on standard input. Every check prints
// "ok   …" or "FAIL …" as tests/support/dmtest.py's check() does; the exit status is 1 when one
// failed.
//
// Checked: 401 without a token (and with a wrong one); 403 for a foreign Origin, 200 for the
// request's own; initialize's protocol-version negotiation (2025-11-25, 2025-06-18, an unknown one
// answered with the current), Mcp-Session-Id, ping, a bad MCP-Protocol-Version header (400), an
// unknown method (-32601), a body that is not JSON, an unknown session (404), DELETE ending a
// session; tools/list: every tool of the fixed set, each with a description, annotations, and an
// inputSchema and an outputSchema of type object that are valid against the JSON Schema meta-schema
// (2020-12, or the draft their $schema names) and that ajv compiles; dump absent (not enabled); each
// tool called against the app: one text content, structuredContent valid against its outputSchema
// (ajv), and what the app does named (cpu_profile: the hot method first by self time and in the
// hottest path; exceptions: the thrown type, counted, and its site; allocations: the allocated type;
// contention: the waiting method; gc_stats: the induced GCs; stacks: the parked threads' frames;
// recent_logs: the logged line, and a category's line only; metrics_snapshot: System.Runtime values,
// and only the instruments asked for; heap_summary: the type allocated between two calls in the
// second call's growth; trace_summary: the asked provider's events counted, and a trace profile's
// GC events; collection_rules: the configured rule; process_info by pid, name and uid;
// list_processes); bad arguments and an unknown tool; progress notifications while cpu_profile
// runs; a cancelled cpu_profile (AbortSignal: the SDK sends notifications/cancelled) ends its
// operation Cancelled with no runtime session left, and the runtime takes a new session right
// after; 20 concurrent cpu_profile calls: the extras are tool errors with the routes' 429 message,
// none is a protocol error, dotmon stays up and every session ends.

import { createRequire } from 'node:module';
import path from 'node:path';
import readline from 'node:readline';

const NM = process.env.MCP_NODE_MODULES;
const BASE = process.env.DOTMON_URL;
const TOKEN = process.env.MCP_TOKEN;
const PID = Number(process.env.APP_PID);
const RULE = process.env.MCP_RULE || 'McpRule';
const URL_MCP = BASE + '/mcp';
const AUTH = { Authorization: 'Bearer ' + TOKEN };

// The packages live in the build tree (npm ci by the mcp_npm_install fixture), not beside this
// file: resolve them from there.
const require = createRequire(path.join(NM, 'mcp-e2e.cjs'));
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');
const { McpError } = require('@modelcontextprotocol/sdk/types.js');
const Ajv2020 = require('ajv/dist/2020').default;
const Ajv07 = require('ajv').default;
const addFormats = require('ajv-formats').default;

const CURRENT = '2025-11-25';
const PREVIOUS = '2025-06-18';
const TOOLS = ['list_processes', 'process_info', 'cpu_profile', 'allocations', 'exceptions', 'contention',
  'gc_stats', 'stacks', 'recent_logs', 'metrics_snapshot', 'heap_summary', 'trace_summary', 'collection_rules'];
const PROCESS_TOOLS = ['process_info', 'cpu_profile', 'allocations', 'exceptions', 'contention', 'gc_stats',
  'stacks', 'recent_logs', 'metrics_snapshot', 'heap_summary', 'trace_summary'];
const HOT = 'SpinHotLoop';

let fails = 0;
function check(cond, what) {
  console.log((cond ? 'ok   ' : 'FAIL ') + what);
  if (!cond) fails++;
  return !!cond;
}
function info(what) {
  console.log('info ' + what);
}
const short = (v, n = 300) => {
  const s = typeof v === 'string' ? v : JSON.stringify(v);
  return s === undefined ? String(v) : s.length > n ? s.slice(0, n) + '…' : s;
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// --- the app, through check_mcp_e2e.py ---------------------------------------------------------
const pending = new Map();
let nextId = 1;
const rl = readline.createInterface({ input: process.stdin });
rl.on('line', (line) => {
  const sp = line.indexOf(' ');
  const id = Number(line.slice(0, sp));
  const p = pending.get(id);
  if (p) {
    pending.delete(id);
    p(line.slice(sp + 1));
  }
});
function app(cmd) {
  const id = nextId++;
  return new Promise((resolve) => {
    pending.set(id, resolve);
    console.log(`@app ${id} ${cmd}`);
  });
}

// --- dotmon's REST routes (the same token) -----------------------------------------------------
async function rest(p, init = {}) {
  const r = await fetch(BASE + p, { ...init, headers: { ...AUTH, ...(init.headers || {}) } });
  const text = await r.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {
    // not JSON
  }
  return { status: r.status, text, json };
}
async function operations() {
  const r = await rest('/operations');
  return Array.isArray(r.json) ? r.json : [];
}
// dotmon's gauge of the EventPipe sessions it holds in runtimes (-1: unreadable).
async function runtimeSessions() {
  const r = await rest('/metrics/dotmon');
  const m = /^dotmon_runtime_sessions (\S+)/m.exec(r.text);
  return m ? Math.round(Number(m[1])) : -1;
}
async function waitFor(cond, ms, every = 100) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await cond();
    if (v) return v;
    if (Date.now() > end) return v;
    await sleep(every);
  }
}
// The first operation not among `before` that is Running (its runtime session is up), or null.
async function newRunning(before, ms = 8000) {
  return (await waitFor(async () => (await operations()).find((o) => !before.has(o.operationId) &&
    o.status === 'Running') || null, ms, 50));
}
const opIds = async () => new Set((await operations()).map((o) => o.operationId));

// --- raw JSON-RPC over HTTP, for what the SDK does not let a test get wrong on purpose -----------
async function rawPost(body, headers = {}) {
  const r = await fetch(URL_MCP, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await r.text();
  let msg = null;
  const ct = r.headers.get('content-type') || '';
  try {
    if (ct.includes('text/event-stream')) {
      // The last JSON-RPC message carried in a data: line.
      for (const ev of text.split(/\r?\n\r?\n/)) {
        const data = ev.split(/\r?\n/).filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trimStart()).join('\n');
        if (data.trim()) msg = JSON.parse(data);
      }
    } else if (text) {
      msg = JSON.parse(text);
    }
  } catch {
    // msg stays null
  }
  return { status: r.status, headers: r.headers, text, msg };
}
const initBody = (version, id = 1) => ({
  jsonrpc: '2.0', id, method: 'initialize',
  params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 'dotmon-mcp-e2e-raw', version: '1.0.0' } },
});

async function transportChecks() {
  // Authentication: the same bearer token as every route.
  let r = await rawPost(initBody(CURRENT));
  check(r.status === 401, `POST /mcp without a token: 401 (got ${r.status})`);
  check(/bearer/i.test(r.headers.get('www-authenticate') || ''),
    `and a WWW-Authenticate: Bearer challenge (${r.headers.get('www-authenticate')})`);
  r = await rawPost(initBody(CURRENT), { Authorization: 'Bearer not-the-token' });
  check(r.status === 401, `POST /mcp with a wrong token: 401 (got ${r.status})`);

  // Origin (the spec's DNS-rebinding defence): a foreign one is refused, the request's own is fine.
  r = await rawPost(initBody(CURRENT), { ...AUTH, Origin: 'http://evil.example' });
  check(r.status === 403, `POST /mcp with Origin: http://evil.example: 403 (got ${r.status} ${short(r.text, 200)})`);
  r = await rawPost(initBody(CURRENT), { ...AUTH, Origin: BASE });
  check(r.status === 200, `POST /mcp with its own Origin (${BASE}): 200 (got ${r.status})`);

  // Version negotiation: the current and the previous revision are kept, anything else gets the
  // current one.
  for (const [asked, want] of [[CURRENT, CURRENT], [PREVIOUS, PREVIOUS], ['1999-01-01', CURRENT]]) {
    r = await rawPost(initBody(asked), AUTH);
    const got = r.msg && r.msg.result && r.msg.result.protocolVersion;
    check(r.status === 200 && got === want, `initialize asking ${asked}: protocolVersion ${got} (want ${want}; ${r.status})`);
  }
  r = await rawPost(initBody(CURRENT), AUTH);
  const sid = r.headers.get('mcp-session-id');
  check(!!sid && /^[\x21-\x7e]+$/.test(sid), `initialize answers an Mcp-Session-Id of visible ASCII (${sid})`);
  const res = r.msg && r.msg.result;
  check(!!(res && res.capabilities && res.capabilities.tools && res.serverInfo && res.serverInfo.name),
    `initialize's result has capabilities.tools and serverInfo: ${short(res, 200)}`);
  const h = { ...AUTH, 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': CURRENT };
  r = await rawPost({ jsonrpc: '2.0', method: 'notifications/initialized' }, h);
  check(r.status === 202, `notifications/initialized: 202 (got ${r.status})`);
  r = await rawPost({ jsonrpc: '2.0', id: 2, method: 'ping' }, h);
  check(r.status === 200 && r.msg && r.msg.id === 2 && r.msg.result && Object.keys(r.msg.result).length === 0,
    `ping: an empty result (${r.status} ${short(r.msg)})`);
  r = await rawPost({ jsonrpc: '2.0', id: 3, method: 'tools/list' }, { ...h, 'MCP-Protocol-Version': '1999-01-01' });
  check(r.status === 400, `an unsupported MCP-Protocol-Version header: 400 (got ${r.status})`);
  r = await rawPost({ jsonrpc: '2.0', id: 4, method: 'no/such/method' }, h);
  check(r.msg && r.msg.error && r.msg.error.code === -32601, `an unknown method: JSON-RPC error -32601 (${short(r.msg)})`);
  r = await rawPost('{"jsonrpc":"2.0","id":5,"method":', h);
  check(r.status === 400 || (r.msg && r.msg.error && r.msg.error.code === -32700),
    `a body that is not JSON: 400 or -32700 (${r.status} ${short(r.text, 200)})`);
  r = await rawPost({ jsonrpc: '2.0', id: 6, method: 'tools/list' }, { ...h, 'Mcp-Session-Id': 'no-such-session' });
  check(r.status === 404, `an unknown Mcp-Session-Id: 404 (got ${r.status})`);
  const del = await fetch(URL_MCP, { method: 'DELETE', headers: h });
  check(del.status >= 200 && del.status < 300, `DELETE /mcp ends the session (${del.status})`);
  r = await rawPost({ jsonrpc: '2.0', id: 7, method: 'tools/list' }, h);
  check(r.status === 404, `the deleted session is gone: 404 (got ${r.status})`);
}

// --- schemas -----------------------------------------------------------------------------------
function ajvFor(schema, strict) {
  const draft07 = typeof schema.$schema === 'string' && /draft-07/.test(schema.$schema);
  const a = draft07 ? new Ajv07({ strict, allErrors: true }) : new Ajv2020({ strict, allErrors: true });
  addFormats(a);
  return a;
}
const validators = new Map();
function schemaChecks(tool, which) {
  const schema = tool[which];
  if (!check(schema && typeof schema === 'object' && schema.type === 'object',
    `${tool.name}: ${which} is an object schema (type "object")`)) return;
  // Valid JSON Schema: against its meta-schema (2020-12 unless $schema names draft-07), and
  // compiled by ajv; strict mode first, reported when only the non-strict compile works.
  const a = ajvFor(schema, false);
  const meta = a.validateSchema(schema);
  check(meta, `${tool.name}: ${which} is valid against the JSON Schema meta-schema` +
    (meta ? '' : `: ${a.errorsText(a.errors)}`));
  let v = null;
  try {
    v = ajvFor(schema, true).compile(schema);
  } catch (e) {
    info(`${tool.name}: ${which} needs ajv's strict mode off: ${e.message}`);
    try {
      v = a.compile(schema);
    } catch (e2) {
      check(false, `${tool.name}: ajv compiles ${which}: ${e2.message}`);
      return;
    }
  }
  check(true, `${tool.name}: ajv compiles ${which}`);
  if (which === 'outputSchema') validators.set(tool.name, v);
}

// --- tool calls ----------------------------------------------------------------------------------
let client;
let tools = new Map();

// A tool answer that is not an error: one text content, structuredContent valid against the
// outputSchema. Returns structuredContent (or null).
function good(name, res, what = name) {
  const why = res && res.isError ? `: ${short(textOf(res))}` : '';
  if (!check(res && res.isError !== true, `${what}: not a tool error${why}`)) {
    return null;
  }
  const texts = (res.content || []).filter((c) => c.type === 'text');
  check(res.content && res.content.length === 1 && texts.length === 1 && texts[0].text.length > 0,
    `${what}: one text content (${(res.content || []).map((c) => c.type).join(',')}; ` +
    `${texts[0] ? texts[0].text.length : 0} chars)`);
  const sc = res.structuredContent;
  if (!check(sc && typeof sc === 'object' && !Array.isArray(sc), `${what}: structuredContent is an object`)) return null;
  const v = validators.get(name);
  if (v) {
    const okv = v(sc);
    check(okv, `${what}: structuredContent validates against ${name}'s outputSchema (ajv)` +
      (okv ? '' : `: ${JSON.stringify(v.errors).slice(0, 600)}`));
  }
  info(`${what}: ${short(sc, 700)}`);
  return sc;
}
const textOf = (res) => ((res && res.content) || []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');

async function call(name, args, opts = {}) {
  try {
    return await client.callTool({ name, arguments: args }, undefined, { timeout: 60000, ...opts });
  } catch (e) {
    check(false, `${name}(${short(args)}): the call was refused: ${e && e.message}`);
    return null;
  }
}

// A tool that runs a session for `seconds`: once its operation is Running (the runtime has
// started the session), the app runs cmd. Returns { res, op, answer, progress }.
async function during(name, args, cmd) {
  const before = await opIds();
  const progress = [];
  const t0 = Date.now();
  const pr = call(name, args, { onprogress: (p) => progress.push(p) });
  const op = await newRunning(before);
  if (!op) info(`${name}: no Running operation seen; the app runs ${cmd} anyway`);
  const answer = cmd ? await app(cmd) : null;
  const res = await pr;
  info(`${name}(${short(args)}) with the app's ${cmd}: ${answer}; ${Date.now() - t0} ms`);
  return { res, op, answer, progress };
}

async function toolChecks() {
  // process_info / list_processes, and the three ways to name a process.
  let sc = good('list_processes', await call('list_processes', {}));
  check(sc && (sc.processes || []).some((p) => p.pid === PID && p.name === 'TestApp'),
    `list_processes lists the app (pid ${PID}, TestApp)`);
  sc = good('process_info', await call('process_info', { pid: PID }));
  check(sc && sc.pid === PID && sc.name === 'TestApp', `process_info(pid): pid ${sc && sc.pid}, name ${sc && sc.name}`);
  const uid = sc && sc.uid;
  const byName = good('process_info', await call('process_info', { name: 'TestApp' }), 'process_info(name)');
  check(byName && byName.pid === PID, `process_info(name=TestApp) is the same process (${byName && byName.pid})`);
  if (check(!!uid, `process_info gives the runtime's uid (${uid})`)) {
    const byUid = good('process_info', await call('process_info', { uid }), 'process_info(uid)');
    check(byUid && byUid.pid === PID, `process_info(uid=${uid}) is the same process`);
  }
  const noPid = await call('process_info', { pid: 1 });
  check(noPid && noPid.isError === true && textOf(noPid).length > 0,
    `process_info(pid=1), no such .NET process: a tool error with a message (${short(textOf(noPid), 200)})`);

  // cpu_profile: the hot method first, by self time and in the hottest path; progress
  // notifications while it runs.
  let d = await during('cpu_profile', { pid: PID, seconds: 2, top: 5, paths: 2 }, 'hot 2600');
  sc = good('cpu_profile', d.res);
  if (sc) {
    const top = (sc.topExclusive || [])[0] || {};
    check(String(top.method).includes(HOT) && top.percent > 40,
      `cpu_profile: the first method by self time is the app's hot ${HOT}: ${top.method} (${top.percent} %)`);
    const path0 = (sc.hotPaths || [])[0] || {};
    check((path0.frames || []).some((f) => f.includes(HOT)),
      `cpu_profile: the hottest path goes through ${HOT}: ${short(path0.frames, 300)}`);
  }
  check(d.progress.length > 0,
    `cpu_profile: progress notifications while it runs (${d.progress.length}: ${short(d.progress, 200)})`);
  check(d.progress.every((p, i) => i === 0 || p.progress > d.progress[i - 1].progress),
    'cpu_profile: progress rises with each notification');

  // Bad arguments: a tool error naming the argument, not a protocol error.
  const bad = await call('cpu_profile', { pid: PID, seconds: -3 });
  check(bad && bad.isError === true && /seconds/i.test(textOf(bad)),
    `cpu_profile(seconds=-3): a tool error naming seconds (${short(textOf(bad), 200)})`);
  try {
    const r = await client.callTool({ name: 'no_such_tool', arguments: {} });
    check(r.isError === true, `an unknown tool: a protocol error -32602 or a tool error (${short(r)})`);
  } catch (e) {
    check(e instanceof McpError && e.code === -32602, `an unknown tool: JSON-RPC error -32602 (${e.code} ${e.message})`);
  }

  // exceptions: the thrown type, counted, and its throw site.
  d = await during('exceptions', { pid: PID, seconds: 2 }, 'throw-n 40');
  sc = good('exceptions', d.res);
  let t = sc && (sc.types || [])[0];
  check(t && t.type === 'TestApp.ProfileKindsException' && t.count === 40,
    `exceptions: the first type is the thrown TestApp.ProfileKindsException, 40 times (${t && t.type}, ${t && t.count})`);
  check(t && (t.sites || []).some((x) => String(x.method).includes('TestApp.ProfileKinds.ThrowKnown')),
    `exceptions: thrown in TestApp.ProfileKinds.ThrowKnown (${short(t && t.sites, 200)})`);

  // allocations: the type allocated most, and where.
  d = await during('allocations', { pid: PID, seconds: 2 }, 'alloc-mix 1500');
  sc = good('allocations', d.res);
  t = sc && (sc.types || [])[0];
  check(t && t.type === 'TestApp.BigAllocType' && (t.sites || []).some((x) => String(x.method).includes('AllocateBig')),
    'allocations: the first type is TestApp.BigAllocType, from TestApp.ProfileKinds.AllocateBig ' +
    `(${t && t.type}, ${t && t.percent} %)`);

  // contention: the waiting method.
  d = await during('contention', { pid: PID, seconds: 2 }, 'contend 1500');
  sc = good('contention', d.res);
  const m = sc && (sc.methods || [])[0];
  check(m && String(m.method).includes('TestApp.ProfileKinds.HoldLock') && m.waitMilliseconds > 0,
    `contention: the first waiting method is TestApp.ProfileKinds.HoldLock (${m && m.method}, ${m && m.waitMilliseconds} ms)`);

  // gc_stats: exactly the app's three induced gen2 GCs (it does nothing else: no heartbeat).
  d = await during('gc_stats', { pid: PID, seconds: 2 }, 'collect 3');
  sc = good('gc_stats', d.res);
  check(sc && sc.gcs === 3 && sc.generations && sc.generations.gen2 === 3 && sc.reasons && sc.reasons.Induced === 3,
    `gc_stats: the 3 induced gen2 GCs (${short(sc && { gcs: sc.gcs, generations: sc.generations, reasons: sc.reasons })})`);

  // stacks: the parked threads, by name, in their methods.
  const parked = await app('park');
  sc = good('stacks', await call('stacks', { pid: PID }));
  const groups = (sc && sc.groups) || [];
  const waiter = groups.find((g) => (g.threadNames || []).includes('dm-waiter'));
  const spinner = groups.find((g) => (g.threadNames || []).includes('dm-spinner'));
  check(waiter && waiter.frames.some((f) => f.includes('A.B.Wait')),
    `stacks: thread dm-waiter in A.B.Wait (${short(waiter && waiter.frames, 200)})`);
  check(spinner && spinner.frames.some((f) => f.includes('C.D.Spin')),
    `stacks: thread dm-spinner in C.D.Spin (${short(spinner && spinner.frames, 200)}; ${parked})`);
  await app('unpark');

  // recent_logs: a line logged while it listens; with a category, that category's line.
  const line = `mcp-e2e log line ${process.pid}`;
  d = await during('recent_logs', { pid: PID, seconds: 2, level: 'Information' }, `log Warning ${line}`);
  sc = good('recent_logs', d.res);
  let rec = sc && (sc.records || []).find((r) => r.message === line);
  check(rec && rec.level === 'Warning' && rec.category === 'TestApp.Commands',
    `recent_logs holds the logged line "${line}" (Warning, TestApp.Commands): ${short(rec)}`);
  d = await during('recent_logs', { pid: PID, seconds: 2, category: 'TestApp.Other' },
    `log-cat TestApp.Other Warning other ${line}`);
  sc = good('recent_logs', d.res, 'recent_logs(category)');
  rec = sc && (sc.records || []).find((r) => r.message === `other ${line}`);
  check(rec && rec.category === 'TestApp.Other' && (sc.records || []).every((r) => r.category.startsWith('TestApp.Other')),
    `recent_logs(category=TestApp.Other) holds that category's line only: ${short(sc && sc.records)}`);

  // metrics_snapshot: System.Runtime values; instruments keeps the ones asked for.
  d = await during('metrics_snapshot', { pid: PID, seconds: 2 }, null);
  sc = good('metrics_snapshot', d.res);
  const rt = ((sc && sc.metrics) || []).filter((x) => x.provider === 'System.Runtime' && typeof x.value === 'number');
  const names = new Set(rt.map((x) => x.name));
  check(rt.length >= 5 && names.has('cpu-usage') && names.has('gc-heap-size') && names.has('working-set'),
    `metrics_snapshot has System.Runtime values (${rt.length}: ${short([...names], 200)})`);
  d = await during('metrics_snapshot', { pid: PID, seconds: 2, instruments: ['cpu-usage', 'gc-heap-size'] }, null);
  sc = good('metrics_snapshot', d.res, 'metrics_snapshot(instruments)');
  const got = new Set(((sc && sc.metrics) || []).map((x) => x.name));
  check(got.size === 2 && got.has('cpu-usage') && got.has('gc-heap-size'),
    `metrics_snapshot(instruments=[cpu-usage, gc-heap-size]) answers those two only: ${short([...got])}`);

  // heap_summary twice; the app allocates 20,001 TestApp.GcDumpHolder between: the second call's
  // growth names them.
  sc = good('heap_summary', await call('heap_summary', { pid: PID, top: 20 }), 'heap_summary (first)');
  await app('heap-graph 20000 1 16');
  const sc2 = good('heap_summary', await call('heap_summary', { pid: PID, top: 20 }), 'heap_summary (second)');
  const grew = sc2 && sc2.growth && (sc2.growth.top || []).find((x) => x.type === 'TestApp.GcDumpHolder');
  check(grew && grew.countDelta === 20001,
    `heap_summary's second call: TestApp.GcDumpHolder grew by 20001 objects (${short(grew)})`);
  check(!(sc && sc.growth && (sc.growth.top || []).length),
    `heap_summary's first call has no growth to report (${short(sc && sc.growth, 200)})`);
  await app('heap-graph-free');

  // trace_summary: the events of the provider asked for, counted.
  d = await during('trace_summary', { pid: PID, seconds: 2, providers: [{ name: 'DotMon-TestApp' }] }, 'events 300 8');
  sc = good('trace_summary', d.res);
  const blob = sc && (sc.byEvent || []).find((x) => x.provider === 'DotMon-TestApp' && x.event === 'Blob');
  check(blob && blob.count === 300, `trace_summary counts DotMon-TestApp's 300 Blob events: ${short(blob, 200)}`);
  // The same with a trace profile instead of providers: the runtime's GC events of two induced GCs.
  d = await during('trace_summary', { pid: PID, seconds: 2, profile: 'gc-collect', top: 50 }, 'collect 2');
  sc = good('trace_summary', d.res, 'trace_summary(profile=gc-collect)');
  const gc = ((sc && sc.byEvent) || []).filter((x) => x.provider === 'Microsoft-Windows-DotNETRuntime' && /GC/.test(x.event));
  const count = (ev) => (gc.find((x) => x.event === ev) || {}).count || 0;
  check(count('GCStart') >= 2 && count('GCEnd') >= 2,
    'trace_summary(profile=gc-collect) counts GCStart and GCEnd of the 2 induced GCs: ' +
    short(gc.map((x) => [x.event, x.count]), 300));

  // collection_rules: the configured rule, fired once (a Startup trigger).
  sc = good('collection_rules', await call('collection_rules', { pid: PID }));
  const rule = sc && (sc.rules || []).find((r) => r.name === RULE);
  check(rule && rule.state === 'Finished' && rule.lifetimeOccurrences === 1,
    `collection_rules lists ${RULE}, Finished after its one Startup firing: ${short(rule, 200)}`);
}

// A cpu_profile cancelled by the client (AbortSignal: the SDK sends notifications/cancelled).
async function cancelChecks(base) {
  const before = await opIds();
  const ac = new AbortController();
  const t0 = Date.now();
  const pr = client.callTool({ name: 'cpu_profile', arguments: { pid: PID, seconds: 20 } }, undefined,
    { signal: ac.signal, timeout: 60000 }).then((r) => ({ r }), (e) => ({ e }));
  const op = await newRunning(before);
  check(!!op, `the cpu_profile to cancel is a Running operation (${op && op.operationId})`);
  ac.abort('the e2e test cancels');
  const out = await pr;
  check(!!out.e, `the aborted callTool rejects at once (${out.e ? out.e.name || out.e : 'resolved: ' + short(out.r)})`);
  if (op) {
    const end = await waitFor(async () => {
      const r = await rest(`/operations/${op.operationId}`);
      return r.json && r.json.status !== 'Running' ? r.json : null;
    }, 10000);
    check(end && end.status === 'Cancelled', `the cancelled cpu_profile's operation ended Cancelled (${end && end.status}) ` +
      `${Date.now() - t0} ms after the call`);
  }
  const left = await waitFor(async () => (await runtimeSessions()) === base, 10000, 100);
  check(left, `no runtime session left after the cancel (${await runtimeSessions()}, ${base} before)`);
  const again = await call('cpu_profile', { pid: PID, seconds: 1 });
  check(again && again.isError !== true, `the runtime takes a new session right after: cpu_profile(seconds=1) ` +
    `answers (${again && again.isError ? short(textOf(again)) : 'ok'})`);
}

// 20 concurrent cpu_profile calls: the routes' admission (RequestLimits:Trace:MaxConcurrency, 3
// by default) refuses the extras with its 429 problem, given as tool errors.
async function concurrencyChecks(base) {
  const t0 = Date.now();
  const all = await Promise.all(Array.from({ length: 20 }, () =>
    client.callTool({ name: 'cpu_profile', arguments: { pid: PID, seconds: 2, top: 3 } }, undefined, { timeout: 60000 })
      .then((r) => ({ r }), (e) => ({ e }))));
  const thrown = all.filter((x) => x.e);
  const okd = all.filter((x) => x.r && x.r.isError !== true);
  const refused = all.filter((x) => x.r && x.r.isError === true);
  info(`20 concurrent cpu_profile calls in ${Date.now() - t0} ms: ${okd.length} answered, ${refused.length} tool errors, ` +
    `${thrown.length} protocol errors; a refusal: ${short(refused[0] && textOf(refused[0].r), 300)}`);
  check(thrown.length === 0, `no call is a protocol error or lost (${thrown.map((x) => x.e.message).slice(0, 3).join('; ')})`);
  check(okd.length >= 1 && okd.length <= 3, `the first ones run (${okd.length}, at most RequestLimits:Trace:MaxConcurrency 3)`);
  check(refused.length >= 17 && refused.every((x) => /429|at most \d+ may run at once|too many/i.test(textOf(x.r))),
    `the extras are tool errors with the routes' 429 refusal (${refused.length})`);
  const v = validators.get('cpu_profile');
  const invalid = okd.filter((x) => !x.r.structuredContent || (v && !v(x.r.structuredContent)));
  check(okd.length > 0 && invalid.length === 0,
    `the answered ones' structuredContent validates against cpu_profile's outputSchema (${invalid.length} not)`);
  const left = await waitFor(async () => (await runtimeSessions()) === base, 15000, 100);
  check(left, `every session ended after the 20 calls (${await runtimeSessions()}, ${base} before)`);
  check((await rest('/processes')).status === 200, 'dotmon still answers');
  let alive = false;
  try {
    await client.ping();
    alive = true;
  } catch {
    // alive stays false
  }
  check(alive, 'the MCP session still answers ping');
}

async function main() {
  const watchdog = setTimeout(() => {
    check(false, 'the MCP end-to-end test ends within 150 s');
    process.exit(1);
  }, 150000);
  const t0 = Date.now();
  await transportChecks();

  // The SDK's client: token in requestInit's headers.
  client = new Client({ name: 'dotmon-mcp-e2e', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(URL_MCP), { requestInit: { headers: AUTH } });
  await client.connect(transport);
  check(true, `the SDK's Client connects over Streamable HTTP with the token (session ${transport.sessionId})`);
  check(transport.protocolVersion === CURRENT, `negotiated protocol version ${transport.protocolVersion} (want ${CURRENT})`);
  const sv = client.getServerVersion();
  check(sv && sv.name, `serverInfo: ${short(sv)}`);
  check(client.getServerCapabilities() && client.getServerCapabilities().tools, 'the server declares the tools capability');

  const listed = await client.listTools();
  tools = new Map(listed.tools.map((t) => [t.name, t]));
  info(`tools/list: ${listed.tools.map((t) => t.name).join(', ')}`);
  for (const n of TOOLS) check(tools.has(n), `tools/list has ${n}`);
  check(!tools.has('dump'), 'tools/list has no dump tool (Mcp:Tools:dump:Enabled is not set)');
  for (const t of listed.tools) {
    check(typeof t.description === 'string' && t.description.length >= 20,
      `${t.name}: a description (${(t.description || '').length} chars)`);
    check(t.annotations && t.annotations.destructiveHint === false && typeof t.annotations.readOnlyHint === 'boolean',
      `${t.name}: annotations (readOnlyHint ${t.annotations && t.annotations.readOnlyHint}, destructiveHint false)`);
    schemaChecks(t, 'inputSchema');
    schemaChecks(t, 'outputSchema');
    if (PROCESS_TOOLS.includes(t.name)) {
      const p = (t.inputSchema && t.inputSchema.properties) || {};
      check(p.pid && p.uid && p.name, `${t.name} takes pid, uid and name`);
    }
  }
  const runtime = await runtimeSessions();
  info(`runtime sessions before the calls: ${runtime}`);

  await toolChecks();
  await cancelChecks(runtime);
  await concurrencyChecks(runtime);

  await client.close();
  clearTimeout(watchdog);
  info(`the MCP end-to-end checks took ${Date.now() - t0} ms`);
  rl.close();
  process.exit(fails ? 1 : 0);
}

main().catch((e) => {
  check(false, `the test itself failed: ${e && e.stack}`);
  process.exit(1);
});
