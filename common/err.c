/* SPDX-License-Identifier: MIT */
#include "err.h"

#include <string.h>

const char *agent_strerror(int err)
{
    switch (err) {
    case 0:
        return "success";
    case AGENT_E_PROTO:
        return "protocol violation";
    case AGENT_E_TOOBIG:
        return "size over limit";
    case AGENT_E_TRUNC:
        return "truncated input";
    case AGENT_E_TIMEOUT:
        return "timed out";
    case AGENT_E_RUNTIME:
        return "runtime reported an error";
    case AGENT_E_INVAL:
        return "invalid argument";
    case AGENT_E_NOTFOUND:
        return "not found";
    case AGENT_E_CLOSED:
        return "connection closed by peer";
    case AGENT_E_NOSPACE:
        return "output buffer too small";
    case AGENT_E_AUTH:
        return "authentication failed";
    case AGENT_E_NOTREG:
        return "not a regular file";
    case AGENT_E_UNTRUSTED:
        return "owned by an untrusted user";
    case AGENT_E_CHANGED:
        return "replaced by another file meanwhile";
    case AGENT_E_BUDGET:
        return "over dotmon's memory budget";
    default:
        break;
    }
    /* libuv's codes are negated errno values on Unix; strerror is thread-unsafe but we run one
     * loop. */
    if (err < 0 && err > -4000) {
        return strerror(-err);
    }
    return "unknown error";
}
