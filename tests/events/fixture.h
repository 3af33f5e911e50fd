/* SPDX-License-Identifier: MIT */
#ifndef TESTS_EVENTS_FIXTURE_H
#define TESTS_EVENTS_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

/*
 * The bytes of tests/fixtures/<sub>/<name> ($DOTMON_FIXTURES instead of tests/fixtures when set);
 * fails the running cmocka test when the file cannot be read or is empty. The caller frees.
 */
uint8_t *fixture_read(const char *sub, const char *name, size_t *n);

#endif
