/* SPDX-License-Identifier: MIT */
#ifndef AGENT_CLI_H
#define AGENT_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Command line in dotnet-monitor's shape:
 *   dotmon collect [--urls URL]... [--metricUrls URL]... [--metrics true|false] [--no-auth]
 *                  [--temp-apikey [--token-file PATH]] [--diagnostic-port PATH]
 * [--configuration-file-path FILE] dotmon generatekey [--output
 * json|text|shell|cmd|powershell|machinejson] [--expiration DURATION] dotmon config show [--level
 * redacted|full] [same options as collect] dotmon --help |
 * --version Parsing is pure: no I/O besides the caller printing `error`.
 */

enum cli_command {
    CLI_NONE = 0,
    CLI_HELP,
    CLI_VERSION,
    CLI_COLLECT,
    CLI_GENERATEKEY,
    CLI_CONFIG_SHOW,
    CLI_CONVERT,     /* dotmon convert FILE|- --format ndjson|gcdump|speedscope [-o OUT|-] */
    CLI_CONVERT_HELP /* dotmon convert --help */
};

enum cli_key_format {
    CLI_KEY_JSON = 0,
    CLI_KEY_TEXT,
    CLI_KEY_SHELL,
    CLI_KEY_CMD,
    CLI_KEY_POWERSHELL,
    CLI_KEY_MACHINEJSON
};

#define CLI_MAX_URLS 16

struct cli_options {
    enum cli_command command;
    /* collect / config show */
    const char *urls[CLI_MAX_URLS]; /* views into argv */
    size_t nurls;
    const char *metric_urls[CLI_MAX_URLS];
    size_t nmetric_urls;
    int metrics; /* -1 unset, 0 false, 1 true */
    bool no_auth;
    bool temp_apikey;
    const char *token_file;      /* collect --token-file: where the temporary key's token goes */
    const char *diagnostic_port; /* NULL when not given */
    const char *config_file;     /* NULL when not given */
    bool config_full;            /* config show --level full */
    bool show_sources;           /* config show --show-sources */
    /* generatekey */
    enum cli_key_format key_format;
    int64_t expiration_s; /* default 7 days */
    /* convert */
    const char *convert_input;  /* a path or "-" (stdin) */
    const char *convert_output; /* a path or "-" (stdout, the default) */
    bool convert_format_set;    /* --format was given */
    bool convert_gcdump;        /* --format gcdump: a heap snapshot's stream to a .gcdump */
    bool convert_speedscope;    /* --format speedscope: CPU samples to speedscope JSON */
};

/* Exit code for command-line errors. */
#define CLI_EXIT_USAGE 2

/*
 * Parses argv. Returns 0 on success, or AGENT_E_INVAL with a one-line message in err.
 * Strings in opts point into argv.
 */
int cli_parse(int argc, const char *const *argv, struct cli_options *opts, char *err,
              size_t errlen);

/*
 * Parses a duration: .NET TimeSpan "[d.]hh:mm[:ss]" or a number with a unit suffix
 * (s, m, h, d). Returns 0 and sets *secs (> 0), or AGENT_E_INVAL.
 */
int cli_parse_duration(const char *s, int64_t *secs);

/* The --help text. */
const char *cli_usage(void);
/* The convert --help text. */
const char *cli_convert_usage(void);

#endif
