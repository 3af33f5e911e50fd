/* SPDX-License-Identifier: MIT */
#ifndef AGENT_RULES_INTERNAL_H
#define AGENT_RULES_INTERNAL_H

/* What the files of rules/ share (docs/style.md §1): the arena, the configuration reader and its
 * field tables, the glob matcher. Not for other modules. */

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rules.h"

/* ---- arena: every allocation of a configuration, freed at once (rules_arena.c) ---- */

struct rules_arena;
struct rules_arena *rules__arena_new(void);
void rules__arena_free(struct rules_arena *a);
/* Zeroed, aligned memory; NULL on ENOMEM (then rules__arena_failed is true). */
void *rules__arena_alloc(struct rules_arena *a, size_t n);
char *rules__arena_strndup(struct rules_arena *a, const char *s, size_t n);
char *rules__arena_strdup(struct rules_arena *a, const char *s);
char *rules__arena_printf(struct rules_arena *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
bool rules__arena_failed(const struct rules_arena *a);

/* A FIFO kept in a malloc'ed array v[head .. head + len) of elements of `size` bytes: makes room
 * for one more at the end (moving the live part to the front, or doubling cap from 8). False on
 * ENOMEM, v unchanged. */
bool rules__queue_room(void **v, size_t size, size_t *head, size_t len, size_t *cap);

/* ---- reading the configuration (rules_kv.c) ---- */

struct rules_defaults {
    const char *egress; /* CollectionRuleDefaults:Actions:Egress */
    bool has_window, has_request_count, has_response_count;
    int64_t window_ticks; /* CollectionRuleDefaults:Triggers:* */
    int32_t request_count, response_count;
    bool has_action_count, has_action_window, has_rule_duration;
    int32_t action_count; /* CollectionRuleDefaults:Limits:* */
    int64_t action_window_ticks, rule_duration_ticks;
};

/* The state of one rules_config_load. */
struct rules_ctx {
    const struct rules_kv *kv;
    size_t n;
    struct rules_arena *arena;
    const char **errors; /* arena strings in a malloc'ed array */
    size_t nerrors, caperrors;
    const char **warnings; /* the same, for problems that do not make a rule invalid */
    size_t nwarnings, capwarnings;
    bool oom;
    const char *const *egress;
    size_t negress;
    struct rules_defaults def;
};

/* Adds the line "<key>: <message>". */
void rules__error(struct rules_ctx *c, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same as a warning: the rule stays valid (the problem shows when its action runs). */
void rules__warning(struct rules_ctx *c, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* "<prefix>:<name>" in the arena ("" on ENOMEM, with c->oom set). */
const char *rules__key(struct rules_ctx *c, const char *prefix, const char *name);
/* The value of key (case-insensitive, the last entry wins), or NULL. */
const char *rules__get(const struct rules_ctx *c, const char *key);
/* True when some key lies below key ("key:…"). */
bool rules__has_children(const struct rules_ctx *c, const char *key);
/* True when key has a value or children. */
bool rules__present(const struct rules_ctx *c, const char *key);
/*
 * The distinct names of the sections directly below key, sorted as .NET's ConfigurationKeyComparer
 * does (numbers first, numerically; then case-insensitively). An arena array; *count 0 when none.
 */
const char **rules__children(struct rules_ctx *c, const char *key, size_t *count);
/* The children of key (as rules__children) and a zeroed arena array of as many elements of
 * `size` bytes: NULL with *n 0 when there are none (or on ENOMEM, then c->oom is set). */
void *rules__child_array(struct rules_ctx *c, const char *key, size_t size, const char ***names,
                         size_t *n);
/* A string list: the values of the children of key, or key's own value as a one-element list. */
const char **rules__string_list(struct rules_ctx *c, const char *key, size_t *count);
/*
 * Where a section's settings are: key itself when it has children; the template
 * "Templates:<kind>:<value>" when key holds a template name; NULL when key is absent (*missing
 * true) or names an unknown template (an error is reported, *missing false).
 */
const char *rules__section(struct rules_ctx *c, const char *key, const char *kind, bool *missing);

/* ---- values (rules_value.c) ---- */

int rules__parse_double(const char *s, double *out);
int rules__parse_int32(const char *s, int32_t *out);
int rules__parse_bool(const char *s, bool *out);
int rules__parse_u64_keywords(const char *s, uint64_t *out);
/* Index of s in names[0..n) (case-insensitive, blanks around ignored), or -1. */
int rules__enum_index(const char *s, const char *const *names, size_t n);
/* .NET's double.ToString() for the range messages ("100", "1.7976931348623157E+308"). */
void rules__format_double(double v, char *out, size_t cap);

/* ---- table-driven settings (rules_fields.c) ---- */

enum rules_field_kind {
    RULES_F_STR = 0, /* char * */
    RULES_F_DOUBLE,  /* double */
    RULES_F_INT,     /* int32_t */
    RULES_F_BOOL,    /* bool */
    RULES_F_SPAN,    /* int64_t ticks */
    RULES_F_ENUM,    /* int */
    RULES_F_LIST     /* const char **, with its count at list_count_off */
};

struct rules_range {
    int64_t min, max;     /* RULES_F_INT, RULES_F_SPAN (ticks) */
    double dmin, dmax;    /* RULES_F_DOUBLE */
    const char *text_min; /* as dotnet-monitor's Range attribute prints them */
    const char *text_max;
};

struct rules_enum {
    const char *type_name; /* for the conversion message */
    const char *const *names;
    size_t n;
};

#define RULES_NO_OFF ((size_t)-1)
/* A table and its row count, as rules__read_fields takes them. */
#define RULES_ROWS(f) (f), sizeof(f) / sizeof((f)[0])

struct rules_field {
    const char *name;
    enum rules_field_kind kind;
    bool required;  /* "The <name> field is required." when absent (strings: also when empty) */
    size_t off;     /* of the value in the target struct */
    size_t has_off; /* of a bool set when the setting is given, or RULES_NO_OFF */
    const struct rules_range *range;
    const struct rules_enum *en;
    size_t list_count_off; /* RULES_F_LIST */
};

/* Reports the binder's conversion failure: "Failed to convert configuration value '<v>' to type
 * '<type>'.". */
void rules__bad_value(struct rules_ctx *c, const char *key, const char *v, const char *type);
/* Ensures a zeroed arena array of n elements of `size` bytes (n > 0); NULL with c->oom set. */
void *rules__array(struct rules_ctx *c, size_t n, size_t size);

/* The value of section:name, or NULL after reporting "The <name> field is required.". */
const char *rules__required(struct rules_ctx *c, const char *section, const char *name);

/* The head of a trigger or action type's row: its name in configuration, enum value, settings. */
struct rules_type_row {
    const char *name;
    int type;
    const struct rules_field *fields;
    size_t nfields;
};

/* The row of rows[0..n) (each `stride` bytes, starting with a struct rules_type_row) whose name
 * is name (case-insensitive), or NULL. */
const void *rules__find_row(const void *rows, size_t n, size_t stride, const char *name);

/* Reads fields[0..n) of section into obj; one error line per bad or missing setting. Returns the
 * number of errors added. */
size_t rules__read_fields(struct rules_ctx *c, const char *section, const struct rules_field *f,
                          size_t n, void *obj);

extern const struct rules_range rules__range_window;   /* 00:00:01 .. 1.00:00:00 */
extern const struct rules_range rules__range_duration; /* the same, for action durations */

/* ---- rules_trigger_cfg.c / rules_action_cfg.c ---- */

/* Parses the trigger whose settings are in section (Type and Settings below it). */
void rules__parse_trigger(struct rules_ctx *c, const char *section, struct rules_trigger *t);
/* Parses action `index` of a rule (section holds Name, Type, Settings, WaitForCompletion). */
void rules__parse_action(struct rules_ctx *c, const char *section, struct rules_action *a);
/* The output an action type produces (EgressPath, ExitCode, Value), or NULL. */
const char *rules__action_output(enum rules_action_type t);
/* The start of an action output reference, matched case-insensitively as dotnet-monitor does. */
#define RULES_ACTIONS_PREFIX "$(Actions."
/* True when s starts with RULES_ACTIONS_PREFIX (ASCII case-insensitive). */
bool rules__at_actions_prefix(const char *s);
/* Checks $(Actions.<name>.<output>) references of the rule's actions and fills their deps. */
void rules__resolve_references(struct rules_ctx *c, struct rules_action *a, size_t n);

/* ---- rules_engine.c ---- */

/* True once the engine lost a data point to an allocation failure. */
bool rules__engine_failed(const struct rules_engine *e);
/* GCPause: the last GC pause measured, in ticks (0 before any). */
int64_t rules__engine_last_pause(const struct rules_engine *e);

/* ---- rules_inst.c / rules_describe.c ---- */

/* One action of the running list. */
struct rules_act_run {
    uint8_t status; /* RULES__ACT_* */
    bool cancel_sent;
    char *egress, *path, *env_name, *env_value, *profiler_path; /* resolved */
    char **argv; /* Execute's, resolved (rules_execute_argv) */
    size_t argc;
    struct rules__output {
        char *key, *value;
    } * outputs; /* copies, owned */
    size_t noutputs;
};

enum { RULES__ACT_PENDING = 0, RULES__ACT_RUNNING, RULES__ACT_DONE, RULES__ACT_FAILED };

struct rules_inst {
    const struct rules_rule *rule;
    struct rules_process proc; /* strings point into proc_strings */
    char *proc_strings;
    enum rules_state state;
    const char *reason;
    char failure[256]; /* Finished_Failure's text */
    int64_t start_ms;
    /* action list executions: the sliding window queue and the lifetime count */
    int64_t *times;
    size_t head, len, cap;
    uint64_t lifetime;
    struct rules_engine *engine;
    /* the running action list */
    bool running, aborting, started, expired;
    size_t cursor;
    struct rules_act_run *acts;
};

/* The Running and Throttled state reasons, as dotnet-monitor words them. */
extern const char rules__reason_running[];
extern const char rules__reason_throttled[];

/* The executions still inside the window at now_ms (all of them without a window) and the oldest
 * of those (INT64_MAX when none). */
size_t rules__window_count(const struct rules_inst *i, int64_t now_ms, int64_t *oldest);

/* ---- rules_glob.c ---- */

/* An ASP.NET path glob list (docs/rules.md §4): "**" + "/" matches zero or more whole segments,
 * "*" any run of non-'/' characters, the rest literally; anchored, ASCII case-insensitive. */
bool rules__glob_match(const char *pattern, const char *path);
/* Exclude wins; no includes = every path. */
bool rules__paths_match(const struct rules_trigger *t, const char *path);

#endif
