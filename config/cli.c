/* SPDX-License-Identifier: MIT */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "err.h"
#include "num.h"

static const char usage_text[] =
    "dotmon - diagnostics agent for .NET processes (dotnet-monitor compatible)\n"
    "\n"
    "Usage:\n"
    "  dotmon collect [options]        Serve the REST API (the default command)\n"
    "  dotmon generatekey [options]    Make an API key (P-384 key pair + bearer token)\n"
    "  dotmon config show [options]    Print the merged configuration; exit status 1 when\n"
    "                                  collect would refuse it (Egress or CollectionRules\n"
    "                                  errors, on stderr), 0 otherwise (warnings included)\n"
    "  dotmon convert FILE|- --format ndjson|gcdump|speedscope [-o OUT|-]\n"
    "                                  Print a nettrace file as JSON lines, a heap snapshot's\n"
    "                                  trace as a .gcdump, or CPU samples as speedscope JSON\n"
    "                                  (see convert --help)\n"
    "  dotmon --help | --version\n"
    "\n"
    "collect / config show options:\n"
    "  -u, --urls URL                  Artifact URL to bind, repeatable or ';'-separated\n"
    "                                  (default http://localhost:52323)\n"
    "  --metricUrls URL                Metrics URL to bind, repeatable (default "
    "http://localhost:52325)\n"
    "  -m, --metrics true|false        Serve the metrics URLs (default true)\n"
    "  --no-auth                       Turn authentication off for every route\n"
    "  --temp-apikey                   Generate a one-time API key at start-up and print it\n"
    "  --token-file PATH               (collect, with --temp-apikey; a dotmon extra) Also write\n"
    "                                  the key's bearer token, bare, to PATH (mode 0600; missing\n"
    "                                  folders made 0700; every folder on the way must be owned\n"
    "                                  by root or by dotmon's user), and print where and an\n"
    "                                  `export DOTMON_TOKEN=...` line; the file is removed when\n"
    "                                  dotmon stops normally (SIGINT, SIGTERM)\n"
    "  --diagnostic-port PATH          Listen mode: bind PATH for runtimes to connect to\n"
    "                                  (apps get DOTNET_DiagnosticPorts=PATH[,nosuspend])\n"
    "  --configuration-file-path FILE  Read settings from this JSON file\n"
    "  --level redacted|full           (config show) show secrets or not (default redacted)\n"
    "  --show-sources                  (config show) say where each setting comes from\n"
    "\n"
    "generatekey options:\n"
    "  -o, --output FORMAT             json, text, shell, cmd, powershell, machinejson (default "
    "json)\n"
    "  --expiration DURATION           Token lifetime: TimeSpan ([d.]hh:mm[:ss]) or 30m, 12h, 7d\n"
    "                                  (default 7 days)\n"
    "\n"
    "Settings use dotnet-monitor's names and sources, weakest first: the command line,\n"
    "DOTNET_URLS then ASPNETCORE_URLS (Urls), unprefixed environment variables\n"
    "(Metrics__Enabled), $XDG_CONFIG_HOME/dotnet-monitor/settings.json,\n"
    "/etc/dotnet-monitor/settings.json, key-per-file /etc/dotnet-monitor/<Section__Key>,\n"
    "DotnetMonitor_ (or DOTNETMONITOR_) variables, e.g.\n"
    "DotnetMonitor_Authentication__MonitorApiKey__Subject, then --configuration-file-path.\n";

const char *cli_usage(void)
{
    return usage_text;
}

static const char convert_usage_text[] =
    "Usage: dotmon convert FILE|- --format ndjson|gcdump|speedscope [-o OUT|-]\n"
    "\n"
    "Reads a nettrace file (V4/V5 or V6; - for stdin) incrementally and writes one JSON object\n"
    "per event and line (NDJSON) to stdout or OUT:\n"
    "  {\"timestamp\":\"…Z\",\"pid\":N,\"thread\":N,\"provider\":\"…\",\"event\":\"…\",\"id\":N,\n"
    "   \"version\":N,\"opcode\":N,\"keywords\":\"0x…\",\"level\":N,\"activityId\":…,\n"
    "   \"relatedActivityId\":…,[\"stack\":[\"0x…\",…],]\"payload\":{…} or \"payloadHex\":\"…\"}\n"
    "\n"
    "\n"
    "With --format gcdump the nettrace must be a heap snapshot's (provider\n"
    "Microsoft-Windows-DotNETRuntime:0x1980001:5): its induced gen-2 GC's heap walk is written as "
    "a\n"
    "`.gcdump` file, as dotnet-gcdump writes it (read it with dotnet-gcdump report or PerfView).\n"
    "\n"
    "With --format speedscope the nettrace should be a CPU profile's (profile=cpu-sampling, with\n"
    "rundown): Microsoft-DotNETCore-SampleProfiler samples with their stacks named from the\n"
    "method load and rundown events, as speedscope JSON (https://www.speedscope.app): one\n"
    "sampled profile per thread, weights in milliseconds (the trace's sampling period).\n"
    "\n"
    "Options:\n"
    "  --format ndjson|gcdump|speedscope  The output format (required)\n"
    "  -o, --output OUT|-              Write to OUT instead of stdout\n"
    "\n"
    "Exit status: 0 for a complete trace; 1 for a truncated or invalid one (a message on stderr);\n"
    "2 for a usage error. With -o OUT the file is a whole document or nothing: it is written "
    "under\n"
    "a temporary name beside OUT (mode 0600) and renamed to OUT only when the conversion "
    "succeeds;\n"
    "on failure OUT is left as it was. To stdout, ndjson streams: the lines for the events before\n"
    "the problem are written (gcdump and speedscope write nothing unless the trace is whole).\n";

const char *cli_convert_usage(void)
{
    return convert_usage_text;
}

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return AGENT_E_INVAL;
}

/* Parses a non-negative decimal integer that must consume the whole string. */
static int parse_u64(const char *s, size_t n, uint64_t *out)
{
    return num_parse_u64(s, n, 10, 999999999999999999ull, out); /* 18 digits, as before */
}

int cli_parse_duration(const char *s, int64_t *secs)
{
    size_t n = strlen(s);
    if (n == 0 || n > 32) {
        return AGENT_E_INVAL;
    }
    uint64_t v = 0;
    int64_t total;
    if (strchr(s, ':') != NULL) {
        /* TimeSpan: [d.]hh:mm[:ss] */
        uint64_t days = 0, parts[3] = {0, 0, 0};
        const char *p = s;
        const char *dot = strchr(s, '.');
        const char *colon = strchr(s, ':');
        if (dot != NULL && dot < colon) {
            if (parse_u64(p, (size_t)(dot - p), &days) != 0) {
                return AGENT_E_INVAL;
            }
            p = dot + 1;
        }
        size_t np = 0;
        bool more = true;
        while (more) {
            const char *end = strchr(p, ':');
            size_t len = end ? (size_t)(end - p) : strlen(p);
            if (np == 3 || parse_u64(p, len, &parts[np]) != 0) {
                return AGENT_E_INVAL;
            }
            np++;
            more = end != NULL;
            p = more ? end + 1 : p;
        }
        if (np < 2 || parts[0] > 23 || parts[1] > 59 || parts[2] > 59 || days > 36500) {
            return AGENT_E_INVAL;
        }
        total = (int64_t)(days * 86400 + parts[0] * 3600 + parts[1] * 60 + parts[2]);
    } else {
        uint64_t mult = 1;
        size_t digits = n;
        switch (s[n - 1]) {
        case 's':
            mult = 1;
            digits--;
            break;
        case 'm':
            mult = 60;
            digits--;
            break;
        case 'h':
            mult = 3600;
            digits--;
            break;
        case 'd':
            mult = 86400;
            digits--;
            break;
        default:
            break;
        }
        if (parse_u64(s, digits, &v) != 0 || v > (uint64_t)36500 * 86400 / mult) {
            return AGENT_E_INVAL;
        }
        total = (int64_t)(v * mult);
    }
    if (total <= 0) {
        return AGENT_E_INVAL;
    }
    *secs = total;
    return 0;
}

static int parse_bool(const char *s, int *out)
{
    if (strcasecmp(s, "true") == 0 || strcmp(s, "1") == 0) {
        *out = 1;
        return 0;
    }
    if (strcasecmp(s, "false") == 0 || strcmp(s, "0") == 0) {
        *out = 0;
        return 0;
    }
    return AGENT_E_INVAL;
}

static int parse_key_format(const char *s, enum cli_key_format *out)
{
    static const struct {
        const char *name;
        enum cli_key_format fmt;
    } names[] = {{"json", CLI_KEY_JSON},
                 {"text", CLI_KEY_TEXT},
                 {"shell", CLI_KEY_SHELL},
                 {"cmd", CLI_KEY_CMD},
                 {"powershell", CLI_KEY_POWERSHELL},
                 {"machinejson", CLI_KEY_MACHINEJSON}};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcasecmp(s, names[i].name) == 0) {
            *out = names[i].fmt;
            return 0;
        }
    }
    return AGENT_E_INVAL;
}

/* Splits "--name=value" into name and value; plain "--name" gives value NULL. */
static const char *split_inline_value(const char *arg, char *name, size_t cap)
{
    const char *eq = strchr(arg, '=');
    size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
    if (len >= cap) {
        len = cap - 1;
    }
    memcpy(name, arg, len);
    name[len] = '\0';
    return eq ? eq + 1 : NULL;
}

static int add_url(const char **list, size_t *n, const char *url, char *err, size_t errlen)
{
    if (*url == '\0') {
        return fail(err, errlen, "empty URL");
    }
    if (*n >= CLI_MAX_URLS) {
        return fail(err, errlen, "too many URLs (at most 16)");
    }
    list[(*n)++] = url;
    return 0;
}

/* True when name is an option of command (the value, if any, is checked later). */
static bool option_known(enum cli_command command, const char *name)
{
    static const char *const collect[] = {"--urls",
                                          "-u",
                                          "--metricUrls",
                                          "--metrics",
                                          "-m",
                                          "--no-auth",
                                          "--temp-apikey",
                                          "--token-file",
                                          "--diagnostic-port",
                                          "--configuration-file-path"};
    static const char *const keygen[] = {"--output", "-o", "--expiration"};
    if (command == CLI_CONVERT) {
        return strcmp(name, "--format") == 0 || strcmp(name, "--output") == 0 ||
               strcmp(name, "-o") == 0;
    }
    if (command == CLI_COLLECT || command == CLI_CONFIG_SHOW) {
        for (size_t i = 0; i < sizeof(collect) / sizeof(collect[0]); i++) {
            if (strcmp(name, collect[i]) == 0) {
                return true;
            }
        }
        return command == CLI_CONFIG_SHOW &&
               (strcmp(name, "--level") == 0 || strcmp(name, "--show-sources") == 0);
    }
    if (command == CLI_GENERATEKEY) {
        for (size_t i = 0; i < sizeof(keygen) / sizeof(keygen[0]); i++) {
            if (strcmp(name, keygen[i]) == 0) {
                return true;
            }
        }
    }
    return false;
}

/* The options of collect and config show: 0, AGENT_E_INVAL, or 1 when name is not one of them. */
static int apply_collect_option(struct cli_options *opts, const char *name, const char *val,
                                char *err, size_t errlen)
{
    if (strcmp(name, "--urls") == 0 || strcmp(name, "-u") == 0) {
        int rc = add_url(opts->urls, &opts->nurls, val, err, errlen);
        if (rc != 0) {
            return rc;
        }
    } else if (strcmp(name, "--metricUrls") == 0) {
        int rc = add_url(opts->metric_urls, &opts->nmetric_urls, val, err, errlen);
        if (rc != 0) {
            return rc;
        }
    } else if (strcmp(name, "--metrics") == 0 || strcmp(name, "-m") == 0) {
        if (parse_bool(val, &opts->metrics) != 0) {
            return fail(err, errlen, "--metrics takes true or false, not '%s'", val);
        }
    } else if (strcmp(name, "--no-auth") == 0) {
        opts->no_auth = true;
    } else if (strcmp(name, "--temp-apikey") == 0) {
        opts->temp_apikey = true;
    } else if (opts->command == CLI_COLLECT && strcmp(name, "--token-file") == 0) {
        if (*val == '\0') {
            return fail(err, errlen, "--token-file needs a path");
        }
        opts->token_file = val;
    } else if (strcmp(name, "--diagnostic-port") == 0) {
        if (*val == '\0') {
            return fail(err, errlen, "--diagnostic-port needs a path");
        }
        opts->diagnostic_port = val;
    } else if (strcmp(name, "--configuration-file-path") == 0) {
        if (*val == '\0') {
            return fail(err, errlen, "--configuration-file-path needs a path");
        }
        opts->config_file = val;
    } else {
        return 1;
    }
    return 0;
}

/* Applies one known option (its value, if it takes one, in val) to opts. */
static int apply_option(struct cli_options *opts, const char *name, const char *val, char *err,
                        size_t errlen)
{
    bool is_collect = opts->command == CLI_COLLECT || opts->command == CLI_CONFIG_SHOW;
    int rc = is_collect ? apply_collect_option(opts, name, val, err, errlen) : 1;
    if (rc != 1) {
        return rc;
    }
    if (opts->command == CLI_CONFIG_SHOW && strcmp(name, "--show-sources") == 0) {
        opts->show_sources = true;
    } else if (opts->command == CLI_CONFIG_SHOW && strcmp(name, "--level") == 0) {
        if (strcasecmp(val, "full") == 0) {
            opts->config_full = true;
        } else if (strcasecmp(val, "redacted") == 0) {
            opts->config_full = false;
        } else {
            return fail(err, errlen, "--level takes redacted or full, not '%s'", val);
        }
    } else if (opts->command == CLI_CONVERT && strcmp(name, "--format") == 0) {
        opts->convert_gcdump = false;
        opts->convert_speedscope = false;
        if (strcasecmp(val, "gcdump") == 0) {
            opts->convert_gcdump = true;
        } else if (strcasecmp(val, "speedscope") == 0) {
            opts->convert_speedscope = true;
        } else if (strcasecmp(val, "ndjson") != 0) {
            return fail(err, errlen,
                        "unknown --format '%s' (expected ndjson, gcdump or speedscope)", val);
        }
        opts->convert_format_set = true;
    } else if (opts->command == CLI_CONVERT &&
               (strcmp(name, "--output") == 0 || strcmp(name, "-o") == 0)) {
        if (*val == '\0') {
            return fail(err, errlen, "--output needs a path or -");
        }
        opts->convert_output = val;
    } else if (opts->command == CLI_GENERATEKEY &&
               (strcmp(name, "--output") == 0 || strcmp(name, "-o") == 0)) {
        if (parse_key_format(val, &opts->key_format) != 0) {
            return fail(err, errlen,
                        "unknown --output '%s' (json, text, shell, cmd, powershell, machinejson)",
                        val);
        }
    } else if (opts->command == CLI_GENERATEKEY && strcmp(name, "--expiration") == 0) {
        if (cli_parse_duration(val, &opts->expiration_s) != 0) {
            return fail(
                err, errlen,
                "invalid --expiration '%s' (use [d.]hh:mm[:ss] or a number with s, m, h or d)",
                val);
        }
    } else {
        return fail(err, errlen, "unknown option '%s' (see dotmon --help)", name);
    }
    return 0;
}

/* The options after the command, from argv[i] on. */
static int parse_options(int argc, const char *const *argv, int i, struct cli_options *opts,
                         char *err, size_t errlen)
{
    bool is_collect = opts->command == CLI_COLLECT || opts->command == CLI_CONFIG_SHOW;
    for (; i < argc; i++) {
        char name[64];
        const char *inline_val = split_inline_value(argv[i], name, sizeof(name));
        const char *val = NULL;
        bool takes_value = true;

        if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
            opts->command = opts->command == CLI_CONVERT ? CLI_CONVERT_HELP : CLI_HELP;
            return 0;
        }
        if (opts->command == CLI_CONVERT && (argv[i][0] != '-' || strcmp(argv[i], "-") == 0)) {
            if (opts->convert_input != NULL) {
                return fail(err, errlen, "convert takes one input, not also '%s'", argv[i]);
            }
            opts->convert_input = argv[i];
            continue;
        }
        if (!option_known(opts->command, name)) {
            /* Before taking a value: the error must name the option, not what follows it. */
            return fail(err, errlen, "unknown option '%s' (see dotmon --help)", argv[i]);
        }
        if (is_collect && (strcmp(name, "--no-auth") == 0 || strcmp(name, "--temp-apikey") == 0 ||
                           strcmp(name, "--show-sources") == 0)) {
            takes_value = false;
        }
        if (takes_value) {
            if (inline_val != NULL) {
                val = inline_val;
            } else if (i + 1 < argc) {
                val = argv[++i];
            } else {
                return fail(err, errlen, "option '%s' needs a value", name);
            }
        } else if (inline_val != NULL) {
            return fail(err, errlen, "option '%s' takes no value", name);
        }

        int rc = apply_option(opts, name, val, err, errlen);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

int cli_parse(int argc, const char *const *argv, struct cli_options *opts, char *err, size_t errlen)
{
    memset(opts, 0, sizeof(*opts));
    opts->metrics = -1;
    opts->expiration_s = 7 * 86400;
    err[0] = '\0';

    int i = 1;
    if (argc <= 1) {
        opts->command = CLI_COLLECT;
        return 0;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "-?") == 0 ||
        strcmp(cmd, "help") == 0) {
        opts->command = CLI_HELP;
        return argc == 2 ? 0 : fail(err, errlen, "unexpected argument after --help");
    }
    if (strcmp(cmd, "--version") == 0) {
        opts->command = CLI_VERSION;
        return argc == 2 ? 0 : fail(err, errlen, "unexpected argument after --version");
    }
    if (strcmp(cmd, "collect") == 0) {
        opts->command = CLI_COLLECT;
        i = 2;
    } else if (strcmp(cmd, "generatekey") == 0) {
        opts->command = CLI_GENERATEKEY;
        i = 2;
    } else if (strcmp(cmd, "convert") == 0) {
        opts->command = CLI_CONVERT;
        i = 2;
    } else if (strcmp(cmd, "config") == 0) {
        if (argc < 3 || strcmp(argv[2], "show") != 0) {
            return fail(err, errlen, "unknown config command (expected: config show)");
        }
        opts->command = CLI_CONFIG_SHOW;
        i = 3;
    } else if (cmd[0] == '-') {
        opts->command = CLI_COLLECT; /* options without a command: collect, like dotnet-monitor */
        i = 1;
    } else {
        return fail(err, errlen,
                    "unknown command '%s' (expected collect, generatekey, config show or convert)",
                    cmd);
    }

    int rc = parse_options(argc, argv, i, opts, err, errlen);
    if (rc != 0 || opts->command == CLI_HELP || opts->command == CLI_CONVERT_HELP) {
        return rc;
    }
    if (opts->command == CLI_CONVERT &&
        (opts->convert_input == NULL || !opts->convert_format_set)) {
        return fail(
            err, errlen,
            "convert needs FILE|- and --format ndjson|gcdump|speedscope (see convert --help)");
    }
    if (opts->no_auth && opts->temp_apikey) {
        return fail(err, errlen, "--no-auth and --temp-apikey cannot be used together");
    }
    if (opts->token_file != NULL && !opts->temp_apikey) {
        return fail(err, errlen, "--token-file needs --temp-apikey (it holds that key's token)");
    }
    return 0;
}
