#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""/mcp, MCP's Streamable HTTP transport (issue 36, item 1), end to end against the real dotmon
with authentication on and the real test app (docs/mcp.md, "Transport"):
  - without a token: 401, as every route;
  - initialize in each revision dotmon speaks (2025-11-25, 2025-06-18, 2025-03-26) echoes it, an
    unknown one is answered with the latest; each makes a session (Mcp-Session-Id, 32 hex digits);
    serverInfo names dotmon, capabilities say tools;
  - a request without Mcp-Session-Id: 400; with an unknown one: 404; DELETE: 204, and the session
    is gone (404); an unsupported MCP-Protocol-Version: 400;
  - notifications/initialized and a client's response: 202 without a body; ping: {};
  - tools/list: every tool with name, title, description, inputSchema and outputSchema (object
    schemas) and annotations; list_processes among them;
  - tools/call list_processes answered as JSON (an Accept that does not name text/event-stream)
    and as an SSE stream (one that does): structuredContent.processes lists the test app, the
    text names its pid; an unknown tool: -32602; an unknown method: -32601;
  - refusals: malformed JSON (-32700), a batch (-32600), Content-Type text/plain (415), an Accept
    without text/event-stream (406), a wrong Origin (403; the request's own origin and one of
    Mcp:AllowedOrigins are served), a rebound name as Host and Origin (403), GET (405, Allow:
    POST, DELETE);
  - /info?extras=true counts sessions and calls;
  - with the tools that run for a while (cpu_profile, stacks; the transport's own build has only
    list_processes, and then says these are not checked): progress notifications that rise to
    the call's seconds, then the result; notifications/cancelled (202; the stream ends without an
    answer) and a client that hangs up both stop the runtime session; SIGTERM during a call
    answers it with a tool error;
  - a second dotmon with Mcp:MaxSessions 2 and Timeouts:McpSessionIdleMs 1500: a third session
    replaces the one idle the longest, and an idle session expires; with the long tools, also
    Mcp:MaxCallsPerSession 1 (a second call is a tool error in the routes' 429 words) and
    Timeouts:McpCallMs 2000 against a /stacks of 5 s (a tool error at the deadline, the runtime
    session stopped);
  - without Mcp:Enabled, /mcp is a 404 naming the setting;
  - each dotmon stops with status 0 and no sanitizer report in its log.

Environment: DOTMON_BIN, DOTMON_TESTAPP_DIR, DOTNET_EXE.
"""

import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from dmtest import FAILS, App, check, free_port, start_dotmon, stop, verdict, wait_for  # noqa: E402
import dmtest  # noqa: E402

LATEST, PREVIOUS, OLDEST = "2025-11-25", "2025-06-18", "2025-03-26"
BOTH = "application/json, text/event-stream"
ALLOWED_ORIGIN = "http://agent.example:6274"


class Client:
    """A bare MCP client over http.client: one connection per request, the token on each."""

    def __init__(self, port, auth):
        self.port, self.auth = port, auth

    def request(self, method, body=None, session=None, headers=None, raw=None, auth=True):
        h = {"Content-Type": "application/json", "Accept": BOTH}
        if auth:
            h["Authorization"] = self.auth
        if session is not None:
            h["Mcp-Session-Id"] = session
        h.update(headers or {})
        h = {k: v for k, v in h.items() if v is not None}
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            c.request(method, "/mcp", body=data, headers=h)
            r = c.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            c.close()

    def post(self, body, session=None, headers=None, raw=None):
        return self.request("POST", body, session, headers, raw)

    def initialize(self, version, headers=None):
        st, h, body = self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                                 "params": {"protocolVersion": version, "capabilities": {},
                                            "clientInfo": {"name": "check_mcp_transport", "version": "1"}}},
                                headers=headers)
        doc = json.loads(body) if st == 200 else {}
        return st, h.get("mcp-session-id"), doc


def sse_events(body):
    """The events of a text/event-stream body: [(event name, data)]."""
    events = []
    for block in body.decode().split("\n\n"):
        if not block.strip():
            continue
        name, data = "message", []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip(" ") if line.startswith("data: ") else line[5:])
        events.append((name, "\n".join(data)))
    return events


def rpc(body):
    try:
        return json.loads(body)
    except ValueError:
        return {}


def check_initialize(cl):
    for asked, want in ((LATEST, LATEST), (PREVIOUS, PREVIOUS), (OLDEST, OLDEST), ("2024-11-05", LATEST),
                        ("2099-01-01", LATEST)):
        st, sid, doc = cl.initialize(asked)
        res = doc.get("result", {})
        check(st == 200 and res.get("protocolVersion") == want,
              f"initialize asking {asked}: answered {res.get('protocolVersion')} (want {want}, status {st})")
        check(sid is not None and re.fullmatch(r"[0-9a-f]{32}", sid) is not None,
              f"initialize asking {asked}: Mcp-Session-Id is 32 hex digits ({sid})")
    check(res.get("serverInfo", {}).get("name") == "dotmon" and res.get("serverInfo", {}).get("version"),
          f"serverInfo names dotmon and its version: {res.get('serverInfo')}")
    check(res.get("capabilities", {}).get("tools") == {"listChanged": False},
          f"capabilities: tools, the list fixed: {res.get('capabilities')}")
    check("list_processes" in res.get("instructions", ""), "instructions say to start with list_processes")
    st, sid, doc = cl.initialize(LATEST)
    check(st == 200 and doc.get("id") == 0, "a new session for the rest")
    return sid


def check_session_rules(cl, sid):
    ping = {"jsonrpc": "2.0", "id": "p1", "method": "ping"}
    st, _, body = cl.post(ping)
    check(st == 400 and rpc(body).get("error", {}).get("code") == -32000,
          f"a request without Mcp-Session-Id: 400 ({st} {body[:120]})")
    st, _, body = cl.post(ping, session="0" * 32)
    check(st == 404 and rpc(body).get("error", {}).get("code") == -32001,
          f"an unknown session: 404 ({st} {body[:120]})")
    st, _, body = cl.post(ping, session="not-a-session")
    check(st == 404, f"a malformed session id: 404 ({st})")
    st, _, body = cl.post(ping, session=sid)
    check(st == 200 and rpc(body) == {"jsonrpc": "2.0", "id": "p1", "result": {}}, f"ping: {{}} ({st} {body})")
    st, _, body = cl.post(ping, session=sid, headers={"MCP-Protocol-Version": PREVIOUS})
    check(st == 200, f"MCP-Protocol-Version {PREVIOUS}: served ({st})")
    st, _, body = cl.post(ping, session=sid, headers={"MCP-Protocol-Version": "2024-11-05"})
    check(st == 400, f"an unsupported MCP-Protocol-Version: 400 ({st} {body[:120]})")
    st, h, body = cl.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session=sid)
    check(st == 202 and body == b"", f"notifications/initialized: 202 without a body ({st} {body!r})")
    st, h, body = cl.post({"jsonrpc": "2.0", "id": 99, "result": {}}, session=sid)
    check(st == 202 and body == b"", f"a client's response: 202 ({st})")
    st, h, body = cl.post({"jsonrpc": "2.0", "method": "notifications/cancelled",
                           "params": {"requestId": 12345, "reason": "none such"}}, session=sid)
    check(st == 202, f"notifications/cancelled of no call: 202 ({st})")
    st, _, body = cl.post({"jsonrpc": "2.0", "id": 5, "method": "resources/list"}, session=sid)
    check(st == 200 and rpc(body).get("error", {}).get("code") == -32601, f"an unknown method: -32601 ({body[:120]})")
    st, _, body = cl.post({"jsonrpc": "2.0", "id": 6, "method": "initialize",
                           "params": {"protocolVersion": LATEST}}, session=sid)
    check(st == 400, f"initialize inside a session: 400 ({st})")


def check_tools(cl, sid, pid):
    st, _, body = cl.post({"jsonrpc": "2.0", "id": 10, "method": "tools/list", "params": {"cursor": "x"}}, session=sid)
    tools = rpc(body).get("result", {}).get("tools", [])
    check(st == 200 and tools and "nextCursor" not in rpc(body).get("result", {}),
          f"tools/list: one page of {len(tools)} tool(s), cursor ignored")
    for t in tools:
        ok = (isinstance(t.get("name"), str) and t.get("title") and t.get("description")
              and t.get("inputSchema", {}).get("type") == "object"
              and t.get("outputSchema", {}).get("type") == "object"
              and all(k in t.get("annotations", {}) for k in ("readOnlyHint", "destructiveHint", "idempotentHint")))
        check(ok, f"tools/list: {t.get('name')} has title, description, object schemas and annotations")
    check(any(t.get("name") == "list_processes" for t in tools), "tools/list names list_processes")

    call = {"jsonrpc": "2.0", "id": 11, "method": "tools/call", "params": {"name": "list_processes", "arguments": {}}}
    # JSON: the Accept allows an event stream through a range only.
    st, h, body = cl.post(call, session=sid, headers={"Accept": "application/json, text/*"})
    res = rpc(body).get("result", {})
    procs = res.get("structuredContent", {}).get("processes", [])
    check(st == 200 and h.get("content-type", "").startswith("application/json"),
          f"tools/call answered as JSON ({st}, {h.get('content-type')})")
    check(any(p.get("pid") == pid for p in procs) and not res.get("isError"),
          f"tools/call list_processes: structuredContent lists the test app ({pid}): {procs}")
    text = (res.get("content") or [{}])[0]
    check(text.get("type") == "text" and str(pid) in text.get("text", ""), f"and its text names it: {text}")
    # SSE: the Accept names text/event-stream.
    call["id"] = "sse-12"
    call["params"]["_meta"] = {"progressToken": "t12"}
    st, h, body = cl.post(call, session=sid)
    events = sse_events(body) if st == 200 else []
    check(st == 200 and h.get("content-type", "").startswith("text/event-stream")
          and h.get("cache-control") == "no-cache",
          f"tools/call answered as SSE ({st}, {h.get('content-type')}, Cache-Control {h.get('cache-control')})")
    last = rpc(events[-1][1].encode()) if events else {}
    check(len(events) >= 1 and events[-1][0] == "message" and last.get("id") == "sse-12"
          and any(p.get("pid") == pid
                  for p in last.get("result", {}).get("structuredContent", {}).get("processes", [])),
          f"the stream's last event is the result: {events[-1:]}")
    st, _, body = cl.post({"jsonrpc": "2.0", "id": 13, "method": "tools/call", "params": {"name": "no_such_tool"}},
                          session=sid)
    check(st == 200 and rpc(body).get("error", {}).get("code") == -32602, f"an unknown tool: -32602 ({body[:160]})")
    st, _, body = cl.post({"jsonrpc": "2.0", "id": 14, "method": "tools/call",
                           "params": {"name": "list_processes", "arguments": {"pid": 1}}}, session=sid,
                          headers={"Accept": "application/json, text/*"})
    res = rpc(body).get("result", {})
    check(res.get("isError") is True and "structuredContent" not in res,
          f"a bad argument: a tool error without structuredContent ({body[:160]})")


def check_refusals(cl, sid, port):
    st, _, body = cl.post(None, session=sid, raw=b'{"jsonrpc":"2.0","id":1,"method":')
    err = rpc(body)
    check(st == 400 and err.get("error", {}).get("code") == -32700 and err.get("id", 0) is None,
          f"malformed JSON: 400, -32700, id null ({st} {body[:120]})")
    st, _, body = cl.post([{"jsonrpc": "2.0", "id": 1, "method": "ping"}], session=sid)
    check(st == 400 and rpc(body).get("error", {}).get("code") == -32600, f"a batch: 400, -32600 ({st} {body[:160]})")
    st, _, body = cl.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, session=sid,
                          headers={"Content-Type": "text/plain"})
    check(st == 415, f"Content-Type text/plain: 415 ({st})")
    st, _, body = cl.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, session=sid,
                          headers={"Accept": "application/json"})
    check(st == 406, f"an Accept without text/event-stream: 406 ({st})")
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    st, h, body = cl.post(ping, session=sid, headers={"Origin": "http://evil.example"})
    check(st == 403 and rpc(body).get("error", {}).get("code") == -32000, f"a wrong Origin: 403 ({st} {body[:120]})")
    st, _, _ = cl.post(ping, session=sid, headers={"Origin": f"http://127.0.0.1:{port}"})
    check(st == 200, f"the request's own origin: served ({st})")
    st, _, _ = cl.post(ping, session=sid, headers={"Origin": ALLOWED_ORIGIN})
    check(st == 200, f"an origin of Mcp:AllowedOrigins: served ({st})")
    st, _, _ = cl.post(ping, session=sid, headers={"Origin": ALLOWED_ORIGIN + ".evil"})
    check(st == 403, f"an origin that only starts like an allowed one: 403 ({st})")
    # DNS rebinding: a page of the attacker's name, resolved to dotmon's address, sends that name
    # as Host and as Origin; its origin is "own", but only an address or localhost counts as such.
    st, _, _ = cl.post(ping, session=sid, headers={"Origin": f"http://evil.example:{port}",
                                                   "Host": f"evil.example:{port}"})
    check(st == 403, f"a rebound name (Host and Origin evil.example): 403 ({st})")
    st, _, _ = cl.post(ping, session=sid, headers={"Origin": f"http://localhost:{port}", "Host": f"localhost:{port}"})
    check(st == 200, f"Host and Origin localhost: served ({st})")
    st, h, body = cl.request("GET", session=sid, headers={"Accept": "text/event-stream"})
    check(st == 405 and h.get("allow") == "POST, DELETE", f"GET: 405, Allow: POST, DELETE ({st} {h.get('allow')})")
    st, h, body = cl.request("POST", ping, session=sid, auth=False)
    check(st == 401 and "bearer" in h.get("www-authenticate", "").lower(), f"without a token: 401 ({st})")
    st, h, body = cl.request("POST", ping, session=sid, headers={"Authorization": "Bearer nonsense"})
    check(st == 401, f"a bad token: 401 ({st})")


def check_delete(cl):
    st, sid, _ = cl.initialize(LATEST)
    st, _, body = cl.request("DELETE")
    check(st == 400, f"DELETE without Mcp-Session-Id: 400 ({st})")
    st, _, body = cl.request("DELETE", session=sid)
    check(st == 204 and body == b"", f"DELETE: 204 ({st})")
    st, _, _ = cl.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, session=sid)
    check(st == 404, f"after DELETE the session is gone: 404 ({st})")
    st, _, _ = cl.request("DELETE", session=sid)
    check(st == 404, f"DELETE again: 404 ({st})")


class Stream:
    """A tools/call answered as SSE, read in a thread as its events come: events [(seconds since
    the call, message)], ended (the stream ended), close() hangs up."""

    def __init__(self, port, auth, session, body):
        self.events, self.ended, self.status = [], threading.Event(), 0
        self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.c.request("POST", "/mcp", body=json.dumps(body).encode(),
                       headers={"Authorization": auth, "Content-Type": "application/json", "Accept": BOTH,
                                "Mcp-Session-Id": session})
        self.t0 = time.monotonic()
        self.t = threading.Thread(target=self.read, daemon=True)
        self.t.start()

    def read(self):
        try:
            r = self.c.getresponse()
            self.status = r.status
            data = []
            for line in iter(r.readline, b""):  # (the body, chunked framing undone)
                line = line.decode().rstrip("\r\n")
                if line.startswith("data: "):
                    data.append(line[6:])
                elif line == "" and data:
                    self.events.append((time.monotonic() - self.t0, rpc("\n".join(data).encode())))
                    data = []
        except (OSError, http.client.HTTPException, ValueError, AttributeError):
            pass  # (AttributeError: http.client, when close() hung up under a read)
        self.ended.set()

    def result(self):
        return next((m for _, m in self.events if "result" in m or "error" in m), None)

    def close(self):
        try:
            self.c.sock.shutdown(2)
        except OSError:
            pass
        self.c.close()


def runtime_sessions(port, auth):
    """dotmon_runtime_sessions of GET /metrics/dotmon (-1 when it cannot be read)."""
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("GET", "/metrics/dotmon", headers={"Authorization": auth})
        body = c.getresponse().read().decode()
        c.close()
    except (OSError, http.client.HTTPException):
        return -1
    m = re.search(r"^dotmon_runtime_sessions (\S+)", body, re.M)
    return int(float(m.group(1))) if m else -1


def profile_call(rid, pid, seconds, token=None):
    body = {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
            "params": {"name": "cpu_profile", "arguments": {"pid": pid, "seconds": seconds}}}
    if token is not None:
        body["params"]["_meta"] = {"progressToken": token}
    return body


def check_long_calls(cl, sid, port, auth, pid):
    """Calls that run for seconds (cpu_profile: a /profile session): progress, cancellation by
    notifications/cancelled and by a client that leaves (the runtime session stops), and the
    per-session bound."""
    st = Stream(port, auth, sid, profile_call(20, pid, 3, token="prog"))
    st.ended.wait(60)
    prog = [(t, m.get("params", {})) for t, m in st.events if m.get("method") == "notifications/progress"]
    res = st.result() or {}
    values = [p.get("progress") for _, p in prog]
    check(st.status == 200 and len(prog) >= 2 and all(p.get("progressToken") == "prog" and p.get("total") == 3
                                                      for _, p in prog[:2]),
          f"cpu_profile of 3 s: notifications/progress with the token and total 3 s ({len(prog)}: {values})")
    check(values == sorted(values) and len(set(values)) == len(values), f"progress only rises: {values}")
    check(res.get("id") == 20 and "structuredContent" in res.get("result", {}) and st.events[-1][1] is res,
          f"then the result, last: {str(res)[:200]}")
    check(wait_for(lambda: runtime_sessions(port, auth) == 0, 20), "no runtime session left after the call")

    st = Stream(port, auth, sid, profile_call(21, pid, 30))
    started = wait_for(lambda: runtime_sessions(port, auth) == 1, 10)
    t = time.monotonic()
    code, _, _ = cl.post({"jsonrpc": "2.0", "method": "notifications/cancelled",
                          "params": {"requestId": 21, "reason": "test"}}, session=sid)
    st.ended.wait(20)
    check(started and code == 202 and st.ended.is_set() and st.result() is None,
          f"notifications/cancelled: 202, the call's stream ends without an answer ({code}, "
          f"{time.monotonic() - t:.1f} s, {st.events})")
    check(wait_for(lambda: runtime_sessions(port, auth) == 0, 20),
          f"the cancelled call's runtime session stopped ({runtime_sessions(port, auth)})")

    st = Stream(port, auth, sid, profile_call(22, pid, 30))
    started = wait_for(lambda: runtime_sessions(port, auth) == 1, 10)
    st.close()
    check(started and wait_for(lambda: runtime_sessions(port, auth) == 0, 20),
          f"a client that leaves mid-call: its runtime session stopped ({runtime_sessions(port, auth)})")
    m = info_mcp(port, auth) or {}
    check(wait_for(lambda: (info_mcp(port, auth) or {}).get("callsInFlight") == 0, 10),
          f"no call left in flight: {m.get('callsInFlight')}")


def stacks_call(rid, pid):
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
            "params": {"name": "stacks", "arguments": {"pid": pid}}}


def check_limit_calls(cl, port, auth, pid):
    """Mcp:MaxCallsPerSession 1 and Timeouts:McpCallMs 2000, with /stacks sampling for 5 s
    (Timeouts:StacksSampleMs; the tool asks for no seconds): a second call while one runs is a
    tool error in the routes' 429 words; the first outlives its deadline and is answered with a
    tool error, its runtime session stopped."""
    _, sid, _ = cl.initialize(LATEST)
    st = Stream(port, auth, sid, stacks_call(30, pid))
    wait_for(lambda: (info_mcp(port, auth) or {}).get("callsInFlight") == 1, 10, 0.02)
    code, _, body = cl.post(stacks_call(31, pid), session=sid, headers={"Accept": "application/json, text/*"})
    res = rpc(body).get("result", {})
    text = (res.get("content") or [{}])[0].get("text", "")
    check(res.get("isError") is True and text.startswith("429 Too Many Requests:") and "Mcp:MaxCallsPerSession" in text,
          f"Mcp:MaxCallsPerSession 1: a second call is a tool error: {text}")
    st.ended.wait(30)
    res = (st.result() or {}).get("result", {})
    text = (res.get("content") or [{}])[0].get("text", "")
    check(res.get("isError") is True and "Timeouts:McpCallMs" in text,
          f"Timeouts:McpCallMs 2000: the call is answered with a tool error at its deadline: {text}")
    check(wait_for(lambda: runtime_sessions(port, auth) == 0, 20),
          f"the timed-out call's runtime session stopped ({runtime_sessions(port, auth)})")


def check_shutdown(dm, port, auth, sid, pid):
    """SIGTERM during a call: its client is answered with a tool error before dotmon goes."""
    st = Stream(port, auth, sid, profile_call(40, pid, 30))
    wait_for(lambda: runtime_sessions(port, auth) == 1, 10)
    stop(dm)
    st.ended.wait(10)
    res = (st.result() or {}).get("result", {})
    text = (res.get("content") or [{}])[0].get("text", "")
    check(res.get("isError") is True and "shutting down" in text, f"shutdown: the call in flight is answered: {text}")


def info_mcp(port, auth):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request("GET", "/info?extras=true", headers={"Authorization": auth})
        r = c.getresponse()
        return json.loads(r.read()).get("mcp") if r.status == 200 else None
    finally:
        c.close()


def check_limits(key, auth, tmp, pid):
    """Mcp:MaxSessions 2 and a short idle time on a dotmon of its own; with pid (the long tools
    are there), Mcp:MaxCallsPerSession 1 and Timeouts:McpCallMs 2000 too."""
    port = free_port()
    env = {"DotnetMonitor_Mcp__Enabled": "true", "DotnetMonitor_Mcp__MaxSessions": "2",
           "DotnetMonitor_Timeouts__McpSessionIdleMs": "1500", "DotnetMonitor_Mcp__MaxCallsPerSession": "1",
           "DotnetMonitor_Timeouts__McpCallMs": "2000", "DotnetMonitor_Timeouts__StacksSampleMs": "5000"}
    with open(os.path.join(tmp, "dotmon-limits.log"), "w") as log:
        dm = start_dotmon(tmp, port, log, [pid] if pid else (), key=key, env=env)
        try:
            cl = Client(port, auth)
            if pid is not None:
                check_limit_calls(cl, port, auth, pid)
                wait_for(lambda: (info_mcp(port, auth) or {}).get("sessions") == 0, 10)
            ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
            _, s1, _ = cl.initialize(LATEST)
            _, s2, _ = cl.initialize(LATEST)
            cl.post(ping, session=s2)  # s1 is now the one idle the longest
            _, s3, _ = cl.initialize(LATEST)
            st1 = cl.post(ping, session=s1)[0]
            st2 = cl.post(ping, session=s2)[0]
            st3 = cl.post(ping, session=s3)[0]
            check((st1, st2, st3) == (404, 200, 200),
                  f"Mcp:MaxSessions 2: a third session replaced the one idle the longest ({st1}, {st2}, {st3})")
            t0 = time.monotonic()
            gone = wait_for(lambda: (info_mcp(port, auth) or {}).get("sessions") == 0, 10)
            check(gone and time.monotonic() - t0 >= 1.0,
                  f"idle sessions expire after Timeouts:McpSessionIdleMs ({time.monotonic() - t0:.1f} s)")
            check(cl.post(ping, session=s3)[0] == 404, "an expired session: 404")
            m = info_mcp(port, auth) or {}
            check(m.get("sessionsReplaced") == 1 and m.get("sessionsExpired") == (3 if pid else 2),
                  f"/info counts the replaced and expired sessions: {m}")
        finally:
            stop(dm)
    dmtest.stop_clean(dm, log.name, "limits")


def check_off(key, auth, tmp):
    port = free_port()
    with open(os.path.join(tmp, "dotmon-off.log"), "w") as log:
        dm = start_dotmon(tmp, port, log, key=key)
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            c.request("POST", "/mcp", body=b"{}", headers={"Authorization": auth, "Content-Type": "application/json"})
            r = c.getresponse()
            doc = rpc(r.read())
            c.close()
            check(r.status == 404 and "Mcp:Enabled" in doc.get("detail", ""),
                  f"Mcp:Enabled off: /mcp is a 404 naming the setting ({r.status} {doc})")
            check(info_mcp(port, auth) is None, "Mcp:Enabled off: /info has no mcp member")
        finally:
            stop(dm)
    dmtest.stop_clean(dm, log.name, "off")


def main():
    key = json.loads(subprocess.run([os.environ["DOTMON_BIN"], "generatekey", "-o", "machinejson"],
                                    capture_output=True, text=True, timeout=30, check=True).stdout)
    auth = key["AuthorizationHeader"]
    tmp = tempfile.mkdtemp(prefix="dotmon-mcp-")
    os.chmod(tmp, 0o700)
    app, dm, log = None, None, None
    t0 = time.monotonic()
    try:
        app = App(tmp)
        port = free_port()
        log = open(os.path.join(tmp, "dotmon.log"), "w+")
        dm = start_dotmon(tmp, port, log, [app.pid], key=key,
                          env={"DotnetMonitor_Mcp__Enabled": "true",
                               "DotnetMonitor_Mcp__AllowedOrigins": ALLOWED_ORIGIN})
        cl = Client(port, auth)
        sid = check_initialize(cl)
        check_session_rules(cl, sid)
        check_tools(cl, sid, app.pid)
        check_refusals(cl, sid, port)
        check_delete(cl)
        m = info_mcp(port, auth) or {}
        lp = next((t for t in m.get("tools", []) if t.get("name") == "list_processes"), {})
        check(m.get("sessions", 0) >= 1 and m.get("callsInFlight") == 0 and lp.get("calls") == 3
              and lp.get("errors") == 1,
              f"/info?extras=true: sessions, calls in flight, calls and errors per tool: {m}")
        names = {t.get("name") for t in m.get("tools", [])}
        long_tool = "cpu_profile" in names and "stacks" in names
        if long_tool:
            check_long_calls(cl, sid, port, auth, app.pid)
            check_shutdown(dm, port, auth, sid, app.pid)
        else:
            print("info no cpu_profile and stacks tools in this build: progress, cancellation, "
                  "the call bounds and shutdown are not checked", flush=True)
        stop(dm)
        log.flush()
        dmtest.stop_clean(dm, log.name, "main")
        dm = None
        check_limits(key, auth, tmp, app.pid if long_tool else None)
        check_off(key, auth, tmp)
    finally:
        if app is not None:
            app.kill()
        stop(dm)
        if log is not None:
            if FAILS:
                log.seek(0)
                sys.stderr.write(log.read()[-4000:])
            log.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"info the transport's checks took {time.monotonic() - t0:.1f} s", flush=True)
    return verdict("mcp transport")


if __name__ == "__main__":
    sys.exit(main())
