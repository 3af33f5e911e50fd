/* SPDX-License-Identifier: MIT */
#ifndef AGENT_UI_ASSETS_H
#define AGENT_UI_ASSETS_H

#include <stddef.h>

/*
 * The files of agent/ui (the /ui page), compiled into the binary by cmake/EmbedFiles.cmake:
 * nothing is read from disk at run time. The table ends with an entry whose name is NULL.
 */
struct ui_asset {
    const char *name; /* "index.html", "app.js", … */
    const unsigned char *data;
    size_t len;
};

extern const struct ui_asset ui_assets[];

#endif
