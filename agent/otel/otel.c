/* SPDX-License-Identifier: MIT */
/*
 * The OpenTelemetry exporter (otel.h, docs/opentelemetry.md). Per signal: a FIFO of encoded items
 * (bounded by count and, for all signals together, by bytes charged to the memory budget), one
 * timer (schedule delay, retry backoff), one request in flight at most. A batch leaves the queue
 * when it is sent and stays with the signal until it is delivered, rejected or dropped at the
 * shutdown deadline; retries resend the same body.
 */
#define _GNU_SOURCE
#include "otel.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include <cJSON.h>
#include <openssl/crypto.h>
#include <uv.h>

#include "agent.h"
#include "ascii.h"
#include "buf.h"
#include "config.h"
#include "ehttp.h"
#include "err.h"
#include "ipc_discovery.h"
#include "log.h"
#include "membudget.h"
#include "num.h"
#include "otel_conf.h"
#include "rules.h"

static const char cat[] = "dotmon.otel";

/* Largest response body read (a partial-success message). */
#define OTEL_MAX_RESPONSE (64u * 1024)
/* At most one partial-success warning, and one queue-full warning, per signal this often. */
/* A request body up to this size (before gzip) is compressed on the loop (about 1 ms for 150 KB);
 * a bigger one on the thread pool. */
#define OTEL_GZIP_ON_LOOP (256u * 1024)
/* Processes whose counts are kept apart; later ones are counted under pid 0. */
#define OTEL_MAX_PIDS 4096

enum { C_EXPORTED = 0, C_DROPPED = 1, C_FAILED = 2 };

struct otel_pid {
    uint64_t pid;
    uint64_t n[3][3]; /* [signal][C_*] */
    uint64_t lost;    /* events the runtime dropped (otel_count_lost) */
};

struct otel_item {
    struct otel_item *next;
    struct otel_source *src;
    size_t scope_len;
    size_t item_len;
    uint8_t data[]; /* scope piece, then the item piece */
};

struct otel_source {
    struct otel *o;
    uint64_t pid;
    size_t pid_index;  /* into o->pids */
    int refs;          /* the producer's + one per queued item */
    struct buf res[2]; /* the resource piece by enum otlp_format */
};

struct otel_sig {
    struct otel *o;
    enum otlp_signal sig;
    const struct otel_sig_conf *c;
    struct ehttp_tls *tls;
    struct ehttp_header *hdrs; /* Host, Content-Type, [Content-Encoding], User-Agent, user's */
    size_t nhdrs;
    char host_header[300];

    struct otel_item *head, *tail; /* the queue */
    size_t nqueued;

    uv_timer_t timer;
    bool timer_armed;
    struct ehttp_conn *conn;
    struct otel_item *batch; /* in flight or waiting for a retry */
    size_t nbatch;
    struct buf body;
    /* gzip of a large body on the thread pool: zin (the encoded request) into body. While zbusy
     * the thread owns zin and body: nothing else touches them, and no new batch starts. */
    uv_work_t zwork;
    struct buf zin;
    int zrc;
    bool zbusy;
    size_t body_charged; /* what body and zin may hold, charged to o->bodies while they live */
    uint64_t batch_started_ms;
    unsigned attempt;
    bool told_when; /* the retry waits for the receiver's Retry-After */
    bool unreachable;
    uint64_t last_partial_warn;
    uint64_t last_drop_warn;

    uint64_t requests, retries, rejected_points;
};

struct otel {
    struct agent *a;
    uv_loop_t *loop;
    struct otel_conf conf;
    struct otel_settings set;
    struct rules_filter_list *filters;
    struct otel_sig sig[3];
    struct mb_share share;  /* the queued items */
    struct mb_share bodies; /* the request bodies being built or sent (bounded by the total) */
    struct buf scratch;

    struct otel_pid *pids;
    size_t npids, cappids;

    bool shutting;
    void (*done)(void *ud);
    void *done_ud;
    uv_timer_t deadline;
    bool deadline_on;
    int open_handles;
    size_t nsources; /* alive: struct otel stays (freeing) until the last is released */
    bool freeing;
};

/* ---- counts ---- */

static size_t pid_index(struct otel *o, uint64_t pid)
{
    for (size_t i = 0; i < o->npids; i++) {
        if (o->pids[i].pid == pid) {
            return i;
        }
    }
    if (o->npids == OTEL_MAX_PIDS) {
        return 0; /* the first entry, pid 0, holds the rest */
    }
    if (o->npids == o->cappids) {
        size_t cap = o->cappids == 0 ? 8 : o->cappids * 2;
        struct otel_pid *n = realloc(o->pids, cap * sizeof(*n));
        if (n == NULL) {
            return 0;
        }
        o->pids = n;
        o->cappids = cap;
    }
    memset(&o->pids[o->npids], 0, sizeof(o->pids[0]));
    o->pids[o->npids].pid = pid;
    return o->npids++;
}

static void count(struct otel *o, const struct otel_source *s, enum otlp_signal sig, int what,
                  uint64_t n)
{
    o->pids[s != NULL ? s->pid_index : 0].n[sig][what] += n;
}

void otel_count_dropped(struct otel *o, const struct otel_source *s, enum otlp_signal sig,
                        uint64_t n)
{
    if (o != NULL) {
        count(o, s, sig, C_DROPPED, n);
    }
}

void otel_count_lost(struct otel *o, const struct otel_source *s, uint64_t n)
{
    if (o != NULL) {
        o->pids[s != NULL ? s->pid_index : 0].lost += n;
    }
}

/* ---- items ---- */

static size_t item_charge(const struct otel_item *it)
{
    return sizeof(*it) + it->scope_len + it->item_len;
}

static void maybe_free(struct otel *o)
{
    if (o->freeing && o->open_handles == 0 && o->nsources == 0) {
        mb_share_fini(&o->bodies);
        otel_conf_fini(&o->conf);
        free(o);
    }
}

static void source_unref(struct otel_source *s)
{
    if (--s->refs == 0) {
        struct otel *o = s->o;
        buf_fini(&s->res[0]);
        buf_fini(&s->res[1]);
        free(s);
        o->nsources--;
        maybe_free(o);
    }
}

static void item_free(struct otel *o, struct otel_item *it)
{
    mb_release(&o->share, item_charge(it));
    source_unref(it->src);
    free(it);
}

/* Frees a list of items, counting them as what (C_EXPORTED, C_DROPPED, C_FAILED). */
static void items_done(struct otel_sig *q, struct otel_item *list, int what)
{
    while (list != NULL) {
        struct otel_item *next = list->next;
        count(q->o, list->src, q->sig, what, 1);
        item_free(q->o, list);
        list = next;
    }
}

/* ---- sending ---- */

static void arm(struct otel_sig *q, uint64_t ms);
static void maybe_finish(struct otel *o);

static uint64_t now_ms(const struct otel *o)
{
    return uv_now(o->loop);
}

/* Retry-After: delta-seconds or an HTTP date; 0 when absent or unreadable. */
static uint64_t retry_after_ms(const struct ehttp_response *r)
{
    const char *v = r != NULL ? ehttp_response_header(r, "Retry-After") : NULL;
    if (v == NULL) {
        return 0;
    }
    while (*v == ' ') {
        v++;
    }
    uint64_t secs;
    if (num_parse_u64_str(v, 10, 86400, &secs) == 0) {
        return secs * 1000;
    }
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    const char *end = strptime(v, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    if (end == NULL) {
        return 0;
    }
    time_t when = timegm(&tm);
    time_t now = time(NULL);
    if (when <= now) {
        return 1;
    }
    uint64_t d = (uint64_t)(when - now);
    return (d > 86400 ? 86400 : d) * 1000;
}

/* Exponential backoff with jitter: [1/2, 1] of initial * 2^attempt, at most the maximum. */
static uint64_t backoff_ms(const struct otel *o, unsigned attempt)
{
    uint64_t d = o->conf.retry_initial_ms;
    for (unsigned i = 0; i < attempt && d < o->conf.retry_max_ms; i++) {
        d *= 2;
    }
    if (d > o->conf.retry_max_ms) {
        d = o->conf.retry_max_ms;
    }
    uint64_t half = d / 2;
    uint32_t r;
    if (uv_random(NULL, NULL, &r, sizeof(r), 0, NULL) != 0) {
        r = (uint32_t)uv_hrtime();
    }
    return half + (half > 0 ? r % (half + 1) : 0);
}

/*
 * The request bodies' memory: before a batch is encoded, an upper bound of its encoded size (and
 * of its gzip) is charged to o->bodies and set as the buffers' limit, so no byte of them is
 * allocated uncharged; the charge follows the buffers down as zin is freed after gzip, and goes
 * with them when the batch ends.
 */
static int bodies_charge(struct otel_sig *q, size_t n)
{
    if (n > q->body_charged) {
        if (mb_charge(&q->o->bodies, n - q->body_charged) != 0) {
            return AGENT_E_BUDGET;
        }
    } else {
        mb_release(&q->o->bodies, q->body_charged - n);
    }
    q->body_charged = n;
    return 0;
}

static void bodies_free(struct otel_sig *q)
{
    buf_fini(&q->body);
    buf_fini(&q->zin);
    (void)bodies_charge(q, 0);
}

/* gzip's output bound for n bytes in (zlib's compressBound plus the gzip wrapper). */
static size_t gzip_bound(size_t n)
{
    return n + (n >> 12) + (n >> 14) + (n >> 25) + 13 + 32;
}

static void batch_end(struct otel_sig *q, int what)
{
    items_done(q, q->batch, what);
    q->batch = NULL;
    q->nbatch = 0;
    q->attempt = 0;
    if (!q->zbusy) { /* else the thread still writes it: freed when it is done */
        bodies_free(q);
    }
}

static void on_response(void *ud, int err, const struct ehttp_response *resp, const char *why);

static void post(struct otel_sig *q)
{
    struct otel *o = q->o;
    struct ehttp_request rq = {.method = "POST",
                               .host = q->c->host,
                               .port = q->c->port,
                               .tls = q->tls,
                               .target = q->c->target,
                               .headers = q->hdrs,
                               .nheaders = q->nhdrs,
                               .body = buf_data(&q->body),
                               .body_len = buf_size(&q->body),
                               .idle_ms = q->c->timeout_ms,
                               .total_ms = q->c->timeout_ms < q->c->export_timeout_ms
                                               ? q->c->timeout_ms
                                               : q->c->export_timeout_ms,
                               .max_body = OTEL_MAX_RESPONSE};
    q->requests++;
    int rc = ehttp_start(o->loop, &rq, on_response, q, &q->conn);
    if (rc != 0) {
        q->conn = NULL;
        log_warn(cat, "%s export to %s could not start: %s", otlp_signal_name(q->sig), q->c->url,
                 agent_strerror(rc));
        q->attempt++;
        arm(q, backoff_ms(o, q->attempt));
    }
}

/* gzip (RFC 1952) of in into out (deflate's bound reserved first: one pass). */
static int gzip_into(const uint8_t *in, size_t n, struct buf *out)
{
    z_stream z;
    memset(&z, 0, sizeof(z));
    if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
        Z_OK) {
        return -ENOMEM;
    }
    size_t bound = deflateBound(&z, (uLong)n);
    int rc = n > UINT32_MAX / 2 ? AGENT_E_TOOBIG : buf_reserve(out, bound);
    if (rc == 0) {
        z.next_in = (Bytef *)(uintptr_t)in;
        z.avail_in = (uInt)n;
        z.next_out = out->p + out->len;
        z.avail_out = (uInt)bound;
        if (deflate(&z, Z_FINISH) != Z_STREAM_END) {
            rc = AGENT_E_INVAL;
        } else {
            out->len += z.total_out; /* written in the room buf_reserve made */
        }
    }
    (void)deflateEnd(&z);
    return rc;
}

/*
 * A batch laid out for otlp_request_encode: its items' pieces grouped by source (resource), then
 * scope, each in order of first appearance. Every array has room for one entry per item.
 */
struct layout {
    struct otlp_piece *pieces;
    struct otlp_scope_group *scopes;
    struct otlp_resource_group *groups;
    struct pair { /* one (source, scope) */
        const struct otel_item *first;
        size_t group;
        size_t count;
        size_t scope; /* its index in scopes */
    } * pairs;
    size_t *pair_of;                 /* by item */
    const struct otel_source **srcs; /* by group */
    size_t npairs, ngroups, nscopes;
};

static void layout_free(struct layout *l)
{
    free(l->pieces);
    free(l->scopes);
    free(l->groups);
    free(l->pairs);
    free(l->pair_of);
    free((void *)l->srcs);
}

static int layout_alloc(struct layout *l, size_t n)
{
    memset(l, 0, sizeof(*l));
    l->pieces = calloc(n, sizeof(struct otlp_piece));
    l->scopes = calloc(n, sizeof(struct otlp_scope_group));
    l->groups = calloc(n, sizeof(struct otlp_resource_group));
    l->pairs = calloc(n, sizeof(struct pair));
    l->pair_of = calloc(n, sizeof(size_t));
    l->srcs = calloc(n, sizeof(const void *));
    if (l->pieces == NULL || l->scopes == NULL || l->groups == NULL || l->pairs == NULL ||
        l->pair_of == NULL || l->srcs == NULL) {
        layout_free(l);
        return -ENOMEM;
    }
    return 0;
}

/* Which (source, scope) pair each item is, and which group each pair is in. */
static void layout_pairs(struct layout *l, const struct otel_item *batch)
{
    size_t k = 0;
    for (const struct otel_item *it = batch; it != NULL; it = it->next, k++) {
        size_t p = 0;
        while (p < l->npairs && !(l->pairs[p].first->src == it->src &&
                                  l->pairs[p].first->scope_len == it->scope_len &&
                                  memcmp(l->pairs[p].first->data, it->data, it->scope_len) == 0)) {
            p++;
        }
        if (p == l->npairs) {
            size_t g = 0;
            while (g < l->ngroups && l->srcs[g] != it->src) {
                g++;
            }
            if (g == l->ngroups) {
                l->srcs[l->ngroups++] = it->src;
            }
            l->pairs[l->npairs++] = (struct pair){.first = it, .group = g};
        }
        l->pair_of[k] = p;
        l->pairs[p].count++;
    }
}

/* The groups and scope groups in order, then each item's piece in its scope group. */
static void layout_fill(struct layout *l, const struct otel_item *batch, enum otlp_format f)
{
    size_t at = 0;
    for (size_t g = 0; g < l->ngroups; g++) {
        const struct buf *res = &l->srcs[g]->res[f];
        l->groups[g] = (struct otlp_resource_group){
            .resource = {.p = buf_data(res), .n = buf_size(res)}, .scopes = &l->scopes[l->nscopes]};
        for (size_t p = 0; p < l->npairs; p++) {
            if (l->pairs[p].group != g) {
                continue;
            }
            l->scopes[l->nscopes] = (struct otlp_scope_group){
                .scope = {.p = l->pairs[p].first->data, .n = l->pairs[p].first->scope_len},
                .items = &l->pieces[at]};
            at += l->pairs[p].count;
            l->pairs[p].scope = l->nscopes++;
            l->groups[g].nscopes++;
        }
    }
    size_t k = 0;
    for (const struct otel_item *it = batch; it != NULL; it = it->next, k++) {
        struct otlp_scope_group *sg = &l->scopes[l->pairs[l->pair_of[k]].scope];
        size_t slot = (size_t)(sg->items - l->pieces) + sg->nitems++;
        l->pieces[slot] = (struct otlp_piece){.p = it->data + it->scope_len, .n = it->item_len};
    }
}

/* More than the request's framing adds per resource group and per item, in either format (a
 * scope's piece is counted with each of its items, its framing in the item's share). */
#define OTEL_FRAME_PER_GROUP 128u
#define OTEL_FRAME_PER_ITEM  48u

/*
 * The batch as one request body (gzipped when set), into zin (then gzip'd into body) or body:
 * its bound is charged first (AGENT_E_BUDGET when the budget refuses it) and the buffers cannot
 * grow past what was charged.
 */
static int encode_batch(struct otel_sig *q)
{
    enum otlp_format f = q->c->format;
    struct layout l;
    int rc = layout_alloc(&l, q->nbatch);
    if (rc != 0) {
        return rc;
    }
    layout_pairs(&l, q->batch);
    layout_fill(&l, q->batch, f);
    size_t est = 16;
    for (size_t g = 0; g < l.ngroups; g++) {
        est += buf_size(&l.srcs[g]->res[f]) + OTEL_FRAME_PER_GROUP;
    }
    for (const struct otel_item *it = q->batch; it != NULL; it = it->next) {
        est += it->scope_len + it->item_len + OTEL_FRAME_PER_ITEM;
    }
    bodies_free(q);
    struct buf *out = q->c->gzip ? &q->zin : &q->body;
    /* a buffer's capacity is at most max + 1 (its NUL) */
    rc = bodies_charge(q, est + 1 + (q->c->gzip ? gzip_bound(est) + 1 : 0));
    if (rc == 0) {
        out->max = est;
        q->body.max = q->c->gzip ? gzip_bound(est) : est;
        rc = otlp_request_encode(q->sig, f, l.groups, l.ngroups, out);
    }
    layout_free(&l);
    return rc;
}

static void zwork_run(uv_work_t *w)
{
    struct otel_sig *q = w->data;
    q->zrc = gzip_into(buf_data(&q->zin), buf_size(&q->zin), &q->body);
}

/* A batch that was not made: dropped when the budget refused its body (counted as the queue's
 * drops, one warning a minute at most), else failed. */
static void batch_failed(struct otel_sig *q, int rc)
{
    uint64_t now = now_ms(q->o);
    if (rc != AGENT_E_BUDGET) {
        log_warn(cat, "%s: a batch of %zu item(s) did not encode (%s); dropped",
                 otlp_signal_name(q->sig), q->nbatch, agent_strerror(rc));
    } else if (q->last_drop_warn == 0 || now - q->last_drop_warn >= OTEL_WARN_EVERY_MS) {
        q->last_drop_warn = now;
        log_warn(cat,
                 "%s: items dropped: a request body of %zu item(s) does not fit in the memory "
                 "budget (Memory:LimitMB; dotmon_otel_dropped_total counts them)",
                 otlp_signal_name(q->sig), q->nbatch);
    }
    batch_end(q, rc == AGENT_E_BUDGET ? C_DROPPED : C_FAILED);
    if (q->nqueued > 0) {
        arm(q, 0);
    }
    maybe_finish(q->o);
}

static void zwork_done(uv_work_t *w, int status)
{
    struct otel_sig *q = w->data;
    struct otel *o = q->o;
    q->zbusy = false;
    o->open_handles--;
    if (o->freeing || q->batch == NULL) { /* or dropped meanwhile (the shutdown deadline) */
        bodies_free(q);
        if (o->freeing) {
            maybe_free(o);
            return;
        }
        if (q->nqueued > 0) {
            arm(q, 0);
        }
        maybe_finish(o);
        return;
    }
    buf_fini(&q->zin); /* the input: only the gzip is sent */
    (void)bodies_charge(q, q->body.cap);
    int rc = status != 0 ? status : q->zrc;
    if (rc != 0) {
        batch_failed(q, rc);
        return;
    }
    post(q);
}

/* Takes the next batch off the queue and sends it. */
static void send_next(struct otel_sig *q)
{
    if (q->conn != NULL || q->batch != NULL || q->zbusy || q->nqueued == 0) {
        return;
    }
    size_t n = 0;
    struct otel_item **link = &q->head;
    while (*link != NULL && n < q->c->max_batch) {
        link = &(*link)->next;
        n++;
    }
    q->batch = q->head;
    q->head = *link;
    *link = NULL;
    if (q->head == NULL) {
        q->tail = NULL;
    }
    q->nqueued -= n;
    q->nbatch = n;
    q->attempt = 0;
    q->batch_started_ms = now_ms(q->o);
    uint64_t t0 = uv_hrtime();
    int rc = encode_batch(q);
    if (rc == 0 && q->c->gzip && buf_size(&q->zin) > OTEL_GZIP_ON_LOOP) {
        q->zwork.data = q;
        rc = uv_queue_work(q->o->loop, &q->zwork, zwork_run, zwork_done);
        if (rc == 0) {
            q->zbusy = true;
            q->o->open_handles++;
            log_debug(cat, "%s: %zu item(s) in %zu bytes, made in %.3f ms, gzip on the pool",
                      otlp_signal_name(q->sig), n, buf_size(&q->zin),
                      (double)(uv_hrtime() - t0) / 1e6);
            return;
        }
    } else if (rc == 0 && q->c->gzip) {
        rc = gzip_into(buf_data(&q->zin), buf_size(&q->zin), &q->body);
        buf_fini(&q->zin); /* the input: only the gzip is sent */
        (void)bodies_charge(q, q->body.cap);
    }
    log_debug(cat, "%s: %zu item(s) in %zu bytes%s, made in %.3f ms", otlp_signal_name(q->sig), n,
              buf_size(&q->body), q->c->gzip ? " (gzip)" : "", (double)(uv_hrtime() - t0) / 1e6);
    if (rc != 0) {
        batch_failed(q, rc);
        return;
    }
    post(q);
}

static void on_timer(uv_timer_t *t)
{
    struct otel_sig *q = t->data;
    q->timer_armed = false;
    if (q->batch != NULL && q->conn == NULL) {
        post(q); /* a retry */
    } else {
        send_next(q);
    }
}

static void arm(struct otel_sig *q, uint64_t ms)
{
    if (q->o->freeing) {
        return;
    }
    (void)uv_timer_start(&q->timer, on_timer, ms, 0);
    q->timer_armed = true;
}

static bool retryable(int status)
{
    return status == 429 || status == 502 || status == 503 || status == 504;
}

static void on_response(void *ud, int err, const struct ehttp_response *resp, const char *why)
{
    struct otel_sig *q = ud;
    struct otel *o = q->o;
    const char *name = otlp_signal_name(q->sig);
    q->conn = NULL;
    if (err == 0 && resp->status >= 200 && resp->status < 300) {
        if (q->unreachable) {
            q->unreachable = false;
            log_info(cat, "%s export to %s works again", name, q->c->url);
        }
        int64_t rejected = 0;
        char msg[256] = "";
        if (resp->body_len > 0 &&
            otlp_response_decode(q->sig, q->c->format, resp->body, resp->body_len, &rejected, msg,
                                 sizeof(msg)) == 0 &&
            (rejected > 0 || msg[0] != '\0')) {
            q->rejected_points += rejected > 0 ? (uint64_t)rejected : 0;
            if (q->last_partial_warn == 0 ||
                now_ms(o) - q->last_partial_warn >= OTEL_WARN_EVERY_MS) {
                q->last_partial_warn = now_ms(o);
                log_warn(cat, "%s export to %s: the receiver rejected %lld of them: %s", name,
                         q->c->url, (long long)rejected, msg[0] != '\0' ? msg : "(no message)");
            }
        }
        batch_end(q, C_EXPORTED);
    } else if (err == 0 && !retryable(resp->status)) {
        log_warn(cat, "%s export to %s: HTTP %d; %zu item(s) dropped (not retried)", name,
                 q->c->url, resp->status, q->nbatch);
        batch_end(q, C_FAILED);
    } else {
        uint64_t wait = backoff_ms(o, q->attempt);
        uint64_t ra = err == 0 ? retry_after_ms(resp) : 0;
        if (ra > 0) {
            wait = ra;
        }
        q->told_when = ra > 0;
        q->attempt++;
        q->retries++;
        /* Once, until an export works again: unreachable, or answering 429/502/503/504. */
        if (!q->unreachable) {
            q->unreachable = true;
            char st[32];
            (void)snprintf(st, sizeof(st), "HTTP %d", err == 0 ? resp->status : 0);
            log_warn(cat, "%s export to %s failed: %s; retrying (items wait in the queue)", name,
                     q->c->url,
                     err == 0      ? st
                     : why != NULL ? why
                                   : agent_strerror(err));
        }
        log_debug(cat, "%s export to %s: retry in %llu ms", name, q->c->url,
                  (unsigned long long)wait);
        arm(q, wait);
        return;
    }
    if (q->nqueued >= q->c->max_batch || (o->shutting && q->nqueued > 0)) {
        arm(q, 0);
    } else if (q->nqueued > 0) {
        arm(q, q->c->delay_ms);
    }
    maybe_finish(o);
}

/* ---- the public side ---- */

static const char *env_cb(const void *ud, const char *name)
{
    (void)ud;
    return getenv(name);
}

static const char *cfg_cb(const void *ud, const char *key)
{
    return config_get(ud, key);
}

static int sig_init(struct otel *o, enum otlp_signal s, char *why, size_t whylen)
{
    struct otel_sig *q = &o->sig[s];
    q->o = o;
    q->sig = s;
    q->c = &o->conf.sig[s];
    buf_init(&q->body, 0);
    buf_init(&q->zin, 0);
    if (!q->c->on) {
        return 0;
    }
    if (q->c->https) {
        int rc = ehttp_tls_new(q->c->ca, &q->tls, why, whylen);
        if (rc != 0) {
            return rc;
        }
    }
    q->hdrs = calloc(4 + q->c->nheaders, sizeof(*q->hdrs));
    if (q->hdrs == NULL) {
        return -ENOMEM;
    }
    bool v6 = strchr(q->c->host, ':') != NULL;
    bool dflt = q->c->port == (q->c->https ? 443 : 80);
    char port[8];
    (void)snprintf(port, sizeof(port), ":%u", q->c->port);
    (void)snprintf(q->host_header, sizeof(q->host_header), "%s%s%s%s", v6 ? "[" : "", q->c->host,
                   v6 ? "]" : "", dflt ? "" : port);
    size_t n = 0;
    q->hdrs[n++] = (struct ehttp_header){"Host", q->host_header};
    q->hdrs[n++] = (struct ehttp_header){
        "Content-Type", q->c->format == OTLP_JSON ? "application/json" : "application/x-protobuf"};
    if (q->c->gzip) {
        q->hdrs[n++] = (struct ehttp_header){"Content-Encoding", "gzip"};
    }
    q->hdrs[n++] = (struct ehttp_header){"User-Agent", "dotmon"};
    for (size_t i = 0; i < q->c->nheaders; i++) {
        q->hdrs[n++] = (struct ehttp_header){q->c->headers[i].name, q->c->headers[i].value};
    }
    q->nhdrs = n;
    uv_timer_init(o->loop, &q->timer);
    q->timer.data = q;
    uv_unref((uv_handle_t *)&q->timer);
    o->open_handles++;
    return 0;
}

static int load_filters(struct otel *o, const struct config *cfg, char *why, size_t whylen)
{
    if (cfg == NULL) {
        return 0;
    }
    struct rules_kv *kv = calloc(cfg->n + 1, sizeof(*kv));
    if (kv == NULL) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < cfg->n; i++) {
        kv[i] = (struct rules_kv){.key = cfg->v[i].key, .value = cfg->v[i].value};
    }
    int rc = rules_filter_list_load(kv, cfg->n, "OpenTelemetry:Filters", &o->filters);
    free(kv);
    if (rc == 0 && o->filters->nerrors > 0) {
        (void)snprintf(why, whylen, "%s", o->filters->errors[0]);
        rc = AGENT_E_INVAL;
    }
    return rc;
}

static void otel_destroy(struct otel *o);

int otel_new(struct agent *a, struct otel **out, char *why, size_t whylen)
{
    *out = NULL;
    struct otel_conf conf;
    struct otel_conf_src src = {.getenv = env_cb, .getcfg = cfg_cb, .cfg_ud = a->cfg};
    if (a->cfg == NULL) {
        src.getcfg = NULL;
    }
    int rc = otel_conf_read(&src, &conf, why, whylen);
    if (rc != 0) {
        return rc;
    }
    if (!conf.any) {
        otel_conf_fini(&conf);
        return 0;
    }
    struct otel *o = calloc(1, sizeof(*o));
    if (o == NULL) {
        otel_conf_fini(&conf);
        return -ENOMEM;
    }
    o->a = a;
    o->loop = a->loop;
    o->conf = conf;
    buf_init(&o->scratch, 0);
    mb_share_init(&o->share, "OpenTelemetry export queues", o->conf.max_queue_mb << 20);
    mb_share_init(&o->bodies, "OpenTelemetry request bodies", 0);
    (void)pid_index(o, 0);
    o->set =
        (struct otel_settings){.log_level = o->conf.log_level,
                               .include_scopes = o->conf.include_scopes,
                               .log_filter = o->conf.log_filter != NULL ? o->conf.log_filter : "",
                               .meters = o->conf.meters,
                               .activity_sources = o->conf.activity_sources,
                               .sampling_ratio = o->conf.sampling_ratio,
                               .metric_interval_ms = o->conf.metric_interval_ms,
                               .exp_histograms = o->conf.exp_histograms};
    for (int s = 0; s < 3; s++) {
        o->set.signal[s] = o->conf.sig[s].on;
    }
    rc = load_filters(o, a->cfg, why, whylen);
    for (int s = 0; s < 3 && rc == 0; s++) {
        rc = sig_init(o, (enum otlp_signal)s, why, whylen);
    }
    if (rc != 0) {
        otel_destroy(o);
        return rc;
    }
    for (int s = 0; s < 3; s++) {
        const struct otel_sig_conf *c = &o->conf.sig[s];
        if (c->on) {
            log_info(cat, "%s exported to %s (%s%s%s, %zu header(s))", otlp_signal_name(s), c->url,
                     c->format == OTLP_JSON ? "http/json" : "http/protobuf",
                     c->gzip ? ", gzip" : "", c->ca != NULL ? ", private CA" : "", c->nheaders);
        }
    }
    *out = o;
    return 0;
}

const struct otel_settings *otel_settings(const struct otel *o)
{
    return &o->set;
}

bool otel_wants_process(const struct otel *o, const struct ipc_process *p)
{
    if (o->filters == NULL) {
        return true;
    }
    const struct rules_process rp = agent_rules_process(p);
    return rules_filter_list_match(o->filters->filters, o->filters->nfilters, &rp);
}

struct otel_source *otel_source_new(struct otel *o, uint64_t pid, const struct otlp_resource *res)
{
    if (o->freeing) {
        return NULL;
    }
    struct otel_source *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return NULL;
    }
    s->o = o;
    o->nsources++;
    s->pid = pid;
    s->pid_index = pid_index(o, pid);
    s->refs = 1;
    buf_init(&s->res[0], 0);
    buf_init(&s->res[1], 0);
    for (int f = 0; f < 2; f++) {
        bool used = false;
        for (int sig = 0; sig < 3; sig++) {
            used = used || (o->conf.sig[sig].on && (int)o->conf.sig[sig].format == f);
        }
        if (used && otlp_resource_encode(res, (enum otlp_format)f, &s->res[f]) != 0) {
            source_unref(s);
            return NULL;
        }
    }
    return s;
}

void otel_source_release(struct otel_source *s)
{
    if (s != NULL) {
        source_unref(s);
    }
}

/* A drop: one warning per signal at most every OTEL_WARN_EVERY_MS (counts tell the rest). */
static void queue_full(struct otel_sig *q, const char *why)
{
    uint64_t now = now_ms(q->o);
    if (q->last_drop_warn == 0 || now - q->last_drop_warn >= OTEL_WARN_EVERY_MS) {
        q->last_drop_warn = now;
        log_warn(cat, "%s: items dropped: %s (%s; dotmon_otel_dropped_total counts them)",
                 otlp_signal_name(q->sig), why,
                 q->unreachable ? "the endpoint is unreachable"
                                : "the endpoint is slower than the apps");
    }
}

/* Encodes scope and the item (enc) into a new queued item. */
static int emit(struct otel_source *s, enum otlp_signal sig, const struct otlp_scope *scope,
                int (*enc)(const void *, enum otlp_format, struct buf *), const void *item)
{
    struct otel *o = s->o;
    struct otel_sig *q = &o->sig[sig];
    if (o->freeing || !q->c->on) {
        return AGENT_E_INVAL;
    }
    if (q->nqueued >= q->c->max_queue) {
        count(o, s, sig, C_DROPPED, 1);
        queue_full(q, "its queue is full");
        return AGENT_E_BUDGET;
    }
    buf_reset(&o->scratch);
    int rc = otlp_scope_encode(scope, q->c->format, &o->scratch);
    size_t scope_len = buf_size(&o->scratch);
    if (rc == 0) {
        rc = enc(item, q->c->format, &o->scratch);
    }
    if (rc != 0) {
        buf_reset(&o->scratch);
        count(o, s, sig, C_FAILED, 1);
        return rc == -ENOMEM ? rc : AGENT_E_INVAL;
    }
    size_t total = buf_size(&o->scratch);
    if (mb_charge(&o->share, sizeof(struct otel_item) + total) != 0) {
        buf_reset(&o->scratch);
        count(o, s, sig, C_DROPPED, 1);
        queue_full(q, "the queues' memory (OpenTelemetry:MaxQueueMB or Memory:LimitMB) is spent");
        return AGENT_E_BUDGET;
    }
    struct otel_item *it = malloc(sizeof(*it) + total);
    if (it == NULL) {
        mb_release(&o->share, sizeof(struct otel_item) + total);
        buf_reset(&o->scratch);
        count(o, s, sig, C_DROPPED, 1);
        return -ENOMEM;
    }
    it->next = NULL;
    it->src = s;
    s->refs++;
    it->scope_len = scope_len;
    it->item_len = total - scope_len;
    memcpy(it->data, buf_data(&o->scratch), total);
    buf_reset(&o->scratch);
    if (q->tail != NULL) {
        q->tail->next = it;
    } else {
        q->head = it;
    }
    q->tail = it;
    q->nqueued++;
    if (q->batch == NULL && q->conn == NULL) {
        if (q->nqueued >= q->c->max_batch) {
            arm(q, 0);
        } else if (!q->timer_armed) {
            arm(q, q->c->delay_ms);
        }
    }
    return 0;
}

static int enc_log(const void *p, enum otlp_format f, struct buf *out)
{
    return otlp_log_encode(p, f, out);
}
static int enc_span(const void *p, enum otlp_format f, struct buf *out)
{
    return otlp_span_encode(p, f, out);
}
static int enc_metric(const void *p, enum otlp_format f, struct buf *out)
{
    return otlp_metric_encode(p, f, out);
}

int otel_emit_log(struct otel_source *s, const struct otlp_scope *scope, const struct otlp_log *l)
{
    return emit(s, OTLP_LOGS, scope, enc_log, l);
}

int otel_emit_span(struct otel_source *s, const struct otlp_scope *scope,
                   const struct otlp_span *sp)
{
    return emit(s, OTLP_TRACES, scope, enc_span, sp);
}

int otel_emit_metric(struct otel_source *s, const struct otlp_scope *scope,
                     const struct otlp_metric *m)
{
    return emit(s, OTLP_METRICS, scope, enc_metric, m);
}

/* ---- counts out ---- */

/* Entry 0 (pid 0) holds what came past OTEL_MAX_PIDS processes: shown only when it has some. */
static bool pid_shown(const struct otel *o, size_t i)
{
    if (i > 0) {
        return true;
    }
    for (int s = 0; s < 3; s++) {
        for (int c = 0; c < 3; c++) {
            if (o->pids[0].n[s][c] != 0) {
                return true;
            }
        }
    }
    return o->pids[0].lost != 0;
}

static const char *const count_names[3] = {"exported", "dropped", "failed"};

int otel_render_prom(const struct otel *o, struct buf *out)
{
    if (o == NULL) {
        return 0;
    }
    static const char *const help[3] = {
        "Items (log records, metrics, spans) the OTLP receiver accepted",
        ("Items dropped before sending: the signal's queue was full, the shutdown deadline came, "
         "or a metric series did not fit in its process's bound"),
        "Items that did not encode or that the receiver refused (not retried)"};
    int rc = 0;
    for (int c = 0; c < 3 && rc == 0; c++) {
        rc =
            buf_printf(out, "# HELP dotmon_otel_%s_total %s\n# TYPE dotmon_otel_%s_total counter\n",
                       count_names[c], help[c], count_names[c]);
        for (size_t i = 0; i < o->npids && rc == 0; i++) {
            for (int s = 0; s < 3 && rc == 0 && pid_shown(o, i); s++) {
                if (!o->conf.sig[s].on) {
                    continue;
                }
                rc = buf_printf(out, "dotmon_otel_%s_total{pid=\"%llu\",signal=\"%s\"} %llu\n",
                                count_names[c], (unsigned long long)o->pids[i].pid,
                                otlp_signal_name(s), (unsigned long long)o->pids[i].n[s][c]);
            }
        }
    }
    if (rc == 0 && (o->conf.sig[OTLP_LOGS].on || o->conf.sig[OTLP_TRACES].on)) {
        rc = buf_printf(out,
                        "# HELP dotmon_otel_lost_events_total Events of the process's telemetry "
                        "session (logs, spans) its runtime dropped before dotmon read them (its "
                        "buffer was full)\n# TYPE dotmon_otel_lost_events_total counter\n");
        for (size_t i = 0; i < o->npids && rc == 0; i++) {
            if (pid_shown(o, i)) {
                rc = buf_printf(out, "dotmon_otel_lost_events_total{pid=\"%llu\"} %llu\n",
                                (unsigned long long)o->pids[i].pid,
                                (unsigned long long)o->pids[i].lost);
            }
        }
    }
    if (rc == 0) {
        rc = buf_printf(out, "# HELP dotmon_otel_queued Items waiting to be sent\n"
                             "# TYPE dotmon_otel_queued gauge\n");
    }
    for (int s = 0; s < 3 && rc == 0; s++) {
        if (o->conf.sig[s].on) {
            rc = buf_printf(out, "dotmon_otel_queued{signal=\"%s\"} %zu\n", otlp_signal_name(s),
                            o->sig[s].nqueued + o->sig[s].nbatch);
        }
    }
    if (rc == 0) {
        rc = buf_printf(out, "# HELP dotmon_otel_retries_total Export requests retried\n"
                             "# TYPE dotmon_otel_retries_total counter\n");
    }
    for (int s = 0; s < 3 && rc == 0; s++) {
        if (o->conf.sig[s].on) {
            rc = buf_printf(out, "dotmon_otel_retries_total{signal=\"%s\"} %llu\n",
                            otlp_signal_name(s), (unsigned long long)o->sig[s].retries);
        }
    }
    return rc;
}

cJSON *otel_status_json(const struct otel *o)
{
    if (o == NULL) {
        return NULL;
    }
    cJSON *root = cJSON_CreateObject();
    cJSON *sigs = cJSON_AddObjectToObject(root, "signals");
    cJSON *procs = cJSON_AddArrayToObject(root, "processes");
    if (sigs == NULL || procs == NULL) {
        cJSON_Delete(root);
        return NULL;
    }
    for (int s = 0; s < 3; s++) {
        const struct otel_sig *q = &o->sig[s];
        if (!q->c->on) {
            continue;
        }
        cJSON *j = cJSON_AddObjectToObject(sigs, otlp_signal_name(s));
        if (j == NULL) {
            cJSON_Delete(root);
            return NULL;
        }
        (void)cJSON_AddStringToObject(j, "endpoint", q->c->url);
        (void)cJSON_AddStringToObject(j, "protocol",
                                      q->c->format == OTLP_JSON ? "http/json" : "http/protobuf");
        (void)cJSON_AddBoolToObject(j, "gzip", q->c->gzip);
        (void)cJSON_AddBoolToObject(j, "reachable", !q->unreachable);
        (void)cJSON_AddNumberToObject(j, "queued", (double)(q->nqueued + q->nbatch));
        (void)cJSON_AddNumberToObject(j, "requests", (double)q->requests);
        (void)cJSON_AddNumberToObject(j, "retries", (double)q->retries);
        (void)cJSON_AddNumberToObject(j, "rejectedByReceiver", (double)q->rejected_points);
        uint64_t tot[3] = {0, 0, 0};
        for (size_t i = 0; i < o->npids; i++) {
            for (int c = 0; c < 3; c++) {
                tot[c] += o->pids[i].n[s][c];
            }
        }
        for (int c = 0; c < 3; c++) {
            (void)cJSON_AddNumberToObject(j, count_names[c], (double)tot[c]);
        }
    }
    for (size_t i = 0; i < o->npids; i++) {
        if (!pid_shown(o, i)) {
            continue;
        }
        cJSON *p = cJSON_CreateObject();
        if (p == NULL || !cJSON_AddItemToArray(procs, p)) {
            cJSON_Delete(p);
            cJSON_Delete(root);
            return NULL;
        }
        (void)cJSON_AddNumberToObject(p, "pid", (double)o->pids[i].pid);
        (void)cJSON_AddNumberToObject(p, "lostEvents", (double)o->pids[i].lost);
        for (int s = 0; s < 3; s++) {
            if (!o->conf.sig[s].on) {
                continue;
            }
            cJSON *j = cJSON_AddObjectToObject(p, otlp_signal_name(s));
            for (int c = 0; c < 3 && j != NULL; c++) {
                (void)cJSON_AddNumberToObject(j, count_names[c], (double)o->pids[i].n[s][c]);
            }
        }
    }
    return root;
}

/* ---- shutdown ---- */

static bool all_sent(const struct otel *o)
{
    for (int s = 0; s < 3; s++) {
        if (o->sig[s].nqueued > 0 || o->sig[s].batch != NULL) {
            return false;
        }
    }
    return true;
}

static void finish(struct otel *o)
{
    if (!o->shutting || o->done == NULL) {
        return;
    }
    void (*done)(void *) = o->done;
    o->done = NULL;
    if (o->deadline_on) {
        (void)uv_timer_stop(&o->deadline);
    }
    done(o->done_ud);
}

static void maybe_finish(struct otel *o)
{
    if (o->shutting && all_sent(o)) {
        finish(o);
    }
}

/* Drops everything left (counted), cancelling what is in flight. */
static void drop_all(struct otel *o)
{
    for (int s = 0; s < 3; s++) {
        struct otel_sig *q = &o->sig[s];
        if (q->conn != NULL) {
            ehttp_cancel(q->conn);
            q->conn = NULL;
        }
        if (q->timer_armed) {
            (void)uv_timer_stop(&q->timer);
            q->timer_armed = false;
        }
        batch_end(q, C_DROPPED);
        items_done(q, q->head, C_DROPPED);
        q->head = q->tail = NULL;
        q->nqueued = 0;
    }
}

static void on_deadline(uv_timer_t *t)
{
    struct otel *o = t->data;
    if (o->done == NULL) {
        return;
    }
    size_t left = 0;
    for (int s = 0; s < 3; s++) {
        left += o->sig[s].nqueued + o->sig[s].nbatch;
    }
    if (left > 0) {
        log_warn(cat, "shutdown: %zu telemetry item(s) not delivered in time; dropped", left);
    }
    drop_all(o);
    finish(o);
}

void otel_shutdown(struct otel *o, uint64_t deadline_ms, void (*done)(void *ud), void *ud)
{
    o->shutting = true;
    o->done = done;
    o->done_ud = ud;
    uv_timer_init(o->loop, &o->deadline);
    o->deadline.data = o;
    o->deadline_on = true;
    o->open_handles++;
    /* Queued items go now; a batch waiting for its retry is retried now (its backoff may end
     * past the deadline), unless the receiver said when with Retry-After. */
    for (int s = 0; s < 3; s++) {
        struct otel_sig *q = &o->sig[s];
        bool waits = q->batch != NULL ? !q->told_when : q->nqueued > 0;
        if (q->c->on && q->conn == NULL && !q->zbusy && waits) {
            arm(q, 0);
        }
    }
    /* Everything already sent: done from the loop, not from here (a zero deadline). */
    (void)uv_timer_start(&o->deadline, on_deadline, all_sent(o) ? 0 : deadline_ms, 0);
}

static void closed_one(struct otel *o)
{
    o->open_handles--;
    maybe_free(o);
}

static void on_timer_closed(uv_handle_t *h)
{
    closed_one(((struct otel_sig *)h->data)->o);
}

static void on_deadline_closed(uv_handle_t *h)
{
    closed_one(h->data);
}

static void otel_destroy(struct otel *o)
{
    o->freeing = true;
    o->done = NULL;
    drop_all(o);
    for (int s = 0; s < 3; s++) {
        struct otel_sig *q = &o->sig[s];
        if (!q->zbusy) { /* else zwork_done frees them */
            bodies_free(q);
        }
        free(q->hdrs);
        q->hdrs = NULL;
        ehttp_tls_free(q->tls);
        q->tls = NULL;
    }
    rules_filter_list_free(o->filters);
    o->filters = NULL;
    buf_fini(&o->scratch);
    mb_share_fini(&o->share);
    free(o->pids);
    o->pids = NULL;
    for (int s = 0; s < 3; s++) {
        if (o->sig[s].timer.loop != NULL) {
            uv_close((uv_handle_t *)&o->sig[s].timer, on_timer_closed);
        }
    }
    if (o->deadline_on) {
        uv_close((uv_handle_t *)&o->deadline, on_deadline_closed);
    }
    maybe_free(o);
}

void otel_free(struct otel *o)
{
    if (o != NULL) {
        otel_destroy(o);
    }
}
