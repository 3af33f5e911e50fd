#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Who a process is (issue 34 item 2), with two real test apps: one started with POD_NAME,
POD_NAMESPACE and CONTAINER_NAME set (as Kubernetes' downward API sets them), one without any of
them (nor HOSTNAME). dotmon must:

  - add podName, podNamespace, containerName to the first one in /processes?extras=true and
    /process?extras=true, nothing of the kind to the second, and nothing to /processes without
    extras (dotnet-monitor's fields only);
  - select by pod=, namespace=, container= (beside pid=), with a 400 problem when nothing matches;
  - take a DefaultProcess filter by PodName (the first app is the default process);
  - label the first app's /metrics series pod, namespace, container, and not the second's.
"""

import json
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from dmtest import (App, check, close_log, fetch, free_port, prom_by_pid, settle, start_dotmon,  # noqa: E402
                    stop, verdict)

IDENTITY = {"POD_NAME": "web-7d4f9-x2k8q", "POD_NAMESPACE": "shop", "CONTAINER_NAME": "api"}
NONE = {"POD_NAME": None, "POD_NAMESPACE": None, "CONTAINER_NAME": None, "HOSTNAME": None}


def get(port, path):
    st, hdrs, body = fetch(f"http://127.0.0.1:{port}{path}")
    try:
        return st, hdrs, json.loads(body)
    except ValueError:
        return st, hdrs, body


def main():
    tmp = tempfile.mkdtemp(prefix="dotmon-identity-")
    os.chmod(tmp, 0o700)
    apps, dm, log = [], None, None
    try:
        named = App(tmp, env=dict(NONE, **IDENTITY))
        apps.append(named)
        plain = App(tmp, env=NONE)
        apps.append(plain)
        port, mport = free_port(), free_port()
        log = open(os.path.join(tmp, "dotmon.log"), "w+")
        dm = start_dotmon(tmp, port, log, [named.pid, plain.pid], metrics_port=mport,
                          env={"DotnetMonitor_DefaultProcess__Filters__0__PodName": IDENTITY["POD_NAME"]})

        st, _, procs = get(port, "/processes?extras=true")
        by_pid = {p.get("pid"): p for p in procs} if st == 200 else {}
        a, b = by_pid.get(named.pid, {}), by_pid.get(plain.pid, {})
        check(a.get("podName") == IDENTITY["POD_NAME"] and a.get("podNamespace") == "shop" and
              a.get("containerName") == "api",
              f"/processes?extras=true: the app with POD_NAME… is pod {a.get('podName')!r} in "
              f"{a.get('podNamespace')!r}, container {a.get('containerName')!r}")
        check(not any(k in b for k in ("podName", "podNamespace", "containerName", "podUid")),
              f"/processes?extras=true: the app without them has no pod or container name ({b})")
        # Both apps run in the same cgroup here: what dotmon says of it is the same for both.
        check(a.get("containerId") == b.get("containerId"),
              f"both apps share one container id or none ({a.get('containerId')}, {b.get('containerId')})")
        check(a.get("isDefault") is True and b.get("isDefault") is False,
              f"the DefaultProcess filter PodName={IDENTITY['POD_NAME']} picks the first app "
              f"(isDefault {a.get('isDefault')}, {b.get('isDefault')})")
        st, _, bare = get(port, "/processes")
        check(st == 200 and all(set(p) == {"pid", "uid", "name", "isDefault"} for p in bare),
              f"/processes without extras has dotnet-monitor's fields only ({bare})")

        st, _, p = get(port, "/process?extras=true")
        check(st == 200 and p.get("pid") == named.pid and p.get("podName") == IDENTITY["POD_NAME"],
              f"/process?extras=true (the default process): pid {p.get('pid') if st == 200 else st}, "
              f"podName {p.get('podName') if st == 200 else None}")
        for query, want in ((f"pod={IDENTITY['POD_NAME']}", named.pid),
                            (f"pod={IDENTITY['POD_NAME']}&namespace=shop", named.pid),
                            ("container=api", named.pid), ("namespace=shop", named.pid),
                            (f"pid={plain.pid}", plain.pid)):
            st, _, p = get(port, f"/process?{query}")
            check(st == 200 and p.get("pid") == want, f"/process?{query}: {st}, pid {p.get('pid') if st == 200 else p}")
        for query in ("pod=no-such-pod", f"pod={IDENTITY['POD_NAME']}&namespace=other",
                      f"pid={plain.pid}&pod={IDENTITY['POD_NAME']}", "pod="):
            st, hdrs, p = get(port, f"/process?{query}")
            check(st == 400 and hdrs.get("Content-Type", "").startswith("application/problem+json"),
                  f"/process?{query}: a 400 problem ({st} {p})")

        def scraped():
            st, _, body = fetch(f"http://127.0.0.1:{mport}/metrics", timeout=10)
            return body.decode(errors="replace") if st == 200 else ""

        cpu = r'^systemruntime_cpu_usage_ratio\{[^}]*pid="%d"'
        text = settle(scraped, lambda t: all(re.search(cpu % p.pid, t, re.M) for p in apps), 30, 0.5)
        lines = [ln for ln in text.splitlines() if ln.startswith("systemruntime_cpu_usage_ratio{")]
        mine = [ln for ln in lines if f'pid="{named.pid}"' in ln]
        other = [ln for ln in lines if f'pid="{plain.pid}"' in ln]
        check(len(mine) == 1 and f'pod="{IDENTITY["POD_NAME"]}"' in mine[0] and 'namespace="shop"' in mine[0]
              and 'container="api"' in mine[0],
              f"/metrics: the first app's series carry pod, namespace, container ({mine})")
        check(len(other) == 1 and "pod=" not in other[0] and "namespace=" not in other[0],
              f"/metrics: the second app's series carry no pod or namespace ({other})")
        by_pid, _, bad = prom_by_pid(text)
        check(not bad and str(named.pid) in by_pid and str(plain.pid) in by_pid,
              f"/metrics parses line by line, both apps' series by pid ({len(bad)} bad lines)")
    finally:
        for a in apps:
            a.kill()
        stop(dm)
        close_log(log)
        shutil.rmtree(tmp, ignore_errors=True)
    return verdict("identity")


if __name__ == "__main__":
    sys.exit(main())
