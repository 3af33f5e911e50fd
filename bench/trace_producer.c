/* SPDX-License-Identifier: MIT */
/*
 * trace_producer: a fake .NET runtime for the /trace relay benchmark. It listens on
 * <dir>/dotnet-diagnostic-<own pid>-1-socket, answers ProcessInfo/2/3 (so discovery lists it) and
 * ResumeRuntime, and answers CollectTracing1..5 with OK + a session id followed by a VALID nettrace
 * stream (docs/nettrace.md) written as fast as the socket accepts: the preamble, one MetadataBlock,
 * then EventBlocks of about --block bytes of header-compressed events, an SPBlock every 10 MiB
 * (as the runtime does), and, once --bytes have been written or StopTracing names the session on
 * another connection, a final SPBlock and the end tag; then it closes the stream and (for
 * StopTracing) replies OK + the session id, in the runtime's order (ipc.md §5.3).
 *
 * Single-threaded, non-blocking sockets and poll(); several connections and sessions at once.
 * Every block is generated fresh with continuing sequence numbers and timestamps, and its padding
 * is computed from the absolute stream offset (nettrace.md §3.1), so the output checks COMPLETE
 * with events/nettrace and reads cleanly in TraceEvent.
 *
 * usage: trace_producer [--dir DIR] [--bytes N[K|M|G]] [--block N[K]] [--payload N]
 *                       [--sessions K] [--stdout]
 *   --dir       socket directory (default: $TMPDIR, else /tmp)
 *   --bytes     stream length per session before the end (default 2G; the stream ends at the next
 *               block boundary after N bytes)
 *   --block     EventBlock content size (default 64K, max 1M)
 *   --payload   event payload bytes (default 100, 12..1000)
 *   --sessions  exit after K sessions have ended (default 0: run until SIGINT/SIGTERM)
 *   --stdout    no socket: write one stream of --bytes to stdout and exit (to check the format)
 * On start it prints "ready pid=<pid> socket=<path>" on stdout.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ipc_cmd.h"
#include "ipc_codec.h"
#include "ipc_sockname.h"

#define MAX_CONNS      64
#define SP_INTERVAL    (10u * 1024u * 1024u) /* the runtime's sequence-point spacing (ipc.md §5.2) */
#define OUT_TARGET     (256u * 1024u)        /* generate about this much per refill */
#define PROVIDER       "Dotmon-Bench"
#define EVENT_ID       1
#define METADATA_ID    1
#define BENCH_THREAD   4242
#define TEXT_UNITS_MIN 2 /* the payload's UTF-16 text keeps at least "x" + NUL */

struct options {
    const char *dir;
    uint64_t bytes;
    size_t block;
    size_t payload;
    unsigned sessions;
    bool to_stdout;
};

/* One nettrace stream being generated (nettrace.md). Offsets are absolute, for the padding. */
struct stream {
    uint64_t off;     /* stream bytes generated so far */
    uint64_t target;  /* end after this many bytes */
    uint64_t next_sp; /* offset after which the next SPBlock goes */
    uint32_t seq;     /* last sequence number of the one capture thread */
    uint64_t ts;      /* last timestamp */
    uint64_t counter; /* the payload's running counter */
    bool ended;       /* end tag generated */
};

enum conn_state {
    C_CMD,       /* reading one IPC message */
    C_STREAM,    /* writing the reply and the stream */
    C_STOP_WAIT, /* sent StopTracing for a live session: reply when that stream has closed */
    C_REPLY      /* writing a reply, then closing */
};

struct conn {
    int fd;
    enum conn_state st;
    uint8_t *in; /* IPC_MESSAGE_MAX bytes */
    size_t in_len;
    uint8_t *out;
    size_t out_len;
    size_t out_off;
    size_t out_cap;
    uint64_t session_id; /* C_STREAM: its session; C_STOP_WAIT: the one it waits for */
    bool stop_requested;
    /*
     * Stream offset of out[0], modulo 2^64: "negative" while out still starts with the IPC reply
     * that precedes the stream. Only its value modulo 4 matters (padding), and 2^64 keeps that.
     */
    uint64_t out_base;
    struct stream s;
};

static const struct options *opt;
static struct conn conns[MAX_CONNS];
static volatile sig_atomic_t quit;
static char sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
static uint64_t next_session = 0x00005e5510000000ull;
static unsigned sessions_done;
static uint8_t *payload_template;

/* ---- output buffer --------------------------------------------------------------------------- */

static void out_reserve(struct conn *c, size_t n)
{
    if (c->out_len + n <= c->out_cap) {
        return;
    }
    size_t cap = c->out_cap ? c->out_cap : 64 * 1024;
    while (cap < c->out_len + n) {
        cap *= 2;
    }
    uint8_t *p = realloc(c->out, cap);
    if (p == NULL) {
        fprintf(stderr, "trace_producer: out of memory\n");
        exit(1);
    }
    c->out = p;
    c->out_cap = cap;
}

static void out_raw(struct conn *c, const void *p, size_t n)
{
    out_reserve(c, n);
    memcpy(c->out + c->out_len, p, n);
    c->out_len += n;
}

static void out_le(struct conn *c, uint64_t v, size_t bytes)
{
    out_reserve(c, bytes);
    for (size_t i = 0; i < bytes; i++) {
        c->out[c->out_len++] = (uint8_t)(v >> (8 * i));
    }
}

static void out_var(struct conn *c, uint64_t v)
{
    out_reserve(c, 10);
    do {
        uint8_t b = (uint8_t)(v & 0x7F);
        v >>= 7;
        c->out[c->out_len++] = v != 0 ? (uint8_t)(b | 0x80) : b;
    } while (v != 0);
}

static void out_utf16z(struct conn *c, const char *ascii)
{
    for (const char *p = ascii; *p != '\0'; p++) {
        out_le(c, (uint8_t)*p, 2);
    }
    out_le(c, 0, 2);
}

/* ---- nettrace generation (nettrace.md) ------------------------------------------------------- */

static uint64_t stream_pos(const struct conn *c)
{
    return c->out_base + c->out_len;
}

static void object_begin(struct conn *c, const char *name, uint32_t version)
{
    out_le(c, 0x05, 1);
    out_le(c, 0x05, 1);
    out_le(c, 0x01, 1);
    out_le(c, version, 4);
    out_le(c, version, 4);
    out_le(c, strlen(name), 4);
    out_raw(c, name, strlen(name));
    out_le(c, 0x06, 1);
}

/*
 * Block object header up to its content: blockSize (patched by block_finish) and the zero padding
 * to the next ABSOLUTE multiple of 4 (nettrace.md §3.1).
 */
static size_t block_begin(struct conn *c, const char *name)
{
    object_begin(c, name, 2);
    size_t size_at = c->out_len;
    out_le(c, 0, 4);
    for (uint64_t pad = (4 - stream_pos(c) % 4) % 4; pad > 0; pad--) {
        out_le(c, 0, 1);
    }
    return size_at;
}

/* blockSize = bytes after the padding; the caller passes where the content started. */
static void block_finish(struct conn *c, size_t size_at, size_t content_at)
{
    uint32_t size = (uint32_t)(c->out_len - content_at);
    for (int i = 0; i < 4; i++) {
        c->out[size_at + (size_t)i] = (uint8_t)(size >> (8 * i));
    }
    out_le(c, 0x06, 1);
}

static void event_header(struct conn *c, uint64_t min_ts, uint64_t max_ts)
{
    out_le(c, 20, 2); /* headerSize */
    out_le(c, 1, 2);  /* flags: header compression */
    out_le(c, min_ts, 8);
    out_le(c, max_ts, 8);
}

static void gen_preamble(struct conn *c, struct stream *s)
{
    out_raw(c, "Nettrace", 8);
    out_le(c, 20, 4);
    out_raw(c, "!FastSerialization.1", 20);
    object_begin(c, "Trace", 4);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct tm tm;
    gmtime_r(&now.tv_sec, &tm);
    uint16_t utc[8] = {(uint16_t)(tm.tm_year + 1900), (uint16_t)(tm.tm_mon + 1),
                       (uint16_t)tm.tm_wday,          (uint16_t)tm.tm_mday,
                       (uint16_t)tm.tm_hour,          (uint16_t)tm.tm_min,
                       (uint16_t)tm.tm_sec,           (uint16_t)(now.tv_nsec / 1000000)};
    for (int i = 0; i < 8; i++) {
        out_le(c, utc[i], 2);
    }
    out_le(c, s->ts, 8);         /* SyncTimeQPC */
    out_le(c, 1000000000ull, 8); /* QPC frequency: ns, as on Linux */
    out_le(c, 8, 4);             /* pointer size */
    out_le(c, (uint64_t)getpid(), 4);
    out_le(c, 2, 4);
    out_le(c, 1000000, 4);
    out_le(c, 0x06, 1);

    /* A metadata record (nettrace.md §5): Dotmon-Bench/1 "Tick", UInt64 Counter, String Text. */
    size_t size_at = block_begin(c, "MetadataBlock");
    size_t content = c->out_len;
    event_header(c, s->ts, s->ts);
    size_t rec_start;
    uint8_t flags = 0x80 | 0x40 | 0x04;
    out_le(c, flags, 1);
    out_var(c, BENCH_THREAD);
    out_var(c, s->ts);
    size_t len_at = c->out_len;
    out_le(c, 0, 2); /* payload size as a 2-byte varint, patched below */
    rec_start = c->out_len;
    out_le(c, METADATA_ID, 4);
    out_utf16z(c, PROVIDER);
    out_le(c, EVENT_ID, 4);
    out_utf16z(c, "Tick");
    out_le(c, 0, 8); /* keywords */
    out_le(c, 0, 4); /* version */
    out_le(c, 4, 4); /* level */
    out_le(c, 2, 4);
    out_le(c, 12, 4); /* UInt64 */
    out_utf16z(c, "Counter");
    out_le(c, 18, 4); /* String */
    out_utf16z(c, "Text");
    size_t rec_len = c->out_len - rec_start;
    c->out[len_at] = (uint8_t)(0x80 | (rec_len & 0x7F)); /* non-minimal but valid: 2 bytes */
    c->out[len_at + 1] = (uint8_t)(rec_len >> 7);
    block_finish(c, size_at, content);
    s->off = stream_pos(c);
}

/* An SPBlock for the one capture thread; it also ends the (empty) stack region (nettrace.md §6). */
static void gen_sp(struct conn *c, struct stream *s)
{
    size_t size_at = block_begin(c, "SPBlock");
    size_t content = c->out_len;
    out_le(c, s->ts, 8);
    out_le(c, 1, 4);
    out_le(c, BENCH_THREAD, 8);
    out_le(c, s->seq, 4);
    block_finish(c, size_at, content);
    s->off = stream_pos(c);
}

/*
 * One EventBlock of about opt->block content bytes. The first event spells out metadata id,
 * sequence, capture thread and thread; the others only carry the sorted flag and a timestamp
 * delta, inheriting the rest (the sequence advances by one per event, nettrace.md §4).
 */
static void gen_event_block(struct conn *c, struct stream *s)
{
    size_t size_at = block_begin(c, "EventBlock");
    size_t content = c->out_len;
    size_t per_event = 3 + opt->payload;
    size_t n = opt->block > 20 + 32 ? (opt->block - 20 - 32) / per_event + 1 : 1;
    event_header(c, s->ts + 1, s->ts + n * 100);
    out_reserve(c, 32 + n * (per_event + 2)); /* one growth per block at most */
    for (size_t i = 0; i < n; i++) {
        uint64_t delta = 100; /* 100 ns between events */
        if (i == 0) {
            out_le(c, 0x01 | 0x02 | 0x04 | 0x40 | 0x80, 1);
            out_var(c, METADATA_ID);
            out_var(c, s->seq); /* blocks start from sequence 0: 0 + delta + 1 = s->seq + 1 */
            out_var(c, BENCH_THREAD);
            out_var(c, 0);
            out_var(c, BENCH_THREAD);
            out_var(c, s->ts + delta); /* from the block's zero state */
            out_var(c, opt->payload);
        } else {
            out_le(c, 0x40, 1);
            out_var(c, delta);
        }
        s->ts += delta;
        s->seq++;
        s->counter++;
        out_reserve(c, opt->payload);
        memcpy(c->out + c->out_len, payload_template, opt->payload);
        for (int k = 0; k < 8; k++) {
            c->out[c->out_len + (size_t)k] = (uint8_t)(s->counter >> (8 * k));
        }
        c->out_len += opt->payload;
    }
    block_finish(c, size_at, content);
    s->off = stream_pos(c);
}

/* Refills an empty output buffer with whole blocks; ends the stream when due. */
static void refill(struct conn *c, bool stop)
{
    struct stream *s = &c->s;
    c->out_len = 0;
    c->out_off = 0;
    c->out_base = s->off;
    if (s->ended) {
        return;
    }
    if (stop || s->off >= s->target) {
        gen_sp(c, s);
        out_le(c, 0x01, 1); /* end of stream (nettrace.md §2.2) */
        s->off = stream_pos(c);
        s->ended = true;
        return;
    }
    while (c->out_len < OUT_TARGET && s->off < s->target) {
        gen_event_block(c, s);
        if (s->off >= s->next_sp) {
            gen_sp(c, s);
            s->next_sp += SP_INTERVAL;
        }
    }
}

/* Starts a stream after whatever reply is already in the output buffer. */
static void stream_start(struct conn *c)
{
    memset(&c->s, 0, sizeof(c->s));
    c->s.target = opt->bytes;
    c->s.next_sp = SP_INTERVAL;
    c->s.ts = 1000000;
    c->out_base = (uint64_t)0 - (uint64_t)c->out_len;
    gen_preamble(c, &c->s);
}

/* ---- IPC replies (ipc.md §3.3, §4.3) --------------------------------------------------------- */

static void reply_session(struct conn *c, uint64_t sid)
{
    uint8_t msg[28];
    struct ipc_wr w;
    ipc_wr_init(&w, msg, sizeof(msg));
    size_t start;
    ipc_wr_message_begin(&w, IPC_SET_SERVER, IPC_SERVER_OK, &start);
    ipc_wr_u64(&w, sid);
    ipc_wr_message_end(&w, start);
    out_raw(c, msg, w.len);
}

static void reply_hresult(struct conn *c, bool ok, uint32_t hr)
{
    uint8_t msg[24];
    struct ipc_wr w;
    ipc_wr_init(&w, msg, sizeof(msg));
    size_t start;
    ipc_wr_message_begin(&w, IPC_SET_SERVER, ok ? IPC_SERVER_OK : IPC_SERVER_ERROR, &start);
    ipc_wr_u32(&w, hr);
    ipc_wr_message_end(&w, start);
    out_raw(c, msg, w.len);
}

static void reply_process_info(struct conn *c, int level)
{
    static const uint8_t cookie[IPC_GUID_SIZE] = {0xd0, 0x7e, 0x00, 0xbe, 0x4c, 0x11, 0x4e, 0x2a,
                                                  0x9b, 0x01, 0x62, 0x65, 0x6e, 0x63, 0x68, 0x31};
    char cmdline[600];
    char exe[512];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    exe[n > 0 ? n : 0] = '\0';
    snprintf(cmdline, sizeof(cmdline), "%s --bench", n > 0 ? exe : "trace_producer");
#if defined(__aarch64__)
    const char *arch = "arm64";
    const char *rid = "linux-arm64";
#else
    const char *arch = "x64";
    const char *rid = "linux-x64";
#endif
    uint8_t msg[2048];
    struct ipc_wr w;
    ipc_wr_init(&w, msg, sizeof(msg));
    size_t start;
    int rc = ipc_wr_message_begin(&w, IPC_SET_SERVER, IPC_SERVER_OK, &start);
    if (level == 3) {
        rc = rc ? rc : ipc_wr_u32(&w, 1);
    }
    rc = rc ? rc : ipc_wr_u64(&w, (uint64_t)getpid());
    rc = rc ? rc : ipc_wr_guid(&w, cookie);
    rc = rc ? rc : ipc_wr_string(&w, cmdline);
    rc = rc ? rc : ipc_wr_string(&w, "Linux");
    rc = rc ? rc : ipc_wr_string(&w, arch);
    if (level >= 2) {
        rc = rc ? rc : ipc_wr_string(&w, "TraceProducer");
        rc = rc ? rc : ipc_wr_string(&w, "10.0.0-bench");
    }
    if (level == 3) {
        rc = rc ? rc : ipc_wr_string(&w, rid);
    }
    rc = rc ? rc : ipc_wr_message_end(&w, start);
    if (rc != 0) {
        reply_hresult(c, false, IPC_HR_UNKNOWN_ERROR);
        return;
    }
    out_raw(c, msg, w.len);
}

/* ---- connections ----------------------------------------------------------------------------- */

static void conn_close(struct conn *c)
{
    close(c->fd);
    free(c->in);
    free(c->out);
    memset(c, 0, sizeof(*c));
    c->fd = -1;
}

static struct conn *find_session(uint64_t sid)
{
    for (int i = 0; i < MAX_CONNS; i++) {
        if (conns[i].fd >= 0 && conns[i].st == C_STREAM && conns[i].session_id == sid) {
            return &conns[i];
        }
    }
    return NULL;
}

/* A stream has been written out and closed: answer whoever sent StopTracing for it. */
static void session_ended(uint64_t sid)
{
    sessions_done++;
    for (int i = 0; i < MAX_CONNS; i++) {
        struct conn *w = &conns[i];
        if (w->fd >= 0 && w->st == C_STOP_WAIT && w->session_id == sid) {
            reply_session(w, sid);
            w->st = C_REPLY;
        }
    }
}

/* Dispatches one complete IPC message received on c. */
static void on_message(struct conn *c, const struct ipc_frame *f)
{
    uint8_t set = f->hdr.command_set;
    uint8_t id = f->hdr.command_id;
    if (set == IPC_SET_PROCESS &&
        (id == IPC_PROCESS_INFO || id == IPC_PROCESS_INFO2 || id == IPC_PROCESS_INFO3)) {
        reply_process_info(c, id == IPC_PROCESS_INFO ? 1 : id == IPC_PROCESS_INFO2 ? 2 : 3);
        c->st = C_REPLY;
        return;
    }
    if (set == IPC_SET_PROCESS && id == IPC_PROCESS_RESUME_RUNTIME) {
        reply_hresult(c, true, 0);
        c->st = C_REPLY;
        return;
    }
    if (set == IPC_SET_EVENTPIPE && id >= IPC_EP_COLLECT_TRACING &&
        id <= IPC_EP_COLLECT_TRACING + 4) {
        c->session_id = next_session++;
        reply_session(c, c->session_id);
        stream_start(c);
        c->st = C_STREAM;
        return;
    }
    if (set == IPC_SET_EVENTPIPE && id == IPC_EP_STOP_TRACING && f->payload_len == 8) {
        uint64_t sid = 0;
        for (int k = 0; k < 8; k++) {
            sid |= (uint64_t)f->payload[k] << (8 * k);
        }
        struct conn *target = find_session(sid);
        if (target == NULL) {
            reply_session(c, sid); /* unknown or ended: a no-op that still says OK (ipc.md §4.2) */
            c->st = C_REPLY;
            return;
        }
        target->stop_requested = true;
        c->session_id = sid;
        c->st = C_STOP_WAIT;
        return;
    }
    reply_hresult(c, false, IPC_HR_UNKNOWN_COMMAND);
    c->st = C_REPLY;
}

static void on_readable(struct conn *c)
{
    if (c->st != C_CMD) {
        /* The client never writes after its command; data or EOF here means it went away. */
        uint8_t sink[256];
        ssize_t n = recv(c->fd, sink, sizeof(sink), 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
            bool streaming = c->st == C_STREAM;
            uint64_t sid = c->session_id;
            conn_close(c);
            if (streaming) {
                session_ended(sid);
            }
        }
        return;
    }
    ssize_t n = recv(c->fd, c->in + c->in_len, IPC_MESSAGE_MAX - c->in_len, 0);
    if (n <= 0) {
        if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
            conn_close(c);
        }
        return;
    }
    c->in_len += (size_t)n;
    struct ipc_frame f;
    size_t used;
    int rc = ipc_decode(c->in, c->in_len, IPC_MESSAGE_MAX, &f, &used);
    if (rc < 0) {
        reply_hresult(c, false, IPC_HR_UNKNOWN_MAGIC);
        c->st = C_REPLY;
    } else if (rc == IPC_FRAME) {
        on_message(c, &f);
    }
}

static void on_writable(struct conn *c)
{
    for (;;) {
        if (c->out_off == c->out_len) {
            if (c->st == C_REPLY) {
                conn_close(c);
                return;
            }
            if (c->st != C_STREAM) {
                return;
            }
            if (c->s.ended) {
                uint64_t sid = c->session_id;
                conn_close(c);
                session_ended(sid);
                return;
            }
            refill(c, c->stop_requested);
        }
        ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR) {
                return;
            }
            bool streaming = c->st == C_STREAM;
            uint64_t sid = c->session_id;
            conn_close(c);
            if (streaming) {
                session_ended(sid);
            }
            return;
        }
        c->out_off += (size_t)n;
    }
}

/* ---- setup and the loop ---------------------------------------------------------------------- */

static void on_signal(int sig)
{
    (void)sig;
    quit = 1;
}

static uint64_t parse_size(const char *s)
{
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s) {
        return 0;
    }
    switch (*end) {
    case 'k':
    case 'K':
        v <<= 10;
        end++;
        break;
    case 'm':
    case 'M':
        v <<= 20;
        end++;
        break;
    case 'g':
    case 'G':
        v <<= 30;
        end++;
        break;
    default:
        break;
    }
    return *end == '\0' ? (uint64_t)v : 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: trace_producer [--dir DIR] [--bytes N[K|M|G]] [--block N[K]] "
                    "[--payload N] [--sessions K] [--stdout]\n");
    return 2;
}

static void make_payload_template(void)
{
    payload_template = calloc(1, opt->payload);
    if (payload_template == NULL) {
        exit(1);
    }
    /* u64 Counter (patched per event), then UTF-16 text filling the rest, NUL-terminated. */
    static const char text[] = "dotmon relay benchmark event ";
    size_t units = (opt->payload - 8) / 2;
    for (size_t i = 0; i + 1 < units; i++) {
        payload_template[8 + 2 * i] = (uint8_t)text[i % (sizeof(text) - 1)];
    }
}

/* --stdout: one stream straight to standard output, for format checks without sockets. */
static int run_stdout(void)
{
    struct conn c;
    memset(&c, 0, sizeof(c));
    stream_start(&c);
    while (c.out_len > 0) {
        if (fwrite(c.out, 1, c.out_len, stdout) != c.out_len) {
            return 1;
        }
        if (c.s.ended) {
            break;
        }
        refill(&c, false);
    }
    free(c.out);
    return fflush(stdout) == 0 ? 0 : 1;
}

static int listen_socket(void)
{
    char name[IPC_SOCKNAME_MAX];
    if (ipc_sockname_format(name, sizeof(name), (uint64_t)getpid(), 1) != 0) {
        return -1;
    }
    int len = snprintf(sock_path, sizeof(sock_path), "%s/%s", opt->dir, name);
    if (len < 0 || (size_t)len >= sizeof(sock_path)) {
        fprintf(stderr, "trace_producer: socket path too long\n");
        return -1;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, sock_path, (size_t)len + 1);
    unlink(sock_path);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 64) != 0) {
        fprintf(stderr, "trace_producer: %s: %s\n", sock_path, strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    chmod(sock_path, 0600);
    return fd;
}

int main(int argc, char **argv)
{
    static struct options o = {NULL, 2ull << 30, 64 * 1024, 100, 0, false};
    opt = &o;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--stdout") == 0) {
            o.to_stdout = true;
            continue;
        }
        if (v == NULL) {
            return usage();
        }
        i++;
        if (strcmp(a, "--dir") == 0) {
            o.dir = v;
        } else if (strcmp(a, "--bytes") == 0 && parse_size(v) > 0) {
            o.bytes = parse_size(v);
        } else if (strcmp(a, "--block") == 0 && parse_size(v) >= 256 && parse_size(v) <= 1 << 20) {
            o.block = (size_t)parse_size(v);
        } else if (strcmp(a, "--payload") == 0 && parse_size(v) >= 8 + 2 * TEXT_UNITS_MIN &&
                   parse_size(v) <= 1000) {
            o.payload = (size_t)parse_size(v);
        } else if (strcmp(a, "--sessions") == 0) {
            o.sessions = (unsigned)parse_size(v);
        } else {
            return usage();
        }
    }
    if (o.dir == NULL) {
        o.dir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    }
    make_payload_template();
    if (o.to_stdout) {
        return run_stdout();
    }

    for (int i = 0; i < MAX_CONNS; i++) {
        conns[i].fd = -1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    int lfd = listen_socket();
    if (lfd < 0) {
        return 1;
    }
    printf("ready pid=%ld socket=%s\n", (long)getpid(), sock_path);
    fflush(stdout);

    struct pollfd pfd[MAX_CONNS + 1];
    struct conn *who[MAX_CONNS + 1];
    while (!quit && (o.sessions == 0 || sessions_done < o.sessions)) {
        nfds_t n = 0;
        pfd[n].fd = lfd;
        pfd[n].events = POLLIN;
        who[n++] = NULL;
        for (int i = 0; i < MAX_CONNS; i++) {
            struct conn *c = &conns[i];
            if (c->fd < 0) {
                continue;
            }
            pfd[n].fd = c->fd;
            pfd[n].events = POLLIN;
            if (c->st == C_STREAM || (c->st == C_REPLY && c->out_off < c->out_len)) {
                pfd[n].events |= POLLOUT;
            }
            who[n++] = c;
        }
        if (poll(pfd, n, 500) < 0) {
            if (errno == EINTR) {
                continue;
            }
            perror("poll");
            break;
        }
        for (nfds_t k = 1; k < n; k++) {
            struct conn *c = who[k];
            if (c->fd != pfd[k].fd) {
                continue; /* closed while handling an earlier entry */
            }
            if ((pfd[k].revents & POLLOUT) != 0) {
                on_writable(c);
            }
            if (c->fd == pfd[k].fd && (pfd[k].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
                on_readable(c);
            }
            if (c->fd == pfd[k].fd && c->st == C_REPLY) {
                on_writable(c);
            }
        }
        if ((pfd[0].revents & POLLIN) != 0) {
            for (;;) {
                int fd = accept(lfd, NULL, NULL);
                if (fd < 0) {
                    break;
                }
                /* accept4 is a GNU extension; the build is plain POSIX. */
                if (fcntl(fd, F_SETFL, O_NONBLOCK) != 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
                    close(fd);
                    continue;
                }
                struct conn *c = NULL;
                for (int i = 0; i < MAX_CONNS && c == NULL; i++) {
                    if (conns[i].fd < 0) {
                        c = &conns[i];
                    }
                }
                if (c == NULL) {
                    close(fd);
                    continue;
                }
                memset(c, 0, sizeof(*c));
                c->fd = fd;
                c->st = C_CMD;
                c->in = malloc(IPC_MESSAGE_MAX);
                if (c->in == NULL) {
                    conn_close(c);
                }
            }
        }
    }
    for (int i = 0; i < MAX_CONNS; i++) {
        if (conns[i].fd >= 0) {
            conn_close(&conns[i]);
        }
    }
    close(lfd);
    unlink(sock_path);
    free(payload_template);
    return 0;
}
