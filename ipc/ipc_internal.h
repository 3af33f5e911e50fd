/* SPDX-License-Identifier: MIT */
#ifndef AGENT_IPC_INTERNAL_H
#define AGENT_IPC_INTERNAL_H

/* Declarations shared between the files of the ipc module only (STYLE.md §2.1). */

#include "ipc_client.h"

/*
 * Like ipc_exchange_cancel, except that cb still runs exactly once, with status UV_ECANCELED (or
 * the real result if the exchange had already finished), after every handle of the exchange has
 * closed. Owners that must know when the exchange's loop resources are gone (discovery's close)
 * use this instead of ipc_exchange_cancel.
 */
void ipc__exchange_abort(struct ipc_exchange *x);

#endif
