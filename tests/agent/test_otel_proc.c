/* SPDX-License-Identifier: MIT */
/*
 * agent/otel/otel_proc against the scripted fake runtime (tests/support/fake_runtime.c) on a
 * private loop (tests/ipc/ipc_test_loop.c): a watched process's resource read from its
 * environment (the secrets in it never reach the exporter), its logs session streaming a real
 * capture of the test app (tests/fixtures/events/logs.nettrace) whose records come out as
 * LogRecords, its metric samples exported once per interval and once more when it goes (the
 * samples of series past its bound counted as dropped), and everything released (the
 * fixture's uv_loop_close() == 0 catches a leaked handle).
 *
 * The exporter (otel.h) is a recording fake here: unit tests only; the end-to-end proof against
 * the real receiver is the integration test's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include <cmocka.h>

#include "agent.h"
#include "buf.h"
#include "config.h"
#include "err.h"
#include "fake_runtime.h"
#include "fixture.h"
#include "ipc_discovery.h"
#include "ipc_test_loop.h"
#include "metrics.h"
#include "otel_proc.h"

/* ---- the recording exporter ------------------------------------------------------------- */

struct otel {
    struct otel_settings st;
    int sources, released;
    char service[64];
    char instance[64];
    bool secret_seen;
    int logs, metrics;
    uint64_t metrics_dropped; /* otel_count_dropped's, of the test's source */
    bool scoped_seen;         /* the record logged inside two scopes, with their pairs */
    double last_value;
};

struct otel_source {
    struct otel *o;
};

const struct otel_settings *otel_settings(const struct otel *o)
{
    return &o->st;
}

bool otel_wants_process(const struct otel *o, const struct ipc_process *p)
{
    (void)o;
    return p->pid != 0;
}

struct otel_source *otel_source_new(struct otel *o, uint64_t pid, const struct otlp_resource *res)
{
    (void)pid;
    for (size_t k = 0; k < res->nattrs; k++) {
        const struct otlp_kv *kv = &res->attrs[k];
        if (kv->kind == OTLP_STR && strstr(kv->str, "hunter2") != NULL) {
            o->secret_seen = true;
        }
        if (strcmp(kv->key, "service.name") == 0) {
            snprintf(o->service, sizeof(o->service), "%s", kv->str);
        } else if (strcmp(kv->key, "service.instance.id") == 0) {
            snprintf(o->instance, sizeof(o->instance), "%s", kv->str);
        }
    }
    struct otel_source *s = calloc(1, sizeof(*s));
    assert_non_null(s);
    s->o = o;
    o->sources++;
    return s;
}

void otel_source_release(struct otel_source *s)
{
    s->o->released++;
    free(s);
}

int otel_emit_log(struct otel_source *s, const struct otlp_scope *scope, const struct otlp_log *l)
{
    s->o->logs++;
    assert_non_null(scope->name);
    assert_true(l->severity_number >= 1 && l->severity_number <= 21);
    bool scope_id = false, depth = false;
    for (size_t k = 0; k < l->nattrs; k++) {
        scope_id |= strcmp(l->attrs[k].key, "ScopeId") == 0;
        depth |= strcmp(l->attrs[k].key, "Depth") == 0;
    }
    s->o->scoped_seen |= scope_id && depth && strstr(l->body, "{") != NULL;
    return 0;
}

int otel_emit_span(struct otel_source *s, const struct otlp_scope *scope,
                   const struct otlp_span *sp)
{
    (void)s;
    (void)scope;
    (void)sp;
    return AGENT_E_INVAL;
}

int otel_emit_metric(struct otel_source *s, const struct otlp_scope *scope,
                     const struct otlp_metric *m)
{
    assert_string_equal(scope->name, "Orders.Meter");
    assert_string_equal(m->name, "orders.placed");
    assert_int_equal(m->type, OTLP_SUM);
    s->o->metrics++;
    s->o->last_value = m->points[0].as_double;
    return 0;
}

void otel_count_dropped(struct otel *o, const struct otel_source *s, enum otlp_signal sig,
                        uint64_t n)
{
    assert_non_null(s);
    assert_ptr_equal(s->o, o);
    assert_int_equal(sig, OTLP_METRICS);
    o->metrics_dropped += n;
}

/* Events the runtime dropped: not what this test looks at. */
void otel_count_lost(struct otel *o, const struct otel_source *s, uint64_t n)
{
    (void)o;
    (void)s;
    (void)n;
}

/* The rest of otel.h, which agent_core's composition root and routes call: defined here too, so
 * that the real exporter (agent/otel/otel.c) is not linked beside this fake. */
int otel_new(struct agent *a, struct otel **out, char *why, size_t whylen)
{
    (void)a;
    (void)why;
    (void)whylen;
    *out = NULL;
    return 0;
}

int otel_render_prom(const struct otel *o, struct buf *out)
{
    (void)o;
    (void)out;
    return 0;
}

struct cJSON *otel_status_json(const struct otel *o)
{
    (void)o;
    return NULL;
}

void otel_shutdown(struct otel *o, uint64_t deadline_ms, void (*done)(void *ud), void *ud)
{
    (void)o;
    (void)deadline_ms;
    (void)done;
    (void)ud;
}

void otel_free(struct otel *o)
{
    (void)o;
}

/* ---- the fake runtime's stream: the real capture, whole ---------------------------------- */

struct capture {
    uint8_t *p;
    size_t n;
};

static size_t capture_source(void *ud, uint64_t off, uint8_t *buf, size_t cap)
{
    const struct capture *c = ud;
    if (off >= c->n) {
        return 0;
    }
    size_t k = c->n - off < cap ? (size_t)(c->n - off) : cap;
    memcpy(buf, c->p + off, k);
    return k;
}

/* ---- test -------------------------------------------------------------------------------- */

static void set_flag(void *ud)
{
    *(bool *)ud = true;
}

static bool flag_set(void *ud)
{
    return *(bool *)ud;
}

static struct agent agent;
static struct otel fake_otel;

static bool five_logs(void *ud)
{
    return ((struct otel *)ud)->logs >= 5;
}

static bool two_metrics(void *ud)
{
    return ((struct otel *)ud)->metrics >= 2;
}

static bool sessions_gone(void *ud)
{
    (void)ud;
    return agent.metric_sessions.live == 0;
}

static void test_otel_proc_flow(void **state)
{
    struct test_loop *tl = *state;
    struct capture cap;
    cap.p = fixture_read("events", "logs.nettrace", &cap.n);
    char dir[64];
    assert_int_equal(fake_tmpdir(dir, sizeof(dir)), 0);
    static const char *const env[] = {"PATH=/usr/bin", "OTEL_SERVICE_NAME=orders",
                                      "DB_PASSWORD=hunter2", NULL};
    struct fake_runtime_config cfg;
    fake_runtime_config_init(&cfg, 4243, 7, 0x5a, "/app/OrdersApp", "OrdersApp");
    cfg.env = env;
    cfg.trace.source = capture_source;
    cfg.trace.source_ud = &cap;
    struct fake_runtime *fake = NULL;
    assert_int_equal(fake_runtime_start(&tl->loop, dir, &cfg, &fake), 0);

    memset(&agent, 0, sizeof(agent));
    agent.loop = &tl->loop;
    timeouts_defaults(&agent.timeouts);
    memset(&fake_otel, 0, sizeof(fake_otel));
    fake_otel.st = (struct otel_settings){.signal = {true, true, false},
                                          .log_level = 0,
                                          .include_scopes = true,
                                          .log_filter = "",
                                          .metric_interval_ms = 50};
    struct otel_procs *ps = NULL;
    assert_int_equal(otel_procs_new(&agent, &fake_otel, &ps), 0);
    assert_non_null(ps);

    char name[] = "OrdersApp";
    char clr[] = "10.0.1";
    struct ipc_process p = {.pid = 4243, .name = name, .clr_version = clr};
    snprintf(p.uid, sizeof(p.uid), "5a5a5a5a-5a5a-5a5a-5a5a-5a5a5a5a5a5a");
    p.ep = *IPC_ENDPOINT_PATH(fake_runtime_path(fake));
    otel_procs_on_process(ps, &p, true);
    otel_procs_on_process(ps, &p, true); /* known already: nothing more */

    /* the resource, then the five records of the capture */
    assert_true(tl_run_until(tl, five_logs, &fake_otel, 5000));
    assert_int_equal(fake_otel.sources, 1);
    assert_string_equal(fake_otel.service, "orders");
    assert_string_equal(fake_otel.instance, p.uid);
    assert_false(fake_otel.secret_seen);
    assert_true(fake_otel.scoped_seen);

    /* samples: exported on the interval, the latest running total */
    struct ev_metric_sample s = {.provider = "Orders.Meter",
                                 .name = "orders.placed",
                                 .unit = "{order}",
                                 .kind = EV_METRIC_RATE,
                                 .is_meter = true,
                                 .value = 2,
                                 .tags = "",
                                 .interval_sec = 1,
                                 .timestamp_ms = 1700000000000,
                                 .has_total = true,
                                 .total = 40};
    otel_procs_on_sample(ps, p.uid, &s);
    otel_procs_on_sample(ps, "not-a-process", &s); /* ignored */
    s.total = 42;
    otel_procs_on_sample(ps, p.uid, &s);
    assert_true(tl_run_until(tl, two_metrics, &fake_otel, 3000));
    assert_true(fake_otel.last_value == 42);

    /* past the process's 2000 series: the samples of new ones are counted as dropped metrics */
    struct ev_metric_sample extra = s;
    char tags[16];
    extra.tags = tags;
    for (int k = 1; k <= 2001; k++) {
        snprintf(tags, sizeof(tags), "n=%d", k);
        otel_procs_on_sample(ps, p.uid, &extra);
    }
    assert_int_equal(fake_otel.metrics_dropped, 2); /* the first series and 1999 of these kept */
    otel_procs_on_sample(ps, p.uid, &extra);
    assert_int_equal(fake_otel.metrics_dropped, 3);

    /* the process goes: its last values handed over, its source released */
    int before = fake_otel.metrics;
    s.total = 50;
    otel_procs_on_sample(ps, p.uid, &s);
    otel_procs_on_process(ps, &p, false);
    assert_int_equal(fake_otel.released, 1);
    assert_true(fake_otel.metrics > before);
    assert_true(fake_otel.last_value == 50);
    assert_true(tl_run_until(tl, sessions_gone, NULL, 5000));

    /* shutdown with a live session: it is stopped (StopTracing, the stream read to its end tag),
     * not aborted, and done comes once it ended and the source is released. This time with
     * IncludeScopes turned off after the session's providers were chosen (test_otel_providers
     * checks those): the same records, none with its scopes' pairs. */
    fake_otel.logs = 0;
    fake_otel.scoped_seen = false;
    fake_otel.st.include_scopes = false;
    otel_procs_on_process(ps, &p, true);
    assert_true(tl_run_until(tl, five_logs, &fake_otel, 5000));
    assert_false(fake_otel.scoped_seen);
    unsigned last = fake_runtime_sessions(fake) - 1;
    bool closed = false;
    otel_procs_close(ps, 3000, set_flag, &closed);
    assert_false(closed);
    assert_true(tl_run_until(tl, flag_set, &closed, 5000));
    struct fake_session_info si;
    assert_int_equal(fake_runtime_session(fake, last, &si), 0);
    assert_int_equal(si.stops, 1);
    assert_true(si.end_tag);
    assert_false(si.client_closed);
    assert_int_equal(fake_otel.released, 2);
    assert_true(tl_run_until(tl, sessions_gone, NULL, 5000));
    tl_close_fake(tl, fake);
    fake_rmdir(dir);
    free(cap.p);
}

static bool starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static void test_otel_providers(void **state)
{
    (void)state;
    struct otel_settings st = {.signal = {true, false, false},
                               .log_level = 3,
                               .log_filter = "Microsoft:Warning;App:Debug"};
    struct otel_providers pr;
    assert_int_equal(otel_session_providers(&st, &pr), 0);
    assert_string_equal(pr.v[0].name, "Microsoft-Extensions-Logging");
    assert_int_equal(pr.v[0].keywords, 0x8); /* JsonMessage alone (docs/otel.md §3) */
    assert_int_equal(pr.v[0].level, 3);      /* Warning */
    /* the app's own filters first, then LogCategories */
    assert_string_equal(pr.v[0].arguments,
                        "FilterSpecs=\"UseAppFilters;Microsoft:Warning;App:Debug\"");
    assert_int_equal(pr.n, 1); /* no scopes asked: no activity-id flow */
    st.include_scopes = true;
    assert_int_equal(otel_session_providers(&st, &pr), 0);
    assert_int_equal(pr.n, 2);
    assert_string_equal(pr.v[1].name, "System.Threading.Tasks.TplEventSource");
    assert_int_equal(pr.v[1].keywords, 0x80); /* TasksFlowActivityIds: ties records to scopes */
    static const struct {
        int level;
        uint32_t ev;
    } levels[] = {{0, 5}, {1, 5}, {2, 4}, {3, 3}, {4, 2}, {5, 1}};
    for (size_t k = 0; k < sizeof(levels) / sizeof(levels[0]); k++) {
        st.log_level = levels[k].level;
        st.log_filter = NULL;
        assert_int_equal(otel_session_providers(&st, &pr), 0);
        assert_int_equal(pr.v[0].level, levels[k].ev);
        assert_string_equal(pr.v[0].arguments, "FilterSpecs=\"UseAppFilters\"");
    }
    st.signal[OTLP_LOGS] = false;
    assert_int_equal(otel_session_providers(&st, &pr), 0);
    assert_int_equal(pr.n, 0);
    static char big[5000];
    memset(big, 'a', sizeof(big) - 1);
    st.signal[OTLP_LOGS] = true;
    st.log_filter = big;
    assert_int_equal(otel_session_providers(&st, &pr), AGENT_E_TOOBIG);
    /* traces: DiagnosticSource with the [AS] lines, the sampler only when asked for */
    st.log_filter = NULL;
    st.signal[OTLP_TRACES] = true;
    st.activity_sources = "App.Src; Other";
    st.sampling_ratio = 0.25;
    assert_int_equal(otel_session_providers(&st, &pr), 0);
    assert_int_equal(pr.n, 3);
    assert_string_equal(pr.v[0].name, "Microsoft-Diagnostics-DiagnosticSource");
    assert_int_equal(pr.v[0].keywords, 0x3);
    assert_int_equal(pr.v[0].level, 5);
    assert_true(starts_with(pr.v[0].arguments,
                            "FilterAndPayloadSpecs=\"[AS]App.Src/Stop-ParentRatioSampler(0.25):-"));
    assert_non_null(strstr(pr.v[0].arguments, "\r\n[AS]Other/Stop-ParentRatioSampler(0.25):-"));
    assert_true(pr.v[0].arguments[strlen(pr.v[0].arguments) - 1] == '"');
    assert_string_equal(pr.v[1].name, "Microsoft-Extensions-Logging");
    assert_int_equal(otel_session_providers_sampled(&st, false, &pr), 0);
    assert_null(strstr(pr.v[0].arguments, "Sampler"));
    st.activity_sources = NULL; /* every source */
    st.signal[OTLP_LOGS] = false;
    assert_int_equal(otel_session_providers(&st, &pr), 0);
    assert_int_equal(pr.n, 1);
    assert_true(starts_with(pr.v[0].arguments, "FilterAndPayloadSpecs=\"[AS]*/Stop-"));
    st.activity_sources = "bad/name";
    assert_int_equal(otel_session_providers(&st, &pr), AGENT_E_INVAL);
    /* nothing to produce: no producers */
    struct otel none = {.st = {.signal = {false, false, false}}};
    struct otel_procs *ps = (struct otel_procs *)&none;
    assert_int_equal(otel_procs_new(&agent, &none, &ps), 0);
    assert_null(ps);
    assert_int_equal(otel_procs_new(&agent, NULL, &ps), 0);
    assert_null(ps);
}

/* The metrics pipeline run for the exporter alone: /metrics and /info answer as with metrics off.
 */
static void test_metrics_for_export(void **state)
{
    struct test_loop *tl = *state;
    struct config cfg;
    config_init(&cfg);
    memset(&agent, 0, sizeof(agent));
    agent.loop = &tl->loop;
    agent.cfg = &cfg;
    agent.metrics_interval_sec = 5;
    timeouts_defaults(&agent.timeouts);
    struct metrics *m = NULL;
    assert_int_equal(metrics_new(&agent, false, &m), 0);
    assert_null(m); /* off and not exported: nothing runs */
    for (int served = 0; served < 2; served++) {
        agent.metrics_enabled = served == 1;
        assert_int_equal(metrics_new(&agent, true, &m), 0);
        assert_non_null(m);
        assert_int_equal(metrics_export_meters(m, " Orders.Meter ; ;orders.meter;Other"), 0);
        struct buf out;
        buf_init(&out, 0);
        assert_int_equal(metrics_render_own(m, &out), 0);
        cJSON *st = metrics_status_json(m);
        assert_non_null(st);
        assert_true(cJSON_IsArray(st));
        cJSON_Delete(st);
        /* metrics off: not a line of dotmon's per-process families */
        assert_int_equal(buf_size(&out) > 0, served == 1);
        buf_fini(&out);
        metrics_close(m);
    }
    /* more meters than a session takes: the rest left out, said */
    agent.metrics_enabled = false;
    assert_int_equal(metrics_new(&agent, true, &m), 0);
    static char many[64 * 8 + 16];
    size_t len = 0;
    for (int k = 0; k < 70; k++) {
        len += (size_t)snprintf(many + len, sizeof(many) - len, "M%d;", k);
    }
    assert_int_equal(metrics_export_meters(m, many), AGENT_E_TOOBIG);
    assert_int_equal(metrics_export_meters(m, NULL), 0);
    metrics_close(m);
    tl_run_for(tl, 20);
    config_fini(&cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_otel_proc_flow, tl_setup, tl_teardown),
        cmocka_unit_test(test_otel_providers),
        cmocka_unit_test_setup_teardown(test_metrics_for_export, tl_setup, tl_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
