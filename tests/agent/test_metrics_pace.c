/* SPDX-License-Identifier: MIT */
/*
 * When /metrics' shared text is rendered (agent/monitor/metrics_pace.h, issue 30 item 4): while
 * scrapes keep coming, changes are taken by one background rendering a window after the first of
 * them and scrapes are served the text as it was; a scrape that finds the text out of date for a
 * window or more, or no text, renders first; without scrapes nothing is rendered in the
 * background.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "metrics_pace.h"

#define W 100 /* the window, ms */

/* The first scrape renders, as does one after the text was dropped. */
static void test_no_text_renders(void **state)
{
    (void)state;
    struct metrics_pace p;
    metrics_pace_init(&p, W);
    assert_int_equal(metrics_pace_changed(&p, 5), METRICS_PACE_NOTHING); /* no text: no timer */
    assert_int_equal(metrics_pace_scrape(&p, 10), METRICS_PACE_RENDER);
    metrics_pace_rendered(&p, true);
    assert_int_equal(metrics_pace_scrape(&p, 11), METRICS_PACE_NOTHING); /* up to date */
    metrics_pace_dropped(&p);
    assert_int_equal(metrics_pace_scrape(&p, 12), METRICS_PACE_RENDER);
}

/* Scrapes in a row: a change arms the timer once, scrapes in the window are served the old text,
 * the timer renders; the next change arms it again. */
static void test_scraped_changes_render_in_background(void **state)
{
    (void)state;
    struct metrics_pace p;
    metrics_pace_init(&p, W);
    assert_int_equal(metrics_pace_scrape(&p, 0), METRICS_PACE_RENDER);
    metrics_pace_rendered(&p, true);
    assert_int_equal(metrics_pace_changed(&p, 1000), METRICS_PACE_ARM);
    assert_int_equal(p.due, 1000 + W);
    assert_int_equal(metrics_pace_changed(&p, 1010), METRICS_PACE_NOTHING); /* armed already */
    assert_int_equal(metrics_pace_scrape(&p, 1050), METRICS_PACE_NOTHING);  /* served as it was */
    assert_int_equal(metrics_pace_scrape(&p, 1099), METRICS_PACE_NOTHING);
    assert_int_equal(metrics_pace_timer(&p), METRICS_PACE_RENDER);
    metrics_pace_rendered(&p, false);
    assert_int_equal(metrics_pace_scrape(&p, 1101), METRICS_PACE_NOTHING); /* up to date */
    assert_int_equal(metrics_pace_changed(&p, 1200), METRICS_PACE_ARM);
    assert_int_equal(p.due, 1200 + W);
}

/* Nobody scrapes: after the last background rendering, changes arm nothing, and a late scrape
 * renders the text before it is served (never older than the window). */
static void test_no_scrape_no_rendering(void **state)
{
    (void)state;
    struct metrics_pace p;
    metrics_pace_init(&p, W);
    assert_int_equal(metrics_pace_scrape(&p, 0), METRICS_PACE_RENDER);
    metrics_pace_rendered(&p, true);
    assert_int_equal(metrics_pace_changed(&p, 10), METRICS_PACE_ARM);
    assert_int_equal(metrics_pace_timer(&p), METRICS_PACE_RENDER);
    metrics_pace_rendered(&p, false); /* not served since */
    assert_int_equal(metrics_pace_changed(&p, 200), METRICS_PACE_NOTHING);
    assert_int_equal(metrics_pace_changed(&p, 300), METRICS_PACE_NOTHING);
    assert_int_equal(metrics_pace_scrape(&p, 5000), METRICS_PACE_RENDER); /* 4.8 s out of date */
    metrics_pace_rendered(&p, true);
    assert_int_equal(metrics_pace_changed(&p, 5001), METRICS_PACE_ARM); /* served: scraped again */
}

/* A scrape finding a change not yet armed (the text was not wanted then) is served the old text
 * and arms the timer for the change's window; at the window's end a scrape renders itself. */
static void test_scrape_arms(void **state)
{
    (void)state;
    struct metrics_pace p;
    metrics_pace_init(&p, W);
    assert_int_equal(metrics_pace_scrape(&p, 0), METRICS_PACE_RENDER);
    metrics_pace_rendered(&p, false);
    assert_int_equal(metrics_pace_changed(&p, 10), METRICS_PACE_NOTHING);
    assert_int_equal(metrics_pace_scrape(&p, 40), METRICS_PACE_ARM);
    assert_int_equal(p.due, 10 + W);
    assert_int_equal(metrics_pace_scrape(&p, 10 + W), METRICS_PACE_RENDER);
    metrics_pace_rendered(&p, true);
    assert_int_equal(metrics_pace_timer(&p), METRICS_PACE_NOTHING); /* nothing left to do */
}

/* The timer after the text was dropped renders nothing (the next scrape does). */
static void test_timer_after_drop(void **state)
{
    (void)state;
    struct metrics_pace p;
    metrics_pace_init(&p, W);
    assert_int_equal(metrics_pace_scrape(&p, 0), METRICS_PACE_RENDER);
    metrics_pace_rendered(&p, true);
    assert_int_equal(metrics_pace_changed(&p, 1), METRICS_PACE_ARM);
    metrics_pace_dropped(&p);
    assert_int_equal(metrics_pace_timer(&p), METRICS_PACE_NOTHING);
    assert_int_equal(metrics_pace_scrape(&p, 2), METRICS_PACE_RENDER);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_text_renders),
        cmocka_unit_test(test_scraped_changes_render_in_background),
        cmocka_unit_test(test_no_scrape_no_rendering),
        cmocka_unit_test(test_scrape_arms),
        cmocka_unit_test(test_timer_after_drop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
