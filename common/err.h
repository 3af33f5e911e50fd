/* SPDX-License-Identifier: MIT */
#ifndef AGENT_ERR_H
#define AGENT_ERR_H

/*
 * Error codes. Every function that can fail returns int: 0 is success, a negative value is an
 * error. System errors are libuv's UV_E* values (negated errno); dotmon's own codes live in the
 * range below, well away from libuv's (which stops above -3100).
 */
enum agent_err {
    AGENT_E_BASE = -4000,
    AGENT_E_PROTO = -4001,     /* peer sent bytes that violate the protocol */
    AGENT_E_TOOBIG = -4002,    /* a size from the peer or the user is over its cap */
    AGENT_E_TRUNC = -4003,     /* input ended in the middle of a field */
    AGENT_E_TIMEOUT = -4004,   /* an exchange did not finish in time */
    AGENT_E_RUNTIME = -4005,   /* the runtime answered with an error HRESULT */
    AGENT_E_INVAL = -4006,     /* invalid argument or configuration */
    AGENT_E_NOTFOUND = -4007,  /* no such object */
    AGENT_E_CLOSED = -4008,    /* the peer closed the connection */
    AGENT_E_NOSPACE = -4009,   /* an encoder ran out of room in its output */
    AGENT_E_AUTH = -4010,      /* authentication failure */
    AGENT_E_NOTREG = -4011,    /* a file that must be a plain file is a FIFO, socket, device… */
    AGENT_E_UNTRUSTED = -4012, /* a file, socket or peer belongs to a user dotmon does not trust */
    AGENT_E_CHANGED = -4013,   /* a file was swapped for another between two checks */
    AGENT_E_BUDGET = -4014,    /* over dotmon's memory budget (common/membudget.h) */
    AGENT_E_LAST = -4015
};

/* Returns a static, human-readable string for any code (ours or libuv's). Never NULL. */
const char *agent_strerror(int err);

#endif
