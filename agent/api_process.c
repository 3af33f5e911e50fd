/* SPDX-License-Identifier: MIT */
/* placeholder until the module lands */
extern int agent_placeholder_api_process;
