/* SPDX-License-Identifier: MIT */
#ifndef AGENT_EV_REQUEST_SPECS_H
#define AGENT_EV_REQUEST_SPECS_H

/*
 * What Microsoft-Diagnostics-DiagnosticSource forwards about HTTP requests when asked with this
 * FilterAndPayloadSpecs argument: dotnet/diagnostics' HttpRequestSourceConfiguration
 * .DiagnosticFilterString. ASP.NET Core's HttpRequestIn.Start/Stop become Activity1Start and
 * Activity1Stop with an Arguments array of {Key, Value} (ActivityId, Path, StatusCode,
 * ActivityDuration in 100 ns ticks, …); HttpClient's requests Activity2Start/Activity2Stop. The
 * Http trace profile and the ASP.NET collection-rule triggers (docs/rules.md §4) send the same
 * string, so a trace never changes what a trigger reads.
 */
extern const char ev_request_filter_specs[];

#endif
