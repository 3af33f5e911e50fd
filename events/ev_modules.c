/* SPDX-License-Identifier: MIT */
/* The modules a loader rundown names; see ev_modules.h. */
#include "ev_modules.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ascii.h"
#include "err.h"
#include "ev_rd.h"
#include "nettrace.h"

#define RUNDOWN_PROVIDER "Microsoft-Windows-DotNETRuntimeRundown"
/* Where ModuleILPath starts: after ModuleID, AssemblyID[, AppDomainID], ModuleFlags, Reserved1. */
#define MODULE_IL_PATH_AT        24
#define DOMAIN_MODULE_IL_PATH_AT 32

struct ev_modules {
    struct nettrace_checker ck;
    const char *files[EV_MODULES_MAX_WATCH];
    size_t nfiles;
    bool found[EV_MODULES_MAX_WATCH];
    struct ev_modules_stats st;
    bool finished;
    bool complete;
    int err;
    char msg[256];
};

/* True when the UTF-16LE s[0..units) is the ASCII text a, ignoring ASCII case. */
static bool utf16_eq_ascii_nocase(const uint8_t *s, size_t units, const char *a)
{
    size_t k = 0;
    for (; k < units; k++) {
        uint16_t u = ev_load_u16(s + 2 * k);
        if (a[k] == '\0' || u > 0x7F || ascii_lower((char)u) != ascii_lower(a[k])) {
            return false;
        }
    }
    return a[k] == '\0';
}

/* One module event: its ModuleILPath's file name against the watched names. */
static void on_module(struct ev_modules *m, const struct nettrace_event *ev, size_t path_at)
{
    struct ev_rd r;
    ev_rd_init(&r, ev->payload, ev->payload_len);
    const uint8_t *path = NULL;
    size_t units = 0;
    if (ev_rd_skip(&r, path_at) != 0 || !ev_rd_utf16z(&r, &path, &units)) {
        m->st.malformed++;
        return;
    }
    m->st.modules++;
    size_t base = 0; /* the file name starts after the last separator */
    for (size_t k = 0; k < units; k++) {
        uint16_t u = ev_load_u16(path + 2 * k);
        if (u == '/' || u == '\\') {
            base = k + 1;
        }
    }
    for (size_t i = 0; i < m->nfiles; i++) {
        if (utf16_eq_ascii_nocase(path + 2 * base, units - base, m->files[i])) {
            m->found[i] = true;
        }
    }
}

static void on_event(void *ud, const struct nettrace_event *ev)
{
    struct ev_modules *m = ud;
    if (strcmp(ev->provider, RUNDOWN_PROVIDER) != 0) {
        return;
    }
    switch (ev->event_id) {
    case EV_RUNDOWN_MODULE_DCSTART:
    case EV_RUNDOWN_MODULE_DCEND:
        on_module(m, ev, MODULE_IL_PATH_AT);
        break;
    case EV_RUNDOWN_DOMAIN_MODULE_DCSTART:
    case EV_RUNDOWN_DOMAIN_MODULE_DCEND:
        on_module(m, ev, DOMAIN_MODULE_IL_PATH_AT);
        break;
    case EV_RUNDOWN_DC_END_COMPLETE:
        m->st.rundown_complete = true;
        break;
    default:
        break;
    }
}

int ev_modules_new(struct ev_modules **out, const char *const *files, size_t nfiles)
{
    if (out == NULL || files == NULL || nfiles == 0 || nfiles > EV_MODULES_MAX_WATCH) {
        return AGENT_E_INVAL;
    }
    for (size_t i = 0; i < nfiles; i++) {
        if (files[i] == NULL || files[i][0] == '\0') {
            return AGENT_E_INVAL;
        }
    }
    struct ev_modules *m = calloc(1, sizeof(*m));
    if (m == NULL) {
        return -ENOMEM;
    }
    int rc = nettrace_checker_init(&m->ck, NULL);
    if (rc != 0) {
        free(m);
        return rc;
    }
    nettrace_set_event_cb(&m->ck, on_event, m);
    memcpy(m->files, files, nfiles * sizeof(*files));
    m->nfiles = nfiles;
    *out = m;
    return 0;
}

int ev_modules_feed(struct ev_modules *m, const uint8_t *p, size_t n)
{
    if (m->err != 0) {
        return m->err;
    }
    int rc = nettrace_feed(&m->ck, p, n);
    if (rc < 0) {
        nettrace_error_line(&m->ck, rc, m->msg, sizeof(m->msg));
        m->err = rc;
    }
    return rc;
}

bool ev_modules_finish(struct ev_modules *m)
{
    if (!m->finished) {
        m->finished = true;
        m->complete = m->err == 0 && nettrace_finish(&m->ck) == NETTRACE_COMPLETE;
    }
    return m->complete;
}

const char *ev_modules_error(const struct ev_modules *m)
{
    return m->err != 0 ? m->msg : NULL;
}

bool ev_modules_found(const struct ev_modules *m, size_t i)
{
    return i < m->nfiles && m->found[i];
}

const char *ev_modules_inconclusive(const struct ev_modules *m)
{
    struct ev_modules_stats st;
    ev_modules_get_stats(m, &st);
    if (m->err != 0) {
        return "the event stream is invalid";
    }
    if (!m->finished || !m->complete) {
        return "the event stream ended early";
    }
    if (!st.rundown_complete) {
        return "the rundown did not complete";
    }
    if (st.modules == 0) {
        return "the rundown named no module";
    }
    if (st.lost > 0) {
        return "the runtime dropped events";
    }
    if (st.malformed > 0) {
        return "a module event could not be read";
    }
    return NULL;
}

void ev_modules_get_stats(const struct ev_modules *m, struct ev_modules_stats *out)
{
    const struct nettrace_stats *ns = nettrace_get_stats(&m->ck);
    *out = m->st;
    out->bytes = ns->bytes;
    out->events = ns->events;
    out->lost = ns->lost;
}

void ev_modules_free(struct ev_modules *m)
{
    if (m == NULL) {
        return;
    }
    nettrace_checker_fini(&m->ck);
    free(m);
}
