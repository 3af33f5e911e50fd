/* SPDX-License-Identifier: MIT */
#ifndef DOTMON_AWS_PROFILE_H
#define DOTMON_AWS_PROFILE_H

/*
 * AWS's shared credentials file (~/.aws/credentials) and config file (~/.aws/config): one
 * profile's static keys and region, read the way the AWS SDKs read them (AWS SDKs and Tools
 * Reference Guide, "Shared config and credentials files"). Pure: text in, values out; the caller
 * reads the files (bounded) off the loop. docs/egress.md ("S3 credentials") describes what users
 * see.
 *
 * Format accepted:
 *  - lines end with "\n" or "\r\n"; blank lines and lines whose first non-blank character is
 *    '#' or ';' are comments;
 *  - a section line "[name]" (blanks around and inside the brackets trimmed, anything after ']'
 *    that is a comment ignored); in the config file a profile is "[profile name]" and the default
 *    one "[default]" (or "[profile default]"); in the credentials file it is "[name]"; other
 *    sections ("[sso-session x]", "[services x]") are skipped;
 *  - "key = value" with blanks trimmed on both sides; keys compared ASCII case-insensitively,
 *    profile names exactly; a key given again (or a section repeated) takes the later value;
 *  - an indented line after a key is a sub-property (as in "s3 =\n  addressing_style = path"):
 *    skipped;
 *  - a line that is none of these is an error (line number in why), as the SDKs refuse it.
 *
 * Keys used: aws_access_key_id, aws_secret_access_key, aws_session_token, region. A profile that
 * gets its credentials some other way (credential_process, role_arn, web_identity_token_file,
 * sso_session, sso_start_url, credential_source) is reported in `unsupported`: dotmon does not
 * implement those, and says so rather than using something else.
 */

#include <stdbool.h>
#include <stddef.h>

#define AWS_PROFILE_MAX_FILE (1u << 20) /* bytes read of either file, at most */

struct aws_profile {
    bool found; /* the profile's section is in the file */
    char *access_key_id;
    char *secret_access_key; /* secret */
    char *session_token;     /* secret */
    char *region;
    char unsupported[32]; /* the first unsupported credential key seen, or "" */
};

/*
 * Applies the section of profile `name` in text[0..len) to out (later files override earlier
 * ones: call with the config file first, then the credentials file). config_file: the file's
 * sections are "[profile name]" (and "[default]"). Returns 0, AGENT_E_INVAL (malformed: why says
 * where, never a value), or -ENOMEM (UV_ENOMEM).
 */
int aws_profile_parse(const char *text, size_t len, const char *name, bool config_file,
                      struct aws_profile *out, char *why, size_t whylen);
/* Replaces *dst with a copy of value[0..n) (the old one wiped first when secret): 0 or -ENOMEM. */
int aws_profile_set(char **dst, const char *value, size_t n, bool secret);
/* Frees the values (secrets wiped first); safe on a zeroed or finished struct. */
void aws_profile_fini(struct aws_profile *p);

#endif
