# SPDX-License-Identifier: MIT
"""CorsConfiguration:AllowedOrigins over real HTTP, as dotnet-monitor applies it (ASP.NET Core's
CORS middleware with WithOrigins(list split on ';'), AllowAnyHeader, AllowAnyMethod, after
authentication): a preflight is answered 204 without a token, with the allow headers for a listed
origin and none for another; an authenticated request from a listed origin gets
Access-Control-Allow-Origin; a request without a token is still 401 (and gets no CORS header);
without the setting there is no CORS at all. dotmon with authentication on, no .NET app.
The setting comes once from a settings file (dotnet-monitor's JSON form) and once from the
environment (DotnetMonitor_CorsConfiguration__AllowedOrigins)."""

import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from dmtest import check, free_port, http_request, start_dotmon, stop, verdict  # noqa: E402

UI = "https://ui.example.com"
OTHER = "https://other.example.com:8443"
EVIL = "https://evil.example.net"
ACAO = "Access-Control-Allow-Origin"


def header(resp, name):
    return resp.getheader(name)


def preflight(port, origin, method="GET", req_headers="authorization"):
    h = {"Origin": origin, "Access-Control-Request-Method": method}
    if req_headers is not None:
        h["Access-Control-Request-Headers"] = req_headers
    return http_request(port, "/processes", method="OPTIONS", headers=h)


def check_policy(port, auth, how):
    # Preflight from a listed origin: 204, no token needed, the allow headers echo the request.
    r, body = preflight(port, UI, "POST", "Authorization, Content-Type")
    check(r.status == 204 and body == b"", f"{how}: preflight from a listed origin is 204 (got {r.status})")
    check(header(r, ACAO) == UI, f"{how}: preflight echoes the origin ({header(r, ACAO)})")
    check(header(r, "Access-Control-Allow-Methods") == "POST",
          f"{how}: preflight allows the requested method ({header(r, 'Access-Control-Allow-Methods')})")
    allow_h = (header(r, "Access-Control-Allow-Headers") or "").lower().split(",")
    check("authorization" in allow_h and "content-type" in allow_h,
          f"{how}: preflight allows the requested headers, Authorization among them ({allow_h})")
    check(header(r, "Vary") == "Origin", f"{how}: preflight says Vary: Origin")
    check(header(r, "Access-Control-Allow-Credentials") is None,
          f"{how}: no Access-Control-Allow-Credentials (dotnet-monitor allows none)")
    # The second listed origin (with a port) too.
    r, _ = preflight(port, OTHER)
    check(r.status == 204 and header(r, ACAO) == OTHER, f"{how}: the second listed origin is allowed")
    # Preflight from an origin not listed: 204 as ASP.NET Core answers it, but no allow header.
    r, body = preflight(port, EVIL, "DELETE")
    check(r.status == 204, f"{how}: preflight from another origin is 204 (got {r.status})")
    check(not any(k.lower().startswith("access-control-") for k, _ in r.getheaders()),
          f"{how}: and carries no Access-Control-* header ({r.getheaders()})")
    # An origin that only looks like a listed one.
    r, _ = preflight(port, UI + ".evil.net")
    check(header(r, ACAO) is None, f"{how}: a listed origin's prefix does not count")

    # An authenticated request from the listed origin: its answer carries the header.
    r, body = http_request(port, "/processes", headers={"Origin": UI, "Authorization": auth})
    check(r.status == 200 and isinstance(json.loads(body), list),
          f"{how}: authenticated GET from a listed origin is 200 (got {r.status})")
    check(header(r, ACAO) == UI, f"{how}: and carries {ACAO}: {UI} ({header(r, ACAO)})")
    # The same from another origin: answered (CORS is the browser's check) without the header.
    r, _ = http_request(port, "/processes", headers={"Origin": EVIL, "Authorization": auth})
    check(r.status == 200 and header(r, ACAO) is None,
          f"{how}: GET from another origin gets no {ACAO} (status {r.status})")
    # An Origin header never stands in for a token.
    r, _ = http_request(port, "/processes", headers={"Origin": UI})
    check(r.status == 401, f"{how}: GET from a listed origin without a token is 401 (got {r.status})")
    check(header(r, ACAO) is None, f"{how}: the 401 carries no {ACAO} (CORS runs after authentication)")
    r, _ = http_request(port, "/processes", method="OPTIONS", headers={"Origin": UI})
    check(r.status == 405, f"{how}: OPTIONS without Access-Control-Request-Method is no preflight "
          f"(405, got {r.status})")


def main():
    key = json.loads(subprocess.run([os.environ["DOTMON_BIN"], "generatekey", "-o", "machinejson"],
                                    capture_output=True, text=True, timeout=30, check=True).stdout)
    auth = key["AuthorizationHeader"]
    with tempfile.TemporaryDirectory(prefix="dotmon-cors-") as tmp:
        cases = [
            ("settings file", {"CorsConfiguration": {"AllowedOrigins": f"{UI};{OTHER}"}}, {}),
            ("environment", None, {"DotnetMonitor_CorsConfiguration__AllowedOrigins": f"{UI};{OTHER}"}),
        ]
        for how, settings, env in cases:
            args = ()
            if settings is not None:
                path = os.path.join(tmp, "settings.json")
                with open(path, "w") as f:
                    json.dump(settings, f)
                os.chmod(path, 0o600)
                args = ("--configuration-file-path", path)
            port = free_port()
            with open(os.path.join(tmp, f"dotmon-{how.replace(' ', '-')}.log"), "w") as log:
                dm = start_dotmon(tmp, port, log, key=key, env=env, args=args)
                try:
                    check_policy(port, auth, how)
                finally:
                    stop(dm)
            with open(log.name) as f:
                text = f.read()
            check("CorsConfiguration" not in text,
                  f"{how}: the setting is not reported as unknown or not implemented at start-up")

        # No setting: no CORS at all (a preflight is an OPTIONS like any other: 405).
        port = free_port()
        with open(os.path.join(tmp, "dotmon-off.log"), "w") as log:
            dm = start_dotmon(tmp, port, log, key=key)
            try:
                r, _ = preflight(port, UI)
                check(r.status == 405 and header(r, ACAO) is None,
                      f"unset: a preflight is 405 without CORS headers (got {r.status})")
                r, _ = http_request(port, "/processes", headers={"Origin": UI, "Authorization": auth})
                check(r.status == 200 and header(r, ACAO) is None, "unset: no header on an answer")
            finally:
                stop(dm)
    return verdict("cors")


if __name__ == "__main__":
    sys.exit(main())
