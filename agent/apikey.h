/* SPDX-License-Identifier: MIT */
#ifndef AGENT_APIKEY_H
#define AGENT_APIKEY_H

struct agent;

/*
 * Authentication:MonitorApiKey, and its rotation without a restart.
 *
 * apikey_setup (agent_init, first, before anything logs): builds a->verifier from the
 * configuration, a temporary key (--temp-apikey, printed once on stdout) or nothing (--no-auth).
 * An invalid key configuration is an error: dotmon does not start. With a temporary key, stdout
 * also gets the URL to open and its /ui; with --token-file the token is written, bare, to that
 * file (0600, folders checked and made 0700 as shdir_open_trusted does, written under a temporary
 * name and renamed: a planted link is replaced, never followed; a->token_file owns its folder's
 * descriptor), and stdout names the file and an `export DOTMON_TOKEN=$(cat …)` line. A file that
 * cannot be written safely stops start-up.
 *
 * apikey_watch_start (agent_start): the sources that live on disk are watched (with a temporary
 * key or auth off too, for Egress and the collection rules): the --configuration-file-path file,
 * the shared folder (/etc/dotnet-monitor: key-per-file, e.g. a mounted Secret, and its
 * settings.json) and the user settings file, those whose folder exists at start-up. Each folder is
 * watched (inotify, which also sees Kubernetes' symlink swap of a mounted Secret or ConfigMap) and
 * each file or folder polled every 2 s as a fallback. A change rebuilds the merged configuration
 * (settings.h, in dotnet-monitor's order) and, when the key settings differ, replaces the verifier:
 * tokens of the old key get 401 from then on. A file that cannot be read or parsed (e.g. caught
 * mid-write) leaves the key as it is; a parsed file with an invalid key configuration refuses every
 * request (401) until it is fixed, as dotnet-monitor does. The Egress section is rebuilt too
 * (agent_egress_parse): a valid one replaces a->egress, an invalid one is logged and the providers
 * stay. Then the collection rules (rules_run_reload: valid ones replace the running rules, invalid
 * ones are logged and the running rules stay). Other settings take effect at the next start (their
 * names are logged).
 *
 * apikey_watch_stop (agent_stop): closes the watchers; a->open_handles drops when they are gone.
 * apikey_fini (agent_fini): frees what setup kept and removes the token file if the file at its
 * name is still the one written (a normal stop: SIGINT, SIGTERM, or a failed start-up).
 */
int apikey_setup(struct agent *a);
int apikey_watch_start(struct agent *a);
void apikey_watch_stop(struct agent *a);
void apikey_fini(struct agent *a);

#endif
