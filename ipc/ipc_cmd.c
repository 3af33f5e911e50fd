/* SPDX-License-Identifier: MIT */
#include "ipc_cmd.h"

#include <string.h>

#include "err.h"
#include "hex.h"

/* Limits the runtime enforces on CollectTracing (docs/ipc.md §4.2, deviations.md §1.11). */
#define MAX_PROVIDERS 1000
#define MAX_LEVEL     5

const char *ipc_hresult_name(uint32_t hr)
{
    switch (hr) {
    case IPC_HR_S_OK:
        return "DS_IPC_S_OK";
    case IPC_HR_BAD_ENCODING:
        return "DS_IPC_E_BAD_ENCODING";
    case IPC_HR_UNKNOWN_COMMAND:
        return "DS_IPC_E_UNKNOWN_COMMAND";
    case IPC_HR_UNKNOWN_MAGIC:
        return "DS_IPC_E_UNKNOWN_MAGIC";
    case IPC_HR_UNKNOWN_ERROR:
        return "UnknownError";
    case IPC_HR_NOTSUPPORTED:
        return "DS_IPC_E_NOTSUPPORTED";
    case IPC_HR_FAIL:
        return "DS_IPC_E_FAIL";
    case IPC_HR_NOT_YET_AVAILABLE:
        return "DS_IPC_E_NOT_YET_AVAILABLE";
    case IPC_HR_RUNTIME_UNINITIALIZED:
        return "DS_IPC_E_RUNTIME_UNINITIALIZED";
    case IPC_HR_INVALIDARG:
        return "DS_IPC_E_INVALIDARG";
    case IPC_HR_INSUFFICIENT_BUFFER:
        return "DS_IPC_E_INSUFFICIENT_BUFFER";
    case IPC_HR_ENVVAR_NOT_FOUND:
        return "DS_IPC_E_ENVVAR_NOT_FOUND";
    case IPC_HR_PROFILER_ALREADY_ACTIVE:
        return "CORPROF_E_PROFILER_ALREADY_ACTIVE";
    default:
        return "UNKNOWN";
    }
}

/*
 * .NET's Guid(byte[]) reads the first three groups as little-endian integers and the last eight
 * bytes as they are, so the string form is not the bytes in order (ipc.md §2.2).
 */
void ipc_guid_format(const uint8_t cookie[IPC_GUID_SIZE], char out[IPC_GUID_STR_SIZE])
{
    hex_guid_dotnet(cookie, out);
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

void ipc_cmdline_name(const char *cmdline, const char **name, size_t *len)
{
    const char *p = cmdline;
    while (*p != '\0' && is_space(*p)) {
        p++;
    }
    const char *start = p;
    while (*p != '\0' && !is_space(*p)) {
        if (*p == '/') {
            start = p + 1;
        }
        p++;
    }
    *name = start;
    *len = (size_t)(p - start);
}

/* ---- builders ---------------------------------------------------------------------------- */

int ipc_cmd_empty(struct ipc_wr *w, uint8_t command_set, uint8_t command_id)
{
    size_t start;
    int rc = ipc_wr_message_begin(w, command_set, command_id, &start);
    if (rc != 0) {
        return rc;
    }
    return ipc_wr_message_end(w, start);
}

int ipc_cmd_process_info(struct ipc_wr *w)
{
    return ipc_cmd_empty(w, IPC_SET_PROCESS, IPC_PROCESS_INFO);
}

int ipc_cmd_process_info2(struct ipc_wr *w)
{
    return ipc_cmd_empty(w, IPC_SET_PROCESS, IPC_PROCESS_INFO2);
}

int ipc_cmd_process_info3(struct ipc_wr *w)
{
    return ipc_cmd_empty(w, IPC_SET_PROCESS, IPC_PROCESS_INFO3);
}

int ipc_cmd_process_env(struct ipc_wr *w)
{
    return ipc_cmd_empty(w, IPC_SET_PROCESS, IPC_PROCESS_ENVIRONMENT);
}

int ipc_cmd_resume_runtime(struct ipc_wr *w)
{
    return ipc_cmd_empty(w, IPC_SET_PROCESS, IPC_PROCESS_RESUME_RUNTIME);
}

int ipc_cmd_set_env(struct ipc_wr *w, const char *name, const char *value)
{
    if (name == NULL || *name == '\0' || value == NULL) {
        return AGENT_E_INVAL;
    }
    size_t start;
    int rc = ipc_wr_message_begin(w, IPC_SET_PROCESS, IPC_PROCESS_SET_ENV, &start);
    if (rc != 0) {
        return rc;
    }
    rc = ipc_wr_string(w, name);
    rc = rc ? rc : ipc_wr_string(w, value);
    rc = rc ? rc : ipc_wr_message_end(w, start);
    if (rc != 0) {
        w->len = start; /* nothing half-written stays */
    }
    return rc;
}

int ipc_cmd_stop_tracing(struct ipc_wr *w, uint64_t session_id)
{
    size_t start;
    int rc = ipc_wr_message_begin(w, IPC_SET_EVENTPIPE, IPC_EP_STOP_TRACING, &start);
    if (rc != 0) {
        return rc;
    }
    rc = ipc_wr_u64(w, session_id);
    rc = rc ? rc : ipc_wr_message_end(w, start);
    if (rc != 0) {
        w->len = start;
    }
    return rc;
}

int ipc_cmd_generate_dump(struct ipc_wr *w, int version, const char *path, uint32_t type,
                          uint32_t flags)
{
    if (version < 1 || version > 3 || path == NULL || *path == '\0' || type < IPC_DUMP_NORMAL ||
        type > IPC_DUMP_FULL) {
        return AGENT_E_INVAL;
    }
    size_t start;
    int rc =
        ipc_wr_message_begin(w, IPC_SET_DUMP, (uint8_t)(IPC_DUMP_GENERATE + version - 1), &start);
    if (rc != 0) {
        return rc;
    }
    rc = ipc_wr_string(w, path);
    rc = rc ? rc : ipc_wr_u32(w, type);
    rc = rc ? rc : ipc_wr_u32(w, version == 1 ? (flags & 1u) : flags);
    rc = rc ? rc : ipc_wr_message_end(w, start);
    if (rc != 0) {
        w->len = start;
    }
    return rc;
}

static bool provider_has_filter(const struct ipc_provider *p)
{
    return p->filter_enable || p->event_id_count > 0;
}

int ipc_runtime_major(const char *clr_version)
{
    int v = 0;
    for (const char *c = clr_version; c != NULL && *c >= '0' && *c <= '9' && v < 1000; c++) {
        v = v * 10 + (*c - '0');
    }
    return v;
}

bool ipc_stackwalk_optional(const char *clr_version)
{
    return ipc_runtime_major(clr_version) >= IPC_NO_STACKWALK_MAJOR;
}

int ipc_collect_min_version(const struct ipc_collect_config *cfg)
{
    for (size_t i = 0; i < cfg->provider_count; i++) {
        if (provider_has_filter(&cfg->providers[i])) {
            return 5;
        }
    }
    if (cfg->rundown_keyword != 0 && cfg->rundown_keyword != IPC_RUNDOWN_DEFAULT) {
        return 4;
    }
    if (cfg->disable_stackwalk) {
        return 3;
    }
    return 2;
}

/* Checks what the runtime would reject with BAD_ENCODING, and what `version` cannot carry. */
static int collect_validate(int version, const struct ipc_collect_config *cfg)
{
    if (version < 1 || version > 5) {
        return AGENT_E_INVAL;
    }
    if (cfg->buffer_mb == 0 || cfg->format > 1) {
        return AGENT_E_INVAL;
    }
    if (cfg->provider_count == 0 || cfg->provider_count > MAX_PROVIDERS || cfg->providers == NULL) {
        return AGENT_E_INVAL;
    }
    for (size_t i = 0; i < cfg->provider_count; i++) {
        const struct ipc_provider *p = &cfg->providers[i];
        if (p->name == NULL || p->name[0] == '\0' || p->level > MAX_LEVEL) {
            return AGENT_E_INVAL;
        }
        if (p->event_id_count > 0 && p->event_ids == NULL) {
            return AGENT_E_INVAL;
        }
    }
    /* Version 1 cannot switch rundown off: it always uses the default keyword. */
    if (version == 1 && (cfg->rundown_keyword != IPC_RUNDOWN_DEFAULT || cfg->disable_stackwalk)) {
        return AGENT_E_INVAL;
    }
    if (version >= 2 && ipc_collect_min_version(cfg) > version) {
        return AGENT_E_INVAL;
    }
    return 0;
}

static int write_provider(struct ipc_wr *w, int version, const struct ipc_provider *p)
{
    int rc = ipc_wr_u64(w, p->keywords);
    rc = rc ? rc : ipc_wr_u32(w, p->level);
    rc = rc ? rc : ipc_wr_string(w, p->name);
    rc = rc ? rc : ipc_wr_string(w, p->arguments);
    if (rc == 0 && version >= 5) {
        rc = ipc_wr_u8(w, p->filter_enable ? 1 : 0);
        rc = rc ? rc : ipc_wr_u32(w, p->event_id_count);
        for (uint32_t i = 0; rc == 0 && i < p->event_id_count; i++) {
            rc = ipc_wr_u32(w, p->event_ids[i]);
        }
    }
    return rc;
}

/*
 * Field order per version (ipc.md §4.2):
 *   1: bufMB, format, providers
 *   2: bufMB, format, u8 requestRundown, providers
 *   3: bufMB, format, u8 requestRundown, u8 requestStackwalk, providers
 *   4: bufMB, format, u64 rundownKeyword, u8 requestStackwalk, providers
 *   5: u32 sessionType (0), then as 4, with an event filter after each provider
 */
int ipc_cmd_collect_tracing(struct ipc_wr *w, int version, const struct ipc_collect_config *cfg)
{
    int rc = collect_validate(version, cfg);
    if (rc != 0) {
        return rc;
    }
    size_t start;
    rc = ipc_wr_message_begin(w, IPC_SET_EVENTPIPE, (uint8_t)(IPC_EP_COLLECT_TRACING + version - 1),
                              &start);
    if (rc != 0) {
        return rc;
    }
    if (version == 5) {
        rc = ipc_wr_u32(w, 0); /* session_type: streaming */
    }
    rc = rc ? rc : ipc_wr_u32(w, cfg->buffer_mb);
    rc = rc ? rc : ipc_wr_u32(w, cfg->format);
    if (version == 2 || version == 3) {
        rc = rc ? rc : ipc_wr_u8(w, cfg->rundown_keyword != 0 ? 1 : 0);
    }
    if (version >= 4) {
        rc = rc ? rc : ipc_wr_u64(w, cfg->rundown_keyword);
    }
    if (version >= 3) {
        rc = rc ? rc : ipc_wr_u8(w, cfg->disable_stackwalk ? 0 : 1);
    }
    rc = rc ? rc : ipc_wr_u32(w, (uint32_t)cfg->provider_count);
    for (size_t i = 0; rc == 0 && i < cfg->provider_count; i++) {
        rc = write_provider(w, version, &cfg->providers[i]);
    }
    rc = rc ? rc : ipc_wr_message_end(w, start);
    if (rc != 0) {
        w->len = start; /* leave nothing half-written */
    }
    return rc;
}

int ipc_collect_encoded_size(int version, const struct ipc_collect_config *cfg, size_t *size)
{
    struct ipc_wr w;
    ipc_wr_init(&w, NULL, SIZE_MAX); /* measuring */
    int rc = ipc_cmd_collect_tracing(&w, version, cfg);
    if (rc != 0) {
        return rc == AGENT_E_NOSPACE ? AGENT_E_TOOBIG : rc;
    }
    *size = w.len;
    return 0;
}

bool ipc_string_encodable(const char *utf8)
{
    size_t units;
    return ipc_utf8_utf16_units(utf8, &units) == 0;
}

/* ---- replies ----------------------------------------------------------------------------- */

int ipc_reply_parse(const struct ipc_frame *f, enum ipc_reply_expect expect, struct ipc_reply *out)
{
    if (f->hdr.command_set != IPC_SET_SERVER) {
        return AGENT_E_PROTO;
    }
    struct ipc_reply r;
    memset(&r, 0, sizeof(r));
    struct ipc_rd rd;
    ipc_rd_init(&rd, f->payload, f->payload_len);

    if (f->hdr.command_id == IPC_SERVER_ERROR) {
        if (ipc_rd_u32(&rd, &r.hresult) != 0) {
            return AGENT_E_PROTO;
        }
        /* GenerateCoreDump3 appends its message; anything else after the HRESULT is malformed. */
        if (ipc_rd_left(&rd) > 0 &&
            (ipc_rd_string(&rd, &r.message) != 0 || ipc_rd_left(&rd) != 0)) {
            return AGENT_E_PROTO;
        }
        r.ok = false;
        *out = r;
        return 0;
    }
    if (f->hdr.command_id != IPC_SERVER_OK) {
        return AGENT_E_PROTO;
    }
    r.ok = true;
    switch (expect) {
    case IPC_EXPECT_HRESULT:
        if (f->payload_len != 4) {
            return AGENT_E_PROTO;
        }
        (void)ipc_rd_u32(&rd, &r.hresult);
        break;
    case IPC_EXPECT_SESSION:
        if (f->payload_len != 8) {
            return AGENT_E_PROTO;
        }
        (void)ipc_rd_u64(&rd, &r.session_id);
        break;
    case IPC_EXPECT_PAYLOAD:
        r.payload = f->payload;
        r.payload_len = f->payload_len;
        break;
    default:
        return AGENT_E_INVAL;
    }
    *out = r;
    return 0;
}

/*
 * The cookie follows the pid directly, whatever the design doc's struct listing says (deviations.md
 * §1.3); ProcessInfo3 prefixes everything with a version and appends the RID for version >= 1.
 */
int ipc_process_info_parse(const uint8_t *p, size_t n, int level, struct ipc_process_info *out)
{
    if (level < 1 || level > 3) {
        return AGENT_E_INVAL;
    }
    struct ipc_process_info pi;
    memset(&pi, 0, sizeof(pi));
    struct ipc_rd rd;
    ipc_rd_init(&rd, p, n);
    int rc = 0;
    if (level == 3) {
        rc = ipc_rd_u32(&rd, &pi.version);
    }
    rc = rc ? rc : ipc_rd_u64(&rd, &pi.pid);
    rc = rc ? rc : ipc_rd_guid(&rd, pi.cookie);
    rc = rc ? rc : ipc_rd_string(&rd, &pi.command_line);
    rc = rc ? rc : ipc_rd_string(&rd, &pi.os);
    rc = rc ? rc : ipc_rd_string(&rd, &pi.arch);
    if (level >= 2) {
        rc = rc ? rc : ipc_rd_string(&rd, &pi.entrypoint_assembly);
        rc = rc ? rc : ipc_rd_string(&rd, &pi.clr_version);
    }
    if (level == 3 && pi.version >= 1) {
        rc = rc ? rc : ipc_rd_string(&rd, &pi.runtime_identifier);
    }
    if (rc != 0) {
        return rc;
    }
    /* Only ProcessInfo3 is versioned, so only it may grow fields we do not know yet. */
    if (level < 3 && ipc_rd_left(&rd) != 0) {
        return AGENT_E_PROTO;
    }
    *out = pi;
    return 0;
}

int ipc_env_reply_parse(const uint8_t *p, size_t n, uint32_t *incoming)
{
    if (n != 6) {
        return n < 6 ? AGENT_E_TRUNC : AGENT_E_PROTO;
    }
    struct ipc_rd rd;
    ipc_rd_init(&rd, p, n);
    uint32_t v = 0;
    (void)ipc_rd_u32(&rd, &v); /* the uint16 "future" field is ignored by design */
    *incoming = v;
    return 0;
}

/* First pass: structure only, so that the callback never runs on a corrupt list. */
static int env_validate(const uint8_t *p, size_t n, uint32_t *count)
{
    struct ipc_rd rd;
    ipc_rd_init(&rd, p, n);
    uint32_t c;
    int rc = ipc_rd_u32(&rd, &c);
    if (rc != 0) {
        return rc;
    }
    /* Every entry takes at least its 4-byte count: reject absurd counts before looping. */
    if (c > ipc_rd_left(&rd) / 4) {
        return AGENT_E_TOOBIG;
    }
    for (uint32_t i = 0; i < c; i++) {
        struct ipc_utf16 s;
        rc = ipc_rd_string(&rd, &s);
        if (rc != 0) {
            return rc;
        }
    }
    if (ipc_rd_left(&rd) != 0) {
        return AGENT_E_PROTO;
    }
    *count = c;
    return 0;
}

int ipc_env_parse(const uint8_t *p, size_t n, char *scratch, size_t scratch_cap,
                  ipc_env_entry_cb cb, void *ud)
{
    uint32_t count;
    int rc = env_validate(p, n, &count);
    if (rc != 0) {
        return rc;
    }
    struct ipc_rd rd;
    ipc_rd_init(&rd, p, n);
    uint32_t skip;
    (void)ipc_rd_u32(&rd, &skip);
    for (uint32_t i = 0; i < count; i++) {
        struct ipc_utf16 s;
        (void)ipc_rd_string(&rd, &s); /* validated above */
        if (!s.present) {
            continue; /* a null string is not an entry */
        }
        size_t len;
        rc = ipc_utf16_to_utf8(&s, scratch, scratch_cap, &len);
        if (rc != 0) {
            return rc;
        }
        /* Split at the first '=' by overwriting it: name and value become two C strings. */
        char *eq = memchr(scratch, '=', len);
        size_t name_len = eq != NULL ? (size_t)(eq - scratch) : len;
        const char *value = "";
        size_t value_len = 0;
        if (eq != NULL) {
            *eq = '\0';
            value = eq + 1;
            value_len = len - name_len - 1;
        }
        rc = cb(ud, scratch, name_len, value, value_len);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

int ipc_advertise_parse(const uint8_t *p, size_t n, uint8_t cookie[IPC_GUID_SIZE], uint64_t *pid)
{
    static const uint8_t magic[8] = {'A', 'D', 'V', 'R', '_', 'V', '1', '\0'};
    if (n < IPC_ADVERTISE_SIZE) {
        return AGENT_E_TRUNC;
    }
    if (memcmp(p, magic, sizeof(magic)) != 0) {
        return AGENT_E_PROTO;
    }
    struct ipc_rd rd;
    ipc_rd_init(&rd, p + sizeof(magic), IPC_ADVERTISE_SIZE - sizeof(magic));
    uint8_t c[IPC_GUID_SIZE];
    uint64_t v = 0;
    (void)ipc_rd_guid(&rd, c);
    (void)ipc_rd_u64(&rd, &v);
    memcpy(cookie, c, IPC_GUID_SIZE);
    *pid = v;
    return 0;
}
