/* SPDX-License-Identifier: MIT */
/*
 * nettrace_check: runs events/nettrace's streaming checker over a file (or stdin) and prints one
 * JSON line, in the same shape as tracecheck (the TraceEvent-based reader) so the two can be
 * compared:
 *
 *   {"verdict":"COMPLETE","ok":true,"bytes":…,"events":…,"lost":…,"metadata":…,
 *    "blocks":{"event":…,"metadata":…,"stack":…,"sp":…},"missingStacks":…,"pid":…,
 *    "providers":{"name":count,…},"gcStart":…,"gcEnd":…,"sampleProfiler":…,"logMessages":…,
 *    "found":{"text":count,…},"metadataList":[…] (with --metadata), "error":"…","errorOffset":…
 * (INVALID only)}
 *
 * usage: nettrace_check [--chunk N] [--find TEXT]... [--metadata] [--strict-stacks] FILE|-
 * --chunk feeds the checker N bytes at a time (default 65536), to exercise its incremental path.
 * Exit status: 0 COMPLETE, 1 TRUNCATED, 2 INVALID, 3 usage or I/O error.
 *
 * Also a handy operations tool: pipe a relayed /trace download into it to see whether it is whole.
 */
#include "nettrace.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"

#define PROVIDERS_MAX 256

struct provider_count {
    char *name;
    uint64_t events;
};

#define FINDS_MAX 16

struct summary {
    const char *finds[FINDS_MAX];
    uint64_t found[FINDS_MAX];
    size_t nfinds;
    struct provider_count providers[PROVIDERS_MAX];
    size_t nproviders;
    struct buf md_list;
    bool want_list;
};

static void json_str(struct buf *out, const char *s)
{
    buf_append_str(out, "\"");
    buf_append_json_escaped(out, s);
    buf_append_str(out, "\"");
}

/* Sums events per provider name across metadata records (one per event id and version). */
static void on_metadata(void *ud, const struct nettrace_metadata *md)
{
    struct summary *s = ud;
    if (s->want_list) {
        buf_append_str(&s->md_list, buf_size(&s->md_list) > 0 ? "," : "");
        buf_printf(&s->md_list, "{\"id\":%u,\"provider\":", md->metadata_id);
        json_str(&s->md_list, md->provider);
        buf_printf(&s->md_list, ",\"eventId\":%u,\"name\":", md->event_id);
        json_str(&s->md_list, md->event_name);
        buf_printf(&s->md_list, ",\"version\":%u,\"opcode\":%u,\"events\":%llu}", md->version,
                   md->opcode, (unsigned long long)md->events);
    }
    for (size_t k = 0; k < s->nproviders; k++) {
        if (strcmp(s->providers[k].name, md->provider) == 0) {
            s->providers[k].events += md->events;
            return;
        }
    }
    if (s->nproviders < PROVIDERS_MAX) {
        char *copy = malloc(strlen(md->provider) + 1);
        if (copy != NULL) {
            memcpy(copy, md->provider, strlen(md->provider) + 1);
            s->providers[s->nproviders].name = copy;
            s->providers[s->nproviders].events = md->events;
            s->nproviders++;
        }
    }
}

/* --find: counts events whose payload holds the text as UTF-16LE, like tracecheck does. */
static void on_event(void *ud, const struct nettrace_event *ev)
{
    struct summary *s = ud;
    for (size_t k = 0; k < s->nfinds; k++) {
        if (nettrace_payload_has_utf16(ev->payload, ev->payload_len, s->finds[k])) {
            s->found[k]++;
        }
    }
}

static int usage(void)
{
    fprintf(stderr, "usage: nettrace_check [--chunk N] [--find TEXT]... [--metadata] "
                    "[--strict-stacks] FILE|-\n");
    return 3;
}

int main(int argc, char **argv)
{
    size_t chunk = 65536;
    const char *path = NULL;
    struct nettrace_options opt = {0};
    struct summary sum;
    memset(&sum, 0, sizeof(sum));
    buf_init(&sum.md_list, 0);

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--chunk") == 0 && i + 1 < argc) {
            char *end = NULL;
            unsigned long v = strtoul(argv[++i], &end, 10);
            if (end == argv[i] || *end != '\0' || v == 0 || v > (1ul << 30)) {
                return usage();
            }
            chunk = (size_t)v;
        } else if (strcmp(argv[i], "--find") == 0 && i + 1 < argc) {
            if (sum.nfinds == FINDS_MAX) {
                return usage();
            }
            sum.finds[sum.nfinds++] = argv[++i];
        } else if (strcmp(argv[i], "--metadata") == 0) {
            sum.want_list = true;
        } else if (strcmp(argv[i], "--strict-stacks") == 0) {
            opt.flags |= NETTRACE_STRICT_STACKS;
        } else if (path == NULL) {
            path = argv[i];
        } else {
            return usage();
        }
    }
    if (path == NULL) {
        return usage();
    }

    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "nettrace_check: %s: %s\n", path, strerror(errno));
        return 3;
    }
    uint8_t *data = malloc(chunk);
    struct nettrace_checker ck = {0};
    int status = 3;
    if (data == NULL || nettrace_checker_init(&ck, &opt) != 0) {
        fprintf(stderr, "nettrace_check: out of memory\n");
        goto out;
    }
    if (sum.nfinds > 0) {
        nettrace_set_event_cb(&ck, on_event, &sum);
    }
    for (;;) {
        size_t n = fread(data, 1, chunk, f);
        if (n > 0 && nettrace_feed(&ck, data, n) < 0) {
            break; /* the verdict says why */
        }
        if (n < chunk) {
            if (ferror(f)) {
                fprintf(stderr, "nettrace_check: %s: read error\n", path);
                goto out;
            }
            break;
        }
    }
    enum nettrace_verdict v = nettrace_finish(&ck);
    const struct nettrace_stats *st = nettrace_get_stats(&ck);
    struct nettrace_trace_info ti;
    memset(&ti, 0, sizeof(ti));
    (void)nettrace_trace_info(&ck, &ti);
    nettrace_foreach_metadata(&ck, on_metadata, &sum);

    struct buf out;
    buf_init(&out, 0);
    buf_printf(&out,
               "{\"verdict\":\"%s\",\"ok\":%s,\"bytes\":%llu,\"events\":%llu,\"lost\":%llu,"
               "\"metadata\":%llu,",
               nettrace_verdict_name(v), v == NETTRACE_COMPLETE ? "true" : "false",
               (unsigned long long)st->bytes, (unsigned long long)st->events,
               (unsigned long long)st->lost, (unsigned long long)st->metadata);
    buf_printf(&out, "\"blocks\":{\"event\":%llu,\"metadata\":%llu,\"stack\":%llu,\"sp\":%llu},",
               (unsigned long long)st->blocks[NETTRACE_BLOCK_EVENT],
               (unsigned long long)st->blocks[NETTRACE_BLOCK_METADATA],
               (unsigned long long)st->blocks[NETTRACE_BLOCK_STACK],
               (unsigned long long)st->blocks[NETTRACE_BLOCK_SP]);
    buf_printf(&out, "\"missingStacks\":%llu,\"pid\":%d,\"providers\":{",
               (unsigned long long)st->missing_stacks, ti.process_id);
    for (size_t k = 0; k < sum.nproviders; k++) {
        buf_append_str(&out, k > 0 ? "," : "");
        json_str(&out, sum.providers[k].name);
        buf_printf(&out, ":%llu", (unsigned long long)sum.providers[k].events);
    }
    const char *rt = "Microsoft-Windows-DotNETRuntime";
    const char *mel = "Microsoft-Extensions-Logging";
    buf_printf(&out,
               "},\"gcStart\":%llu,\"gcEnd\":%llu,\"sampleProfiler\":%llu,\"logMessages\":%llu",
               (unsigned long long)nettrace_count(&ck, rt, 1),
               (unsigned long long)nettrace_count(&ck, rt, 2),
               (unsigned long long)nettrace_count(&ck, "Microsoft-DotNETCore-SampleProfiler", 0),
               (unsigned long long)(nettrace_count_named(&ck, mel, "FormattedMessage") +
                                    nettrace_count_named(&ck, mel, "Message") +
                                    nettrace_count_named(&ck, mel, "MessageJson")));
    buf_append_str(&out, ",\"found\":{");
    for (size_t k = 0; k < sum.nfinds; k++) {
        buf_append_str(&out, k > 0 ? "," : "");
        json_str(&out, sum.finds[k]);
        buf_printf(&out, ":%llu", (unsigned long long)sum.found[k]);
    }
    buf_append_str(&out, "}");
    if (sum.want_list) {
        buf_printf(&out, ",\"metadataList\":[%s]", buf_cstr(&sum.md_list));
    }
    uint64_t off = 0;
    const char *err = nettrace_error(&ck, &off);
    if (err != NULL) {
        buf_append_str(&out, ",\"error\":");
        json_str(&out, err);
        buf_printf(&out, ",\"errorOffset\":%llu", (unsigned long long)off);
    }
    buf_append_str(&out, "}\n");
    fwrite(buf_data(&out), 1, buf_size(&out), stdout);
    buf_fini(&out);
    status = v == NETTRACE_COMPLETE ? 0 : v == NETTRACE_TRUNCATED ? 1 : 2;

out:
    for (size_t k = 0; k < sum.nproviders; k++) {
        free(sum.providers[k].name);
    }
    buf_fini(&sum.md_list);
    nettrace_checker_fini(&ck);
    free(data);
    if (f != stdin) {
        fclose(f);
    }
    return status;
}
