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
// Checked: 401 without a token (and with a wrong one); 403 for a foreign Origin, 2xx for the
// request's own; initialize's protocol-version negotiation (2025-11-25, 2025-06-18, an unknown
// one answered with the current), Mcp-Session-Id, a bad MCP-Protocol-Version header (400), an
// unknown session (404), DELETE ending a session; tools/list (every tool with a title-less name
// from the fixed set, a description, an inputSchema and an outputSchema of type object that ajv
// compiles as JSON Schema 2020-12 (or the draft its $schema names) and that are valid against
// the meta-schema; dump absent unless enabled); each tool called against the app: one text
// content, structuredContent valid against its outputSchema (ajv), and what the app does named
// (cpu_profile: the hot method first; exceptions: the thrown type; allocations: the allocated
// type; contention: the waiting method; gc_stats: the induced GCs; stacks: a parked thread's
// frame; recent_logs: the logged line; metrics_snapshot: System.Runtime values; heap_summary:
// the type allocated between two calls in the second call's growth; trace_summary: the asked
// provider's events counted; collection_rules: the configured rule; process_info and
// list_processes: the pid; by name too); bad arguments and an unknown tool; progress
// notifications while cpu_profile runs; a cancelled cpu_profile (AbortSignal: the SDK sends
// notifications/cancelled) ends its operation Cancelled with no runtime session left, and the
// runtime takes a new session right after; 20 concurrent cpu_profile calls: the extras are tool
// errors with the routes' 429 message, none is a protocol error, dotmon stays up and every
// session ends.

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
  if (!check(res && res.isError !== true, `${what}: not a tool error` + (res && res.isError ? `: ${short(textOf(res))}` : ''))) {
    return null;
  }
  const texts = (res.content || []).filter((c) => c.type === 'text');
  check(res.content && res.content.length === 1 && texts.length === 1 && texts[0].text.length > 0,
    `${what}: one text content (${(res.content || []).map((c) => c.type).join(',')}; ${texts[0] ? texts[0].text.length : 0} chars)`);
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

// Every array of objects in v, depth first in key order, with the key path that holds it.
function arrays(v, p = '', out = []) {
  if (Array.isArray(v)) {
    if (v.length && v.every((x) => x && typeof x === 'object' && !Array.isArray(x))) out.push({ path: p, items: v });
    v.forEach((x, i) => arrays(x, `${p}[${i}]`, out));
  } else if (v && typeof v === 'object') {
    for (const [k, x] of Object.entries(v)) arrays(x, p ? `${p}.${k}` : k, out);
  }
  return out;
}
// The first string member of an object (a method's, type's or name's).
const firstString = (o) => Object.values(o).find((x) => typeof x === 'string') || '';
// The first entry of the first list whose key path matches re, named by its first string member.
function firstOf(sc, re) {
  const a = arrays(sc).find((x) => re.test(x.path));
  return a ? { path: a.path, name: firstString(a.items[0]), item: a.items[0] } : { path: '', name: '', item: null };
}
const has = (sc, s) => JSON.stringify(sc || {}).includes(s);
const schemaProps = (name) => ((tools.get(name) || {}).inputSchema || {}).properties || {};

async function toolChecks() {
  // process_info / list_processes, and the three ways to name a process.
  let sc = good('list_processes', await call('list_processes', {}));
  check(sc && has(sc, String(PID)), `list_processes names the app's pid ${PID}`);
  sc = good('process_info', await call('process_info', { pid: PID }));
  check(sc && Object.values(sc).concat(sc.process ? Object.values(sc.process) : []).includes(PID),
    `process_info(pid): the pid ${PID} is in the answer`);
  const uid = sc && (sc.uid || (sc.process && sc.process.uid));
  const byName = good('process_info', await call('process_info', { name: 'TestApp' }), 'process_info(name)');
  check(byName && has(byName, String(PID)), `process_info(name=TestApp) is the same process (${PID})`);
  if (uid) {
    const byUid = good('process_info', await call('process_info', { uid }), 'process_info(uid)');
    check(byUid && has(byUid, String(PID)), `process_info(uid=${uid}) is the same process`);
  }
  const noPid = await call('process_info', { pid: 1 });
  check(noPid && noPid.isError === true && textOf(noPid).length > 0,
    `process_info(pid=1), no such .NET process: a tool error with a message (${short(textOf(noPid), 200)})`);

  // cpu_profile: the hot method first; progress notifications while it runs.
  let d = await during('cpu_profile', { pid: PID, seconds: 2, top: 5 }, 'hot 2600');
  sc = good('cpu_profile', d.res);
  if (sc) {
    const top = firstOf(sc, /excl|top|method/i);
    check(top.name.includes(HOT), `cpu_profile: the first method (${top.path}) is the app's hot ${HOT}: ${top.name}`);
  }
  check(d.progress.length > 0, `cpu_profile: progress notifications while it runs (${d.progress.length}: ${short(d.progress, 200)})`);
  check(d.progress.every((p, i) => i === 0 || p.progress >= d.progress[i - 1].progress),
    'cpu_profile: progress never goes back');

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

  // exceptions: the thrown type.
  d = await during('exceptions', { pid: PID, seconds: 2 }, 'throw-n 40');
  sc = good('exceptions', d.res);
  check(sc && has(sc, 'TestApp.ProfileKindsException'), 'exceptions names the thrown TestApp.ProfileKindsException');
  check(sc && has(sc, 'ThrowKnown'), 'exceptions names the throw site TestApp.ProfileKinds.ThrowKnown');

  // allocations: the type allocated most.
  d = await during('allocations', { pid: PID, seconds: 2 }, 'alloc-mix 1500');
  sc = good('allocations', d.res);
  if (sc) {
    const top = firstOf(sc, /type|top|alloc/i);
    check(top.name.includes('TestApp.BigAllocType'), `allocations: the first type (${top.path}) is TestApp.BigAllocType: ${top.name}`);
  }

  // contention: the waiting method.
  d = await during('contention', { pid: PID, seconds: 2 }, 'contend 1500');
  sc = good('contention', d.res);
  check(sc && has(sc, 'HoldLock'), 'contention names the contended TestApp.ProfileKinds.HoldLock');

  // gc_stats: three induced gen2 GCs.
  d = await during('gc_stats', { pid: PID, seconds: 2 }, 'collect 3');
  sc = good('gc_stats', d.res);
  check(sc && /induced/i.test(JSON.stringify(sc)), 'gc_stats: the induced GCs are there');

  // stacks: a parked thread's frames.
  const parked = await app('park');
  sc = good('stacks', await call('stacks', { pid: PID }));
  check(sc && (has(sc, 'A.B.Wait') || has(sc, 'C.D.Spin')), `stacks shows the parked threads' A.B.Wait / C.D.Spin (${parked})`);
  await app('unpark');

  // recent_logs: a line logged while it listens.
  const line = `mcp-e2e log line ${process.pid}`;
  const logArgs = { pid: PID, seconds: 2 };
  const lp = schemaProps('recent_logs');
  if (lp.level) logArgs.level = (lp.level.enum || []).find((x) => /^info/i.test(x)) || 'Information';
  d = await during('recent_logs', logArgs, `log Warning ${line}`);
  sc = good('recent_logs', d.res);
  check(sc && has(sc, line), `recent_logs holds the logged line "${line}"`);
  if (lp.category) {
    const cat = { ...logArgs, category: 'TestApp.Other' };
    d = await during('recent_logs', cat, `log-cat TestApp.Other Warning other ${line}`);
    sc = good('recent_logs', d.res, 'recent_logs(category)');
    check(sc && has(sc, `other ${line}`), 'recent_logs(category=TestApp.Other) holds the line of that category');
  }

  // metrics_snapshot: System.Runtime values.
  d = await during('metrics_snapshot', { pid: PID, seconds: 2 }, null);
  sc = good('metrics_snapshot', d.res);
  const numbers = (v) => (typeof v === 'number' ? 1 : v && typeof v === 'object' ? Object.values(v).reduce((n, x) => n + numbers(x), 0) : 0);
  check(sc && has(sc, 'System.Runtime') && numbers(sc) > 3, `metrics_snapshot has System.Runtime values (${numbers(sc)} numbers)`);

  // heap_summary twice; the app allocates 20,001 TestApp.GcDumpHolder between: the second call's
  // growth names them.
  sc = good('heap_summary', await call('heap_summary', { pid: PID, top: 20 }), 'heap_summary (first)');
  await app('heap-graph 20000 1 16');
  const sc2 = good('heap_summary', await call('heap_summary', { pid: PID, top: 20 }), 'heap_summary (second)');
  if (sc2) {
    const growth = arrays(sc2).find((x) => /grow|diff|delta|change/i.test(x.path));
    check(growth && JSON.stringify(growth.items).includes('GcDumpHolder'),
      `heap_summary's second call: TestApp.GcDumpHolder in its growth (${growth ? growth.path : 'no growth list'}: ${short(growth && growth.items, 300)})`);
  }
  await app('heap-graph-free');

  // trace_summary: the events of the provider asked for, counted.
  const tp = schemaProps('trace_summary');
  const provItems = tp.providers && tp.providers.items;
  const prov = provItems && provItems.type === 'object' ? [{ name: 'DotMon-TestApp' }] : ['DotMon-TestApp'];
  d = await during('trace_summary', { pid: PID, seconds: 2, providers: prov }, 'events 300 8');
  sc = good('trace_summary', d.res);
  if (sc) {
    const counted = arrays(sc).flatMap((x) => x.items).filter((o) => JSON.stringify(o).includes('DotMon-TestApp'));
    const n = counted.map((o) => Object.entries(o).filter(([k, v]) => typeof v === 'number' && /count|events/i.test(k))
      .map(([, v]) => v)).flat();
    check(counted.length > 0 && n.some((x) => x >= 300),
      `trace_summary counts DotMon-TestApp's 300 Blob events: ${short(counted, 300)}`);
  }

  // collection_rules: the configured rule.
  sc = good('collection_rules', await call('collection_rules', { pid: PID }));
  check(sc && has(sc, RULE), `collection_rules lists the configured rule ${RULE}`);
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
    check(typeof t.description === 'string' && t.description.length >= 20, `${t.name}: a description (${(t.description || '').length} chars)`);
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
