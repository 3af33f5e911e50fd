/* SPDX-License-Identifier: MIT */
/* Fixture files for the events tests; see fixture.h. */
#include "fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

uint8_t *fixture_read(const char *sub, const char *name, size_t *n)
{
    const char *dir = getenv("DOTMON_FIXTURES");
    char path[1024];
    int len = snprintf(path, sizeof(path), "%s/%s/%s", dir ? dir : "tests/fixtures", sub, name);
    assert_true(len > 0 && (size_t)len < sizeof(path));
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fail_msg("cannot open %s (set DOTMON_FIXTURES)", path);
    }
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long size = ftell(f);
    assert_true(size > 0);
    assert_int_equal(fseek(f, 0, SEEK_SET), 0);
    uint8_t *p = malloc((size_t)size);
    assert_non_null(p);
    assert_int_equal(fread(p, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    *n = (size_t)size;
    return p;
}
