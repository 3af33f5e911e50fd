/* SPDX-License-Identifier: MIT */
#ifndef DOTMON_MCP_RPC_H
#define DOTMON_MCP_RPC_H
/*
 * The Model Context Protocol's wire pieces (docs/mcp.md, "Transport"): JSON-RPC 2.0 messages as
 * MCP's Streamable HTTP transport carries them (one message per POST body: batches are refused,
 * as revisions 2025-06-18 and later have it), the result and error objects dotmon answers with,
 * Server-Sent Events framing, protocol-version negotiation and the few header values the
 * transport reads (Accept, Content-Type, Origin, MCP-Protocol-Version, Mcp-Session-Id).
 *
 * Pure codec: no libuv, no I/O, no globals. Parsing allocates only the cJSON tree of the message
 * (owned by struct mcp_msg); builders return new cJSON values (NULL when out of memory: the
 * caller answers 500) and take ownership of the values handed to them, whatever they return.
 * Every text given to a builder must be UTF-8; a message that is not is refused by the parser,
 * so what a client sent can be echoed back safely.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cJSON.h>

#include "buf.h"

/* The protocol revisions dotmon speaks, newest first: the current one, the previous one, and the
 * one the transport assumes when a request carries no MCP-Protocol-Version header. */
#define MCP_PROTOCOL_LATEST   "2025-11-25"
#define MCP_PROTOCOL_PREVIOUS "2025-06-18"
#define MCP_PROTOCOL_OLDEST   "2025-03-26"

/* JSON-RPC 2.0's error codes, and the two the MCP SDKs use for transport refusals. */
#define MCP_RPC_PARSE_ERROR       (-32700)
#define MCP_RPC_INVALID_REQUEST   (-32600)
#define MCP_RPC_METHOD_NOT_FOUND  (-32601)
#define MCP_RPC_INVALID_PARAMS    (-32602)
#define MCP_RPC_INTERNAL_ERROR    (-32603)
#define MCP_RPC_SERVER_ERROR      (-32000) /* a refusal of the transport (400, 403, 406, 415, …) */
#define MCP_RPC_SESSION_NOT_FOUND (-32001) /* an unknown or expired Mcp-Session-Id (404) */

/* Bounds. A message is at most the HTTP server's body limit; an id (or a progress token) of more
 * bytes, a method name longer than MCP_RPC_METHOD_MAX or an integer id beyond ±(2^53 - 1) (what a
 * JSON number holds exactly) makes the message invalid. */
#define MCP_RPC_MESSAGE_MAX ((size_t)1024 * 1024)
#define MCP_RPC_ID_MAX      256
#define MCP_RPC_METHOD_MAX  128
#define MCP_RPC_INT_MAX     9007199254740991LL

/* A request id or a progress token: a string or an integer (JSON-RPC allows both; MCP forbids
 * null for requests). MCP_ID_NONE: absent, or null in an error response. */
enum mcp_id_kind { MCP_ID_NONE = 0, MCP_ID_INT, MCP_ID_STR };
struct mcp_id {
    enum mcp_id_kind kind;
    int64_t num;                  /* MCP_ID_INT */
    char str[MCP_RPC_ID_MAX + 1]; /* MCP_ID_STR, NUL-terminated */
};

/* Reads an id or a progress token from v: 0 with *out, or AGENT_E_PROTO (null, a boolean, an
 * object, an array, a number that is not a whole number within MCP_RPC_INT_MAX, a string
 * longer than MCP_RPC_ID_MAX bytes). */
int mcp_id_read(const cJSON *v, struct mcp_id *out);
bool mcp_id_equal(const struct mcp_id *a, const struct mcp_id *b);
/* The id as a JSON value (null for MCP_ID_NONE); NULL when out of memory. */
cJSON *mcp_id_json(const struct mcp_id *id);

enum mcp_msg_kind { MCP_MSG_REQUEST = 1, MCP_MSG_NOTIFICATION, MCP_MSG_RESPONSE };

/* One parsed message. The views point into doc. */
struct mcp_msg {
    enum mcp_msg_kind kind;
    struct mcp_id id;    /* requests (never NONE) and responses (NONE: an error for null) */
    const char *method;  /* requests and notifications; NULL for responses */
    const cJSON *params; /* an object, or NULL when absent */
    cJSON *doc;          /* the whole message, owned */
};

/* Why a message was refused: the JSON-RPC error to answer with (HTTP 400). */
struct mcp_rpc_err {
    int code;            /* MCP_RPC_PARSE_ERROR or MCP_RPC_INVALID_REQUEST */
    const char *message; /* static text */
    struct mcp_id id;    /* the request's id when it could be read (JSON-RPC 2.0 §5), else NONE */
};

/*
 * Parses the body of one POST (text[0..len), not NUL-terminated). Returns 0 with *out (free it
 * with mcp_msg_fini), or AGENT_E_PROTO with *err: MCP_RPC_PARSE_ERROR for bytes that are not one
 * JSON value in UTF-8 (trailing bytes other than blanks included); MCP_RPC_INVALID_REQUEST for a
 * JSON value that is not one JSON-RPC 2.0 message: an array (a batch), a non-object, "jsonrpc"
 * not "2.0", a method that is not a string or is empty or too long, an id that mcp_id_read
 * refuses (or null in a request), params that are not an object (MCP's params are objects),
 * a response with neither or both of result and error, or with a method, or a message over
 * MCP_RPC_MESSAGE_MAX.
 */
int mcp_msg_parse(const void *text, size_t len, struct mcp_msg *out, struct mcp_rpc_err *err);
/* Frees m's document and clears it; NULL and a cleared m are fine. */
void mcp_msg_fini(struct mcp_msg *m);

/* ---- builders (each takes ownership of the cJSON values passed in, even when it fails) ---- */

/* {"jsonrpc":"2.0","id":id,"result":result} */
cJSON *mcp_rpc_result(const struct mcp_id *id, cJSON *result);
/* {"jsonrpc":"2.0","id":id|null,"error":{"code":code,"message":message}} */
cJSON *mcp_rpc_error(const struct mcp_id *id, int code, const char *message);
/* {"jsonrpc":"2.0","method":method,"params":params} (params may be NULL: left out) */
cJSON *mcp_rpc_notification(const char *method, cJSON *params);
/* A tools/call result: {"content":[{"type":"text","text":text}]} plus "structuredContent" when
 * structured is not NULL and "isError":true when is_error. */
cJSON *mcp_tool_result(const char *text, cJSON *structured, bool is_error);
/* notifications/progress's params: {"progressToken", "progress", "total" (left out when total is
 * negative), "message" (left out when NULL)}. */
cJSON *mcp_progress_params(const struct mcp_id *token, double progress, double total,
                           const char *message);

/* Appends v printed without blanks to out. 0, UV_ENOMEM or AGENT_E_TOOBIG (out's cap; out is
 * then left as it was). */
int mcp_json_append(struct buf *out, const cJSON *v);

/*
 * Appends one Server-Sent Event carrying data[0..len) to out (the SSE rules of the WHATWG HTML
 * standard, "Server-sent events"): "event: message", an "id: <event_id>" line when event_id is
 * not NULL, one "data: " line per line of data (split at CR LF, CR or LF, so no line break can
 * end the event early), then the empty line. 0, UV_ENOMEM, AGENT_E_TOOBIG (out left as it was),
 * or AGENT_E_INVAL for an event_id holding a CR, LF or NUL.
 */
int mcp_sse_event(struct buf *out, const char *event_id, const char *data, size_t len);

/* ---- protocol version, headers, session ids ---- */

/* The revision to answer initialize with: asked when dotmon speaks it, else MCP_PROTOCOL_LATEST
 * (the client then decides whether it can go on). Static storage. */
const char *mcp_protocol_negotiate(const char *asked);
/* An MCP-Protocol-Version header value (blanks around it ignored): the revision's static string,
 * or NULL when it is none dotmon speaks (the transport answers 400). */
const char *mcp_protocol_header(const char *value);

#define MCP_SESSION_ID_LEN 32 /* hex digits: 16 random bytes */
/* Writes the session id of 16 bytes (lowercase hex, NUL-terminated) to out. */
void mcp_session_id_format(const uint8_t bytes[16], char out[MCP_SESSION_ID_LEN + 1]);
/* Whether s has the shape of an id dotmon makes (32 hex digits, either case). */
bool mcp_session_id_valid(const char *s);

/* What an Accept header allows (RFC 9110 §12.5.1; a media range with q=0 allows nothing; a
 * missing header allows everything, as HTTP has it). */
struct mcp_accept {
    bool json;      /* application/json, directly or through application/ * or * / * */
    bool sse;       /* text/event-stream, the same way */
    bool sse_named; /* text/event-stream named itself (not only through a range) */
};
void mcp_accept_parse(const char *accept, struct mcp_accept *out);
/* Whether a Content-Type is application/json (any case, parameters such as charset allowed). */
bool mcp_content_type_json(const char *content_type);
/* Whether origin is the request's own: "http://" + host (or "https://" when tls), compared
 * without regard to case, a default port (:80, :443) written or not. */
bool mcp_origin_is_own(const char *origin, const char *host, bool tls);
/*
 * Whether a Host header names dotmon in a way DNS rebinding cannot fake: an IPv4 address, an IPv6
 * address in brackets, or localhost (and names under .localhost, which resolve to loopback), with
 * or without a port. A page of a rebound name (the attacker's domain, resolved to dotmon's
 * address) sends its own name as Host and as Origin, so its origin is "own" but its Host is none
 * of these (MCP 2025-11-25, security best practices: local server compromise).
 */
bool mcp_host_unspoofable(const char *host);

/* ---- params ---- */

/* initialize's params: protocolVersion (a string, required). 0, or AGENT_E_INVAL with *why. */
int mcp_initialize_params(const cJSON *params, const char **version, const char **why);

/* tools/call's params. */
struct mcp_call_params {
    const char *name;       /* the tool's name */
    const cJSON *args;      /* "arguments": an object, or NULL when absent */
    struct mcp_id progress; /* _meta.progressToken, or NONE */
};
/* 0 with *out (views into params), or AGENT_E_INVAL with *why (params missing, name not a
 * non-empty string, arguments not an object, a progress token mcp_id_read refuses). */
int mcp_call_params_read(const cJSON *params, struct mcp_call_params *out, const char **why);
/* notifications/cancelled's requestId: 0 with *out, or AGENT_E_INVAL. */
int mcp_cancel_params_read(const cJSON *params, struct mcp_id *out);

/*
 * The text of a tool error made from a REST answer of status (>= 400): "<status> <title>:
 * <detail>" from an application/problem+json body, with " (<reason>)" when the problem has a
 * "reason" member (dotmon's own words beside dotnet-monitor's detail); without a problem body
 * "<status> <reason phrase>: " and the body's first bytes when it is text. At most 4096 bytes of
 * body text are used, cut on a UTF-8 boundary. Appends to out: 0, UV_ENOMEM or AGENT_E_TOOBIG.
 */
int mcp_problem_text(struct buf *out, int status, const char *content_type, const char *body,
                     size_t len);

#endif
