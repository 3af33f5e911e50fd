/* SPDX-License-Identifier: MIT */
/*
 * Writes the generated seeds of tests/fuzz/corpus/ (see corpus/README.md for the others):
 *   fuzz_make_seeds CORPUS_DIR
 * IPC replies and advertise messages are built with the codec's own writer (ipc_codec.h) in the
 * layouts of docs/ipc.md; tokens are signed with the test key of fuzz_jws.h (claims relative to
 * FUZZ_NOW) plus a few from auth_generate; JWKs come from auth_generate and from fresh OpenSSL
 * keys; request targets, trace bodies and settings follow docs/routes.md; requests for
 * fuzz_http_parse are hand-written good ones plus the records of tests/fixtures/bad_http up to
 * 4 KiB (read with the tests' own loader); fuzz_ev_exc's inputs are ExceptionThrown_V1 payloads and
 * ExceptionsConfiguration documents in fuzz_ev_exc.c's layout; fuzz_mcp_rpc's are MCP clients'
 * messages and header values. Keys made here are random,
 * so a rerun writes different (equally valid) auth seeds; everything else is byte-for-byte stable.
 * Only files named "gen-*" are written, so hand-made and captured seeds are left alone.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>

#include "auth.h"
#include "bad_http_corpus.h"
#include "fuzz_jws.h"
#include "ipc_cmd.h"
#include "ipc_codec.h"

static const char *root;
static int failures;

static void put(const char *target, const char *name, const void *p, size_t n)
{
    char path[512];
    int len = snprintf(path, sizeof(path), "%s/%s/gen-%s", root, target, name);
    if (len < 0 || (size_t)len >= sizeof(path)) {
        failures++;
        return;
    }
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(p, 1, n, f) != n) {
        fprintf(stderr, "cannot write %s: %s\n", path, strerror(errno));
        failures++;
    }
    if (f != NULL && fclose(f) != 0) {
        failures++;
    }
}

static void put_str(const char *target, const char *name, const char *s)
{
    put(target, name, s, strlen(s));
}

/* Seeds <prefix>-00, <prefix>-01, … from a list of strings. */
static void put_strs(const char *target, const char *prefix, const char *const *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char name[64];
        snprintf(name, sizeof(name), "%s-%02zu", prefix, i);
        put_str(target, name, v[i]);
    }
}

static void check(int rc, const char *what)
{
    if (rc != 0) {
        fprintf(stderr, "%s failed: %d\n", what, rc);
        failures++;
    }
}

/* ---- IPC --------------------------------------------------------------------------------- */

static const uint8_t cookie[IPC_GUID_SIZE] = {0xe0, 0x04, 0x25, 0x3f, 0x89, 0x4f, 0xd3, 0x11,
                                              0x9a, 0x0c, 0x03, 0x05, 0xe8, 0x2c, 0x33, 0x01};

static void put_wr(const char *name, const struct ipc_wr *w)
{
    put("fuzz_ipc_reply", name, w->p, w->len);
}

/* Server/OK or Server/Error with a payload written by fill. */
static void reply(struct ipc_wr *w, uint8_t id, size_t *start)
{
    check(ipc_wr_message_begin(w, IPC_SET_SERVER, id, start), "message_begin");
}

static void ipc_seeds(void)
{
    static uint8_t b[8192];
    struct ipc_wr w;
    size_t start = 0;

    ipc_wr_init(&w, b, sizeof(b));
    reply(&w, IPC_SERVER_OK, &start);
    check(ipc_wr_u32(&w, IPC_HR_S_OK) || ipc_wr_message_end(&w, start), "ok");
    put_wr("ok-hresult", &w);

    ipc_wr_init(&w, b, sizeof(b));
    reply(&w, IPC_SERVER_OK, &start);
    check(ipc_wr_u64(&w, 0x00005e5510000001ull) || ipc_wr_message_end(&w, start), "session");
    put_wr("ok-session", &w);

    ipc_wr_init(&w, b, sizeof(b));
    reply(&w, IPC_SERVER_ERROR, &start);
    check(ipc_wr_u32(&w, IPC_HR_NOTSUPPORTED) || ipc_wr_message_end(&w, start), "error");
    put_wr("error-notsupported", &w);

    /* GenerateCoreDump3's error: HRESULT then the createdump message. */
    ipc_wr_init(&w, b, sizeof(b));
    reply(&w, IPC_SERVER_ERROR, &start);
    check(ipc_wr_u32(&w, IPC_HR_FAIL) ||
              ipc_wr_string(&w, "Problem launching createdump (may not have execute "
                                "permissions): execve(/usr/share/dotnet/createdump) FAILED "
                                "Permission denied (13)") ||
              ipc_wr_message_end(&w, start),
          "dump3 error");
    put_wr("error-dump3-message", &w);

    /* ProcessInfo3 version 2: a future field after the RID, which must be ignored. */
    ipc_wr_init(&w, b, sizeof(b));
    reply(&w, IPC_SERVER_OK, &start);
    check(ipc_wr_u32(&w, 2) || ipc_wr_u64(&w, 4242) || ipc_wr_guid(&w, cookie) ||
              ipc_wr_string(&w, "/app/h\xc3\xa9llo --flag \xe2\x98\x83 \xf0\x9f\x98\x80") ||
              ipc_wr_string(&w, "Linux") || ipc_wr_string(&w, "arm64") ||
              ipc_wr_string(&w, "h\xc3\xa9llo") || ipc_wr_string(&w, "10.0.0-rc.1") ||
              ipc_wr_string(&w, "linux-musl-arm64") || ipc_wr_u32(&w, 0xdeadbeef) ||
              ipc_wr_message_end(&w, start),
          "processinfo3 v2");
    put_wr("processinfo3-v2-trailing", &w);

    /* ProcessInfo2 with absent strings (count 0) and an empty one. */
    ipc_wr_init(&w, b, sizeof(b));
    reply(&w, IPC_SERVER_OK, &start);
    check(ipc_wr_u64(&w, 1) || ipc_wr_guid(&w, cookie) || ipc_wr_string(&w, NULL) ||
              ipc_wr_string(&w, "") || ipc_wr_string(&w, "x64") || ipc_wr_string(&w, NULL) ||
              ipc_wr_string(&w, NULL) || ipc_wr_message_end(&w, start),
          "processinfo2 absent");
    put_wr("processinfo2-absent-strings", &w);

    /* Lone surrogates and an embedded U+0000, written unit by unit. */
    ipc_wr_init(&w, b, sizeof(b));
    reply(&w, IPC_SERVER_OK, &start);
    static const uint16_t odd[] = {'a', 0xD800, 'b', 0xDC00, 0, 0xD83D, 0xDE00, 0xDBFF, 0};
    check(ipc_wr_u64(&w, 77) || ipc_wr_guid(&w, cookie) ||
              ipc_wr_u32(&w, sizeof(odd) / sizeof(odd[0])),
          "odd");
    for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
        check(ipc_wr_u16(&w, odd[i]), "odd unit");
    }
    check(ipc_wr_string(&w, "Linux") || ipc_wr_string(&w, "x64") || ipc_wr_message_end(&w, start),
          "odd end");
    put_wr("processinfo-lone-surrogates", &w);

    /* ProcessEnvironment: the 6-byte reply, then the continuation (count + strings), including
     * an entry without '=', an absent string and a value holding '='. */
    static uint8_t cont[2048];
    struct ipc_wr c;
    ipc_wr_init(&c, cont, sizeof(cont));
    static const char *const env[] = {"PATH=/usr/bin:/bin",
                                      "DOTNET_DiagnosticPorts=/diag/dotnet-monitor.sock,nosuspend",
                                      "NOVALUE",
                                      NULL,
                                      "EQ=a=b",
                                      "=leading",
                                      "UTF=\xe2\x82\xac"};
    check(ipc_wr_u32(&c, sizeof(env) / sizeof(env[0])), "env count");
    for (size_t i = 0; i < sizeof(env) / sizeof(env[0]); i++) {
        check(ipc_wr_string(&c, env[i]), "env entry");
    }
    ipc_wr_init(&w, b, sizeof(b));
    reply(&w, IPC_SERVER_OK, &start);
    check(ipc_wr_u32(&w, (uint32_t)c.len) || ipc_wr_u16(&w, 0) || ipc_wr_message_end(&w, start) ||
              ipc_wr_bytes(&w, cont, c.len),
          "env reply");
    put_wr("environment-continuation", &w);

    /* Two replies back to back, as a read may deliver them. */
    ipc_wr_init(&w, b, sizeof(b));
    for (int i = 0; i < 2; i++) {
        reply(&w, IPC_SERVER_OK, &start);
        check(ipc_wr_u32(&w, 0) || ipc_wr_message_end(&w, start), "pair");
    }
    put_wr("two-frames", &w);

    /* Reverse-connect advertise (ipc.md §2.2): magic, cookie, pid, reserved uint16. */
    ipc_wr_init(&w, b, sizeof(b));
    check(ipc_wr_bytes(&w, "ADVR_V1", 8) || ipc_wr_guid(&w, cookie) || ipc_wr_u64(&w, 4242) ||
              ipc_wr_u16(&w, 0),
          "advertise");
    put("fuzz_ipc_advertise", "advertise", w.p, w.len);
    put_str("fuzz_ipc_advertise", "sockname", "dotnet-diagnostic-4242-1234567-socket");
    put_str("fuzz_ipc_advertise", "sockname-max",
            "dotnet-diagnostic-18446744073709551615-18446744073709551615-socket");
    put_str("fuzz_ipc_advertise", "sockname-dsrouter", "dotnet-diagnostic-dsrouter-4242-99-socket");
}

/* ---- HTTP and trace requests --------------------------------------------------------------- */

static void request_seeds(void)
{
    static const char *const targets[] = {
        "/processes",
        "/process?pid=4242",
        "/process?uid=5b0c6f3e-2d1a-4c8b-9e7f-0a1b2c3d4e5f",
        "/process?name=TestApp",
        "/trace?pid=4242&durationSeconds=5&profile=Cpu,Http",
        "/trace?pid=4242&durationSeconds=30&egressProvider=&tags=a,b%20c",
        "/dump?pid=4242&type=Mini",
        "/dump?name=my+app&type=WithHeap&tags=x",
        "/operations?pid=4242&tags=nightly",
        "/operations/7f1d6a3c-1b2e-4c5d-8e9f-0a1b2c3d4e5f?stop=true",
        "/operations/abc%2Dd%2F..%2Fx",
        "http://localhost:52323/trace?name=TestApp&profile=Logs",
        "/trace?PID=1&pid=1&Pid=2",
        "/trace?profile=%43pu%2c%48ttp&&&durationSeconds=-1",
        "/x?a%=1&b=%zz&c=%00",
        "/metrics",
        "*",
    };
    put_strs("fuzz_http_query", "target", targets, sizeof(targets) / sizeof(targets[0]));

    static const char *const bodies[] = {
        "{\"Providers\":[{\"Name\":\"Microsoft-Windows-DotNETRuntime\",\"EventLevel\":\"Verbose\","
        "\"Keywords\":\"0x1\"}],\"RequestRundown\":true,\"BufferSizeInMB\":64}",
        "{\"providers\":[{\"name\":\"Microsoft-Extensions-Logging\",\"eventLevel\":4,"
        "\"keywords\":\"12\",\"arguments\":{\"FilterSpecs\":\"UseAppFilters\","
        "\"Key;With=Sep\":\"v;=\"}}],\"requestRundown\":false,\"bufferSizeInMB\":\"256\"}",
        "{\"Providers\":[{\"Name\":\"System.Runtime\",\"Arguments\":{\"EventCounterIntervalSec\":"
        "\"1\"}},{\"Name\":\"Microsoft-DotNETCore-SampleProfiler\",\"EventLevel\":"
        "\"informational\","
        "\"Keywords\":-1},{\"Name\":\"X\",\"Keywords\":\"-9223372036854775808\",\"Arguments\":null}"
        "]}",
        "{\"Providers\":[{\"Name\":\"\\u00e9v\\u00e9nement\",\"Keywords\":9007199254740992}],"
        "\"Unknown\":[1,2,{\"a\":null}]}",
        "{\"Providers\":[{\"Name\":\"A\"}],\"Providers\":[]}",
        "{\"Providers\":[{\"Name\":\"A\\u0000B\"}]}",
        "Cpu,Http,Metrics,GcCollect",
        " cpu , LOGS,gc-verbose,dotnet-common,database,cpu-sampling,dotnet-sampled-thread-time",
        "Cpu,,Http",
    };
    put_strs("fuzz_trace_config", "body", bodies, sizeof(bodies) / sizeof(bodies[0]));
}

/* ---- requests on a connection (fuzz_http_parse) ------------------------------------------ */

#define HTTP_SEED_MAX 4096

static int put_bad_http(void *ud, const struct bad_http_record *rec)
{
    (void)ud;
    if (rec->len <= HTTP_SEED_MAX) {
        char name[128];
        snprintf(name, sizeof(name), "bad-%s", rec->name);
        put("fuzz_http_parse", name, rec->data, rec->len);
    }
    return 0;
}

static void http_parse_seeds(void)
{
    static const char *const good[] = {
        "GET /processes HTTP/1.1\r\nHost: localhost:52323\r\nAuthorization: Bearer abc\r\n\r\n",
        "POST /trace?pid=1 HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\n"
        "Content-Length: 17\r\n\r\n{\"Providers\":[]}\n",
        "PUT /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5;a=b\r\nhello\r\n"
        "0\r\nX-Trailer: t\r\n\r\n",
        "GET /1 HTTP/1.1\r\nHost: h\r\n\r\nHEAD /2 HTTP/1.1\r\nHost: h\r\n\r\n"
        "POST /3 HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx",
        "POST /dump HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nok",
        "HEAD / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
        "OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n",
        "GET http://localhost:52323/info HTTP/1.1\r\nHost: localhost\r\n"
        "Upgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
        "\r\n\r\nDELETE /operations/7f1d6a3c HTTP/1.1\r\nHost: h\r\nX-Empty:\r\n"
        "Accept:  */*  \r\n\r\n",
    };
    put_strs("fuzz_http_parse", "good", good, sizeof(good) / sizeof(good[0]));
    char err[256] = "";
    if (bad_http_corpus_foreach(BAD_HTTP_DIR, put_bad_http, NULL, err, sizeof(err)) != 0) {
        fprintf(stderr, "bad_http corpus: %s\n", err);
        failures++;
    }
}

/* ---- configuration ------------------------------------------------------------------------ */

static void config_seeds(void)
{
    put_str(
        "fuzz_config", "settings",
        "{\n  \"Urls\": \"http://localhost:52323;http://[::1]:52324/\",\n"
        "  \"Metrics\": {\"Endpoints\": \"http://+:52325\", \"Enabled\": true},\n"
        "  \"Authentication\": {\"MonitorApiKey\": {\"Subject\": \"" FUZZ_SUBJECT "\",\n"
        "    \"PublicKey\": \"eyJrdHkiOiJFQyJ9\", \"Issuer\": null}},\n"
        "  \"DefaultProcess\": {\"Filters\": [{\"Key\": \"ProcessName\", \"Value\": \"app\","
        " \"MatchType\": \"Exact\"}, {\"ProcessId\": 4242}]},\n"
        "  \"Logging\": {\"LogLevel\": {\"Default\": \"Warning\"}},\n"
        "  \"GlobalCounter\": {\"IntervalSeconds\": 5},\n"
        "  \"RequestLimits\": {\"Trace\": {\"MaxConcurrency\": 3}, \"Dump\": {\"MaxConcurrency\":"
        " 1}},\n"
        "  \"Storage\": {\"DefaultSharedPath\": \"/diag\", \"DumpTempFolder\": \"/diag/dumps\"},\n"
        "  \"Dump\": {\"TimeoutSeconds\": 300},\n"
        "  \"Operations\": {\"MaxHistory\": 100},\n"
        "  \"DiagnosticPort\": {\"ConnectionMode\": \"Listen\", \"EndpointName\":"
        " \"/diag/dotnet-monitor.sock\", \"MaxConnections\": 64, \"SocketMode\": \"0660\"},\n"
        "  \"Egress\": {\"FileSystem\": {\"x\": {\"DirectoryPath\": \"/tmp\"}}}\n}\n");
    put_str(
        "fuzz_config", "numbers",
        "{\"a\":1e300,\"b\":-0.0,\"c\":12345678901234567890,\"d\":1.5,\"DiagnosticPort\":\"/x\","
        "\"Dump\":{\"TimeoutSeconds\":\"18446744073709551615\"},\"Urls\":\"https://h:1\","
        "\"e\":[[[]]],\"f\":{}}");
    static const char env[] =
        "PATH=/usr/bin\0"
        "DotnetMonitor_Urls=http://+:52323\0"
        "DOTNETMONITOR_Authentication__MonitorApiKey__Subject=" FUZZ_SUBJECT "\0"
        "dotnetmonitor_DefaultProcess__Filters__0__ProcessName=app\0"
        "DotnetMonitor_Metrics__Enabled=False\0"
        "DotnetMonitor_=x\0"
        "DotnetMonitor_a___b____c=y\0"
        "DotnetMonitor_NoEquals\0"
        "DotnetMonitor_Operations__MaxHistory=0100";
    put("fuzz_config", "environment", env, sizeof(env) - 1);
}

/* ---- auth --------------------------------------------------------------------------------- */

static const char std_hdr[] = "{\"alg\":\"ES256\",\"typ\":\"JWT\"}";

/* Claims in generatekey's shape; exp as a string, as dotnet-monitor writes it. */
#define CLAIMS(aud, exp, iss, sub)                                                                 \
    "{\"aud\":" aud ",\"exp\":" exp ",\"iss\":\"" iss "\",\"sub\":\"" sub "\"}"
#define AUD "\"" AUTH_AUDIENCE "\""

struct token_case {
    const char *name;
    const char *hdr;
    const char *claims;
};

static const struct token_case token_cases[] = {
    {"ok", std_hdr, CLAIMS(AUD, "\"1795400000\"", AUTH_DEFAULT_ISSUER, FUZZ_SUBJECT)},
    {"ok-numeric-exp-aud-array", "{\"alg\":\"ES256\",\"typ\":\"application/jwt\"}",
     "{\"aud\":[\"x\"," AUD
     "],\"exp\":1795400000.5,\"nbf\":1795200000,\"iss\":\"" AUTH_DEFAULT_ISSUER
     "\",\"sub\":\"" FUZZ_SUBJECT "\",\"iat\":1}"},
    {"expired", std_hdr, CLAIMS(AUD, "1795299000", AUTH_DEFAULT_ISSUER, FUZZ_SUBJECT)},
    {"not-yet-valid", std_hdr,
     "{\"aud\":" AUD ",\"exp\":\"1795400000\",\"nbf\":\"1795390000\",\"iss\":\"" AUTH_DEFAULT_ISSUER
     "\",\"sub\":\"" FUZZ_SUBJECT "\"}"},
    {"other-subject", std_hdr, CLAIMS(AUD, "\"1795400000\"", AUTH_DEFAULT_ISSUER, "someone-else")},
    {"wrong-issuer", std_hdr, CLAIMS(AUD, "\"1795400000\"", "https://example.com", FUZZ_SUBJECT)},
    {"wrong-audience", std_hdr,
     CLAIMS("\"https://example.com\"", "\"1795400000\"", AUTH_DEFAULT_ISSUER, FUZZ_SUBJECT)},
    {"duplicate-sub", std_hdr,
     "{\"aud\":" AUD ",\"exp\":\"1795400000\",\"iss\":\"" AUTH_DEFAULT_ISSUER
     "\",\"sub\":\"" FUZZ_SUBJECT "\",\"sub\":\"x\"}"},
    {"crit", "{\"alg\":\"ES256\",\"crit\":[\"b64\"],\"b64\":false}",
     CLAIMS(AUD, "\"1795400000\"", AUTH_DEFAULT_ISSUER, FUZZ_SUBJECT)},
    {"alg-none", "{\"alg\":\"none\"}",
     CLAIMS(AUD, "\"1795400000\"", AUTH_DEFAULT_ISSUER, FUZZ_SUBJECT)},
    {"alg-es384", "{\"alg\":\"ES384\",\"typ\":\"JWT\"}",
     CLAIMS(AUD, "\"1795400000\"", AUTH_DEFAULT_ISSUER, FUZZ_SUBJECT)},
};

static void put_token(const char *name, const char *tok)
{
    char fname[96];
    size_t n = strlen(tok);
    char *h = malloc(n + 8);
    if (h == NULL) {
        failures++;
        return;
    }
    memcpy(h, "Bearer ", 7);
    memcpy(h + 7, tok, n + 1);
    snprintf(fname, sizeof(fname), "token-%s", name);
    put_str("fuzz_auth_token", fname, h);
    free(h);
}

static void auth_token_seeds(EVP_PKEY *key)
{
    for (size_t i = 0; i < sizeof(token_cases) / sizeof(token_cases[0]); i++) {
        const struct token_case *tc = &token_cases[i];
        char *tok = fuzz_jws_sign(key, tc->hdr, strlen(tc->hdr), tc->claims, strlen(tc->claims));
        if (tok == NULL) {
            failures++;
            continue;
        }
        put_token(tc->name, tok);
        if (i == 0) {
            /* Mutations of the good token: bare token, a flipped signature character, padding,
             * a fourth part, lower-case scheme with tabs. */
            char fname[64];
            put_str("fuzz_auth_token", "bare-ok", tok);
            size_t n = strlen(tok);
            char *m = malloc(n + 16);
            if (m != NULL) {
                memcpy(m, tok, n + 1);
                m[n - 5] = m[n - 5] == 'A' ? 'B' : 'A';
                put_token("bad-signature", m);
                memcpy(m, tok, n);
                memcpy(m + n, "==", 3);
                put_token("padded", m);
                memcpy(m + n, ".AAAA", 6);
                put_token("four-parts", m);
                free(m);
            }
            snprintf(fname, sizeof(fname), "scheme-case");
            char *h = malloc(n + 16);
            if (h != NULL) {
                memcpy(h, " \tbearer  ", 10);
                memcpy(h + 10, tok, n);
                memcpy(h + 10 + n, " \t", 3);
                put_str("fuzz_auth_token", fname, h);
                free(h);
            }
        }
        /* The same case as JSON for the target's signing mode: header '\n' claims. */
        size_t hl = strlen(tc->hdr);
        size_t cl = strlen(tc->claims);
        char *pair = malloc(hl + 1 + cl + 1);
        if (pair != NULL) {
            memcpy(pair, tc->hdr, hl);
            pair[hl] = '\n';
            memcpy(pair + hl + 1, tc->claims, cl + 1);
            char fname[96];
            snprintf(fname, sizeof(fname), "json-%s", tc->name);
            put_str("fuzz_auth_token", fname, pair);
            free(pair);
        }
        free(tok);
    }
    put_str("fuzz_auth_token", "basic", "Basic dXNlcjpwYXNz");
    put_str("fuzz_auth_token", "empty-bearer", "Bearer   ");

    /* A genuine generatekey token: another key (ES384), so "algorithm does not match the key". */
    struct auth_generated g;
    check(auth_generate(FUZZ_NOW, 7 * 86400, NULL, &g), "auth_generate");
    put_token("generatekey", g.token);
    auth_generated_fini(&g);
}

/* A JWK JSON for an EC or RSA key pair made by OpenSSL (public members, or all with priv). */
static char *jwk_json(EVP_PKEY *pk, bool priv)
{
    char buf[8192];
    int n = -1;
    if (EVP_PKEY_is_a(pk, "EC")) {
        BIGNUM *x = NULL;
        BIGNUM *y = NULL;
        BIGNUM *d = NULL;
        char crv[32];
        size_t crv_len = 0;
        int bits = EVP_PKEY_get_bits(pk);
        int coord = (bits + 7) / 8;
        uint8_t xb[66];
        uint8_t yb[66];
        uint8_t db[66];
        if (EVP_PKEY_get_utf8_string_param(pk, OSSL_PKEY_PARAM_GROUP_NAME, crv, sizeof(crv),
                                           &crv_len) != 1 ||
            EVP_PKEY_get_bn_param(pk, OSSL_PKEY_PARAM_EC_PUB_X, &x) != 1 ||
            EVP_PKEY_get_bn_param(pk, OSSL_PKEY_PARAM_EC_PUB_Y, &y) != 1 ||
            EVP_PKEY_get_bn_param(pk, OSSL_PKEY_PARAM_PRIV_KEY, &d) != 1 ||
            BN_bn2binpad(x, xb, coord) != coord || BN_bn2binpad(y, yb, coord) != coord ||
            BN_bn2binpad(d, db, coord) != coord) {
            BN_free(x);
            BN_free(y);
            BN_free(d);
            return NULL;
        }
        const char *jcrv = coord == 32 ? "P-256" : coord == 48 ? "P-384" : "P-521";
        char *xs = fuzz_b64url(xb, (size_t)coord);
        char *ys = fuzz_b64url(yb, (size_t)coord);
        char *ds = fuzz_b64url(db, (size_t)coord);
        if (xs != NULL && ys != NULL && ds != NULL) {
            n = priv ? snprintf(buf, sizeof(buf),
                                "{\"Kty\":\"EC\",\"Crv\":\"%s\",\"X\":\"%s\",\"Y\":\"%s\","
                                "\"D\":\"%s\",\"oth\":[]}",
                                jcrv, xs, ys, ds)
                     : snprintf(buf, sizeof(buf),
                                "{\"kty\":\"EC\",\"crv\":\"%s\",\"x\":\"%s\",\"y\":\"%s\"}", jcrv,
                                xs, ys);
        }
        free(xs);
        free(ys);
        free(ds);
        BN_free(x);
        BN_free(y);
        BN_free(d);
    } else {
        BIGNUM *bn_n = NULL;
        BIGNUM *bn_e = NULL;
        if (EVP_PKEY_get_bn_param(pk, OSSL_PKEY_PARAM_RSA_N, &bn_n) != 1 ||
            EVP_PKEY_get_bn_param(pk, OSSL_PKEY_PARAM_RSA_E, &bn_e) != 1) {
            BN_free(bn_n);
            BN_free(bn_e);
            return NULL;
        }
        uint8_t nb[1024];
        uint8_t eb[8];
        int nl = BN_bn2bin(bn_n, nb);
        int el = BN_bn2bin(bn_e, eb);
        char *ns = fuzz_b64url(nb, (size_t)nl);
        char *es = fuzz_b64url(eb, (size_t)el);
        if (ns != NULL && es != NULL) {
            n = snprintf(buf, sizeof(buf),
                         "{\"kty\":\"RSA\",\"n\":\"%s\",\"e\":\"%s\",\"key_ops\":[\"verify\"]}", ns,
                         es);
        }
        free(ns);
        free(es);
        BN_free(bn_n);
        BN_free(bn_e);
    }
    if (n < 0 || (size_t)n >= sizeof(buf)) {
        return NULL;
    }
    char *s = malloc((size_t)n + 1);
    if (s != NULL) {
        memcpy(s, buf, (size_t)n + 1);
    }
    return s;
}

/* Writes "<key>\n<subject>" (configured form) and "<json>\n<subject>" (JSON form). */
static void put_jwk(const char *name, const char *json, const char *subject, const char *issuer)
{
    char fname[64];
    char body[8192];
    char *b64 = fuzz_b64url(json, strlen(json));
    if (b64 == NULL) {
        failures++;
        return;
    }
    snprintf(fname, sizeof(fname), "b64-%s", name);
    int n = snprintf(body, sizeof(body), "%s\n%s%s%s", b64, subject, issuer ? "\n" : "",
                     issuer ? issuer : "");
    if (n > 0 && (size_t)n < sizeof(body)) {
        put("fuzz_auth_jwk", fname, body, (size_t)n);
    }
    snprintf(fname, sizeof(fname), "json-%s", name);
    n = snprintf(body, sizeof(body), "%s\n%s", json, subject);
    if (n > 0 && (size_t)n < sizeof(body)) {
        put("fuzz_auth_jwk", fname, body, (size_t)n);
    }
    free(b64);
}

static void auth_jwk_seeds(void)
{
    char body[1024];
    int n = snprintf(body, sizeof(body), "%s\n%s", fuzz_jwk_b64, FUZZ_SUBJECT);
    put("fuzz_auth_jwk", "b64-test-key", body, (size_t)n);

    struct auth_generated g;
    check(auth_generate(FUZZ_NOW, 3600, "https://issuer.example", &g), "auth_generate");
    n = snprintf(body, sizeof(body), "%s\n%s\n%s", g.public_key_b64, g.subject, g.issuer);
    put("fuzz_auth_jwk", "b64-generatekey", body, (size_t)n);
    /* Padded, with the newline a Kubernetes secret file ends in. */
    n = snprintf(body, sizeof(body), "  %s==\n", g.public_key_b64);
    put("fuzz_auth_jwk", "b64-generatekey-padded", body, (size_t)n);
    auth_generated_fini(&g);

    static const char *const curves[] = {"P-256", "P-521"};
    for (size_t i = 0; i < 2; i++) {
        EVP_PKEY *pk = EVP_EC_gen(curves[i]);
        char *pub = pk ? jwk_json(pk, false) : NULL;
        char *all = pk ? jwk_json(pk, true) : NULL;
        char name[32];
        if (pub == NULL || all == NULL) {
            failures++;
        } else {
            snprintf(name, sizeof(name), "ec-%s", curves[i]);
            put_jwk(name, pub, "sub", NULL);
            snprintf(name, sizeof(name), "ec-%s-private", curves[i]);
            put_jwk(name, all, "sub", "iss");
        }
        free(pub);
        free(all);
        EVP_PKEY_free(pk);
    }
    EVP_PKEY *rsa = EVP_RSA_gen(2048);
    char *pub = rsa ? jwk_json(rsa, false) : NULL;
    if (pub == NULL) {
        failures++;
    } else {
        put_jwk("rsa-2048", pub, "sub", NULL);
    }
    free(pub);
    EVP_PKEY_free(rsa);
    put_jwk(
        "not-on-curve",
        "{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\","
        "\"y\":\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAE\"}",
        "sub", NULL);
    put_jwk("oct", "{\"kty\":\"oct\",\"k\":\"c2VjcmV0\"}", "sub", NULL);
}

/* ---- the exceptions history (fuzz_ev_exc.c's layout) ---------------------------------------- */

/* An input of fuzz_ev_exc: the header, the filter document, then events, each after its SEP. */
struct exc_in {
    uint8_t b[8192];
    size_t n;
};

static void exc_raw(struct exc_in *in, const void *p, size_t n)
{
    if (n > sizeof(in->b) - in->n) {
        failures++;
        return;
    }
    memcpy(in->b + in->n, p, n);
    in->n += n;
}

static void exc_le(struct exc_in *in, uint64_t v, size_t size)
{
    for (size_t i = 0; i < size; i++) {
        uint8_t c = (uint8_t)(v >> (8 * i));
        exc_raw(in, &c, 1);
    }
}

static void exc_wstr(struct exc_in *in, const char *s)
{
    for (; *s != '\0'; s++) {
        exc_le(in, (uint8_t)*s, 2);
    }
    exc_le(in, 0, 2);
}

/* An event's start: its SEP, control bytes c0 (version, pointer size, stack kind, time) and c1
 * (stack length); the payload follows. */
static void exc_begin(struct exc_in *in, uint8_t c0, uint8_t c1)
{
    exc_raw(in, "\xfe\xfe\xfe\xfe", 4);
    exc_raw(in, &c0, 1);
    exc_raw(in, &c1, 1);
}

/* The payload's end after type and message (EIP, HRESULT, flags, ClrInstanceID), then the stack's
 * compact ips leaf last (fuzz_ev_exc reads them from the piece's end). */
static void exc_end(struct exc_in *in, uint8_t c0, uint64_t eip, const char *stack)
{
    exc_le(in, eip, (c0 & 4) != 0 ? 4 : 8);
    exc_le(in, 0x80131509u, 4);
    exc_le(in, 0x10, 2);
    exc_le(in, 7, 2);
    for (size_t i = strlen(stack); i > 0; i--) {
        uint8_t ip = (uint8_t)(stack[i - 1] - 'a');
        exc_raw(in, &ip, 1);
    }
}

/* One event with an ExceptionThrown_V1 payload of ASCII type and message. */
static void exc_event(struct exc_in *in, uint8_t c0, uint8_t c1, const char *type, const char *msg,
                      uint64_t eip, const char *stack)
{
    exc_begin(in, c0, c1);
    exc_wstr(in, type);
    exc_wstr(in, msg);
    exc_end(in, c0, eip, stack);
}

/* n UTF-16 units u[0..n) (any, lone surrogates too), times copies, then the terminator. */
static void exc_units(struct exc_in *in, const uint16_t *u, size_t n, size_t copies)
{
    for (size_t c = 0; c < copies; c++) {
        for (size_t i = 0; i < n; i++) {
            exc_le(in, u[i], 2);
        }
    }
    exc_le(in, 0, 2);
}

/*
 * Header: max_instances - 1; max_bytes as (1024 + 4 * step) << shift; the share's cap (0: none,
 * else 4 * cap * cap); flags (1 names, 2 the store's filters, 4 the request's, 8 a failing sink;
 * the high nibble the error buffer's length); after_id (below 128: 0, 128 + id, 255: UINT64_MAX);
 * thread names; where the sink fails.
 */
static void exc_head(struct exc_in *in, uint8_t inst, uint8_t shift, uint8_t step, uint8_t cap,
                     uint8_t flags, uint8_t after, const char *doc)
{
    uint8_t h[8] = {inst, shift, step, cap, flags, after, 1, 3};
    in->n = 0;
    exc_raw(in, h, sizeof(h));
    exc_raw(in, doc, strlen(doc));
}

/* Stack letters: fuzz_ev_exc's ip_table, a = App.Worker.Throw, b = ThrowHelper, c = Main,
 * d = Orphan, e, f = System.Runtime.EH, g = the input-named method, h, i = native. */
static void exc_seeds(void)
{
    const char *t = "fuzz_ev_exc";
    struct exc_in in;
    /* Three named exceptions, .NET 9+'s EH frames first, filters on type, method and module. */
    exc_head(&in, 19, 3, 255, 0, 0x17, 0,
             "{\"include\":[{\"exceptionType\":\"System.InvalidOperationException\"},"
             "{\"methodName\":\"Throw\",\"moduleName\":\"TestApp.dll\"}],"
             "\"exclude\":[{\"typeName\":\"App.Program\",\"methodName\":\"Main\"}]}");
    exc_event(&in, 0x09, 4, "System.InvalidOperationException", "Bad \"state\"\n", 0, "efac");
    exc_event(&in, 0x09, 2, "App.MyError", "", 0, "ba");
    exc_event(&in, 0x01, 0, "System.Exception", "no stack", 0x3010, "");
    exc_event(&in, 0x0a, 3, "App.MyError", "again", 0, "gha");
    put(t, "filters-named", in.b, in.n);
    /* Member names in other cases, nulls, a 32-bit stream; the groups merged by site. */
    exc_head(
        &in, 3, 4, 0, 0, 0x23, 0,
        "{\"Include\":null,\"EXCLUDE\":[{\"ExceptionType\":\"App.Odd\",\"modulename\":null}]}");
    for (int i = 0; i < 6; i++) {
        exc_event(&in, 0x0d, 2, i % 2 ? "App.Odd" : "App.E", "m", 0x1010, i % 3 ? "ac" : "ihac");
    }
    put(t, "filters-case-32bit", in.b, in.n);
    /* Stacks past EV_EXC_MAX_FRAMES (300 ips) in a small history and share. */
    exc_head(&in, 1, 5, 0, 90, 0x01, 0, "{}");
    exc_event(&in, 0x09, 255, "System.StackOverflowLike", "deep", 0, "efabcdghi");
    exc_event(&in, 0x11, 250, "System.Exception", "wide", 0, "abcdefghijklmnop");
    exc_event(&in, 0x19, 249, "System.Exception", "same", 0, "a");
    put(t, "long-stacks", in.b, in.n);
    /* Refusals: an unknown member (a 10-byte message buffer), V0, a short payload, a bad pointer
     * size, no ips; wild times; a failing sink from after_id 1. */
    exc_head(&in, 63, 5, 0, 0, 0x1f, 129, "{\"include\":[{\"typeName\":1}],\"other\":2}");
    exc_event(&in, 0x08, 1, "T", "v0", 0, "a");
    exc_event(&in, 0x81, 1, "System.Exception", "wild", 0, "a");
    exc_event(&in, 0xc1, 4, "System.Exception", "min", 0, "b");
    exc_event(&in, 0xc1, 5, "System.Exception", "max", 0, "b");
    exc_event(&in, 0xfd, 1, "System.Exception", "bad pointer", 0, "a");
    exc_event(&in, 0xe9, 3, "System.Exception", "null ips", 0, "abc");
    exc_raw(&in, "\xfe\xfe\xfe\xfe\x01\x00\x41\x00\x42", 9); /* unterminated type */
    put(t, "refusals", in.b, in.n);
    /* Strings past EV_EXC_MAX_STRING cut inside a UTF-8 sequence (a type of 1022 'A' then é, €
     * and U+1F600; a message of 600 €), lone surrogates, control characters, quotes. */
    exc_head(&in, 7, 6, 0, 0, 0x01, 0, "{\"exclude\":[]}");
    static const uint16_t a[] = {'A'}, tail[] = {0xe9, 0x20ac, 0xd83d, 0xde00, 'B'},
                          euro[] = {0x20ac},
                          odd[] = {'B', 0xd800, 'x', 0xdc00, 1, 0x1f, '"', '\\', 0x7f, 0xd83d};
    exc_begin(&in, 0x09, 2);
    for (int i = 0; i < 1022; i++) {
        exc_le(&in, a[0], 2);
    }
    exc_units(&in, tail, sizeof(tail) / sizeof(tail[0]), 1);
    exc_units(&in, euro, 1, 600);
    exc_end(&in, 0x09, 0, "ga");
    exc_begin(&in, 0x09, 1);
    exc_units(&in, odd, sizeof(odd) / sizeof(odd[0]), 1);
    exc_units(&in, odd + 1, sizeof(odd) / sizeof(odd[0]) - 1, 1);
    exc_end(&in, 0x09, 0, "a");
    put(t, "long-strings", in.b, in.n);
}

/* ---- MCP (mcp/mcp_rpc.h) ------------------------------------------------------------------ */

/* fuzz_mcp_rpc: POST bodies of an MCP client in MCP's shapes (docs/mcp.md), good ones and the
 * refusals of each rule, and header values the transport reads. */
static void mcp_seeds(void)
{
    static const char *const msgs[] = {
        "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
        "\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{\"name\":\"inspector\",\"version\":"
        "\"0.17.0\"}}}",
        "{\"jsonrpc\":\"2.0\",\"id\":\"init-1\",\"method\":\"initialize\",\"params\":"
        "{\"protocolVersion\":\"2024-11-05\"}}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"cursor\":\"x\"}}",
        "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":"
        "\"cpu_profile\",\"arguments\":{\"pid\":4242,\"seconds\":5,\"top\":10},\"_meta\":"
        "{\"progressToken\":\"p-2\"}}}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":2,"
        "\"reason\":\"user\"}}",
        "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}",
        "{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{\"roots\":[]}}",
        "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"Parse error\"}}",
        "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"},{\"jsonrpc\":\"2.0\",\"method\":"
        "\"notifications/initialized\"}]",
        "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}",
        "{\"jsonrpc\":\"2.0\",\"id\":9007199254740992,\"method\":\"ping\"}",
        "{\"jsonrpc\":\"1.0\",\"id\":\"q\",\"method\":\"ping\",\"params\":[]}",
        "{\"jsonrpc\":\"2.0\",\"id\":\"\\u00e9\\ud83d\\ude00\",\"method\":\"x\"}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"} trailing",
        "data: x\r\nevent: y\r\rid: 1\n\n",
    };
    put_strs("fuzz_mcp_rpc", "msg", msgs, sizeof(msgs) / sizeof(msgs[0]));
    static const char *const headers[] = {
        "application/json, text/event-stream",
        "text/event-stream;q=0, application/json;q=0.9, */*;q=0.1",
        "2025-06-18",
        "00010203040506070809aabbccddeeff",
        "http://localhost:52323",
        "application/json; charset=utf-8",
    };
    put_strs("fuzz_mcp_rpc", "header", headers, sizeof(headers) / sizeof(headers[0]));
    put_str("fuzz_mcp_rpc", "problem",
            "{\"type\":\"https://tools.ietf.org/html/rfc9110#section-15.5.30\",\"title\":\"Too "
            "Many Requests\",\"status\":429,\"detail\":\"3 trace operations are running\","
            "\"reason\":\"RequestLimits:Trace:MaxConcurrency\"}");
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
        return 2;
    }
    root = argv[1];
    EVP_PKEY *key = fuzz_jws_key();
    if (key == NULL) {
        fprintf(stderr, "cannot load the test key\n");
        return 1;
    }
    ipc_seeds();
    request_seeds();
    http_parse_seeds();
    config_seeds();
    auth_token_seeds(key);
    auth_jwk_seeds();
    exc_seeds();
    mcp_seeds();
    EVP_PKEY_free(key);
    return failures == 0 ? 0 : 1;
}
