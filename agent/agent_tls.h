/* SPDX-License-Identifier: MIT */
#ifndef AGENT_AGENT_TLS_H
#define AGENT_AGENT_TLS_H

#include "agent.h"

/*
 * HTTPS settings of the agent, with dotnet-monitor's (Kestrel's) names:
 *   Kestrel:Certificates:Default:Path      PEM certificate, leaf first, then any intermediates
 *   Kestrel:Certificates:Default:KeyPath   PEM private key (optional when Path holds the key)
 *   Kestrel:Certificates:Default:Password  password of an encrypted key (a secret)
 *
 * agent_tls_init runs at the end of agent_init (after authentication is set up). When an
 * artifact URL (--urls / Urls) or, with metrics on, a metrics URL (--metricUrls /
 * Metrics:Endpoints) is https://, it loads the certificate into a->tls; a missing or unusable
 * certificate or key is logged naming the setting and returns AGENT_E_INVAL (dotmon does not
 * start). An expired or not-yet-valid certificate is only a warning, as in Kestrel: refusing
 * to start would turn a missed renewal into a monitoring outage, and clients refuse it anyway.
 * It also logs the one start-up warning that bearer tokens would cross the network in clear
 * text (authentication on, an artifact URL plain http:// on a non-loopback address).
 */
int agent_tls_init(struct agent *a);
/* Frees a->tls (after the HTTP server is gone). */
void agent_tls_fini(struct agent *a);

#endif
