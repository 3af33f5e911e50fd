/* SPDX-License-Identifier: MIT */
#ifndef AGENT_METRICS_PACE_H
#define AGENT_METRICS_PACE_H

/*
 * When /metrics' shared text is rendered (metrics.c): pure bookkeeping, no loop, no clock of its
 * own (times are the caller's milliseconds), so that it is tested on its own.
 *
 * The stores change many times a second (each runtime's samples arrive on their own schedule). A
 * scrape that found the text out of date used to render it first, and so paid the rendering
 * (about 1.5 ms at 20 processes) in its latency. Now, while scrapes keep coming, the text is
 * rendered in the background: the first change after a rendering starts a window of `window` ms,
 * at its end one rendering takes every change of the window, and a scrape meanwhile is served the
 * text as it was, out of date by less than the window. Without scrapes nothing is rendered: a
 * rendering is made in the background only when the text before it was served (`wanted`), and a
 * scrape that finds the text out of date for a window or more (or no text at all) renders it first,
 * as before.
 */

#include <stdbool.h>
#include <stdint.h>

struct metrics_pace {
    uint64_t window;      /* ms: how out of date a served text may be */
    bool have_text;       /* a text exists (up to date or not) */
    bool dirty;           /* the stores changed since it was rendered */
    uint64_t dirty_since; /* the first of those changes */
    bool wanted;          /* the text was served since it was rendered */
    bool armed;           /* the caller's timer runs, due at due */
    uint64_t due;
};

enum metrics_pace_do {
    METRICS_PACE_NOTHING = 0,
    METRICS_PACE_RENDER, /* render the text now (then metrics_pace_rendered) */
    METRICS_PACE_ARM     /* start the timer: metrics_pace_timer at p->due */
};

static inline void metrics_pace_init(struct metrics_pace *p, uint64_t window_ms)
{
    *p = (struct metrics_pace){.window = window_ms};
}

/* Starts the timer when a background rendering is due and none is under way. */
static inline enum metrics_pace_do metrics_pace_maybe_arm(struct metrics_pace *p)
{
    if (!p->dirty || !p->have_text || !p->wanted || p->armed) {
        return METRICS_PACE_NOTHING;
    }
    p->armed = true;
    p->due = p->dirty_since + p->window;
    return METRICS_PACE_ARM;
}

/* The stores changed at now. */
static inline enum metrics_pace_do metrics_pace_changed(struct metrics_pace *p, uint64_t now)
{
    if (!p->dirty) {
        p->dirty = true;
        p->dirty_since = now;
    }
    return metrics_pace_maybe_arm(p);
}

/* The text is gone (no memory, too big, closed): the next scrape renders. */
static inline void metrics_pace_dropped(struct metrics_pace *p)
{
    p->have_text = false;
}

/*
 * A scrape at now: RENDER first, or serve the text as it is (NOTHING, or ARM: serve it and start
 * the timer). The text it gets counts as wanted either way.
 */
static inline enum metrics_pace_do metrics_pace_scrape(struct metrics_pace *p, uint64_t now)
{
    p->wanted = true;
    if (!p->have_text || (p->dirty && now - p->dirty_since >= p->window)) {
        return METRICS_PACE_RENDER;
    }
    return metrics_pace_maybe_arm(p);
}

/* The text was rendered; for_scrape: for a scrape that serves it now (else in the background). */
static inline void metrics_pace_rendered(struct metrics_pace *p, bool for_scrape)
{
    p->have_text = true;
    p->dirty = false;
    p->wanted = for_scrape;
}

/* The timer fired: RENDER (in the background) or NOTHING (nobody served the text since). */
static inline enum metrics_pace_do metrics_pace_timer(struct metrics_pace *p)
{
    p->armed = false;
    return p->dirty && p->have_text && p->wanted ? METRICS_PACE_RENDER : METRICS_PACE_NOTHING;
}

#endif
