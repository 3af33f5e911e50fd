/* SPDX-License-Identifier: MIT */
#ifndef AGENT_MCP_H
#define AGENT_MCP_H

#include <cJSON.h>

struct agent;
struct http_request;

/*
 * The MCP endpoint (docs/mcp.md): `/mcp` on the API URLs, the Model Context Protocol's Streamable
 * HTTP transport (JSON-RPC 2.0 over POST, answers as JSON or as a Server-Sent Events stream),
 * behind the same bearer authentication as every route, off unless `Mcp:Enabled` is true.
 *
 * Sessions (Mcp-Session-Id, made at initialize, bounded in number, dropped after
 * Timeouts:McpSessionIdleMs idle or on DELETE), protocol-version negotiation (the current revision
 * and the previous ones dotmon knows), Origin checked on every request (403 unless absent, the
 * request's own origin, or allowed by Mcp:AllowedOrigins / CorsConfiguration:AllowedOrigins),
 * `initialize`, `ping`, `tools/list`, `tools/call` (with progress notifications while a long tool
 * runs), `notifications/initialized`, `notifications/cancelled` (stops the tool's REST request:
 * the route cancels its runtime session).
 *
 * A tool call runs the tool (mcp_tools.h) over dotmon's own routes as local requests
 * (http_local_new), so admission, limits, problem+json and cancellation are the routes' own.
 * Everything runs on the loop.
 */
struct mcp;

/* Reads the Mcp:* settings. 0 with *out NULL when the endpoint is off, 0 with *out, or a negative
 * code after logging why (a bad setting: dotmon does not start). */
int mcp_new(struct agent *a, struct mcp **out);
/* POST, GET and DELETE /mcp (the request is authorized already). m NULL: 404 naming Mcp:Enabled. */
void mcp_handle(struct mcp *m, struct http_request *req);
/* Shutdown: every call in flight is cancelled (its REST request too) and its client answered; new
 * requests get 503. */
void mcp_shutdown(struct mcp *m);
/* Frees m (after mcp_shutdown, once the loop has run the cancellations). NULL is fine. */
void mcp_free(struct mcp *m);
/* For /info?extras=true: sessions, calls in flight, calls and errors per tool. NULL when off. */
cJSON *mcp_status_json(const struct mcp *m);

#endif
