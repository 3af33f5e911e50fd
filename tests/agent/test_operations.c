/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "err.h"
#include "operations.h"

static void test_operations_limit_per_kind(void **state)
{
    (void)state;
    struct op_registry r;
    op_registry_init(&r, 10, 3, 1);
    struct operation *ops[4];
    for (int i = 0; i < 3; i++) {
        assert_int_equal(op_registry_add(&r, OP_KIND_TRACE, 1, "u", "app", NULL, &ops[i]), 0);
    }
    assert_int_equal(op_registry_add(&r, OP_KIND_TRACE, 1, "u", "app", NULL, &ops[3]),
                     AGENT_E_TOOBIG);
    /* Another kind has its own limit. */
    struct operation *d;
    assert_int_equal(op_registry_add(&r, OP_KIND_DUMP, 1, "u", "app", NULL, &d), 0);
    assert_int_equal(op_registry_add(&r, OP_KIND_DUMP, 1, "u", "app", NULL, &ops[3]),
                     AGENT_E_TOOBIG);
    /* Finishing one frees a slot. */
    op_set_state(&r, ops[1], OP_RUNNING, NULL, NULL);
    op_set_state(&r, ops[1], OP_SUCCEEDED, NULL, NULL);
    assert_int_equal(op_registry_active(&r, OP_KIND_TRACE), 2);
    assert_int_equal(op_registry_add(&r, OP_KIND_TRACE, 1, "u", "app", NULL, &ops[3]), 0);
    op_registry_fini(&r);
}

static void test_operations_history_is_bounded(void **state)
{
    (void)state;
    struct op_registry r;
    op_registry_init(&r, 5, 0, 0); /* limit 0: unlimited */
    char first_id[37];
    struct operation *running;
    assert_int_equal(op_registry_add(&r, OP_KIND_TRACE, 7, "u", "app", NULL, &running), 0);
    for (int i = 0; i < 20; i++) {
        struct operation *op;
        assert_int_equal(op_registry_add(&r, OP_KIND_TRACE, 1, "u", "app", NULL, &op), 0);
        if (i == 0) {
            memcpy(first_id, op->id, sizeof(first_id));
        }
        op_set_state(&r, op, OP_FAILED, "Code", "message");
    }
    assert_int_equal(r.n, 6); /* 5 finished + the running one */
    assert_null(op_registry_find(&r, first_id));
    assert_ptr_equal(op_registry_find(&r, running->id), running);
    /* A final state is final. */
    struct operation *last = r.v[r.n - 1];
    op_set_state(&r, last, OP_RUNNING, NULL, NULL);
    assert_int_equal(last->state, OP_FAILED);
    op_registry_fini(&r);
}

static void test_operations_json_and_tags(void **state)
{
    (void)state;
    struct op_registry r;
    op_registry_init(&r, 5, 3, 1);
    struct operation *op;
    assert_int_equal(op_registry_add(&r, OP_KIND_TRACE, 42, "0f73e9e6-56ca-43af-8d87-561d92890621",
                                     "TestApp", "a,b", &op),
                     0);
    assert_int_equal(strlen(op->id), 36);
    assert_int_equal(op->id[14], '4');
    assert_true(op_has_tags(op, "a"));
    assert_true(op_has_tags(op, "b,a"));
    assert_false(op_has_tags(op, "a,c"));
    assert_true(op_has_tags(op, ""));
    op_set_state(&r, op, OP_FAILED, "TraceTruncated", "ended early");
    cJSON *j = op_to_json(op, true);
    assert_string_equal(cJSON_GetObjectItem(j, "status")->valuestring, "Failed");
    assert_string_equal(cJSON_GetObjectItem(j, "operationId")->valuestring, op->id);
    cJSON *err = cJSON_GetObjectItem(j, "error");
    assert_string_equal(cJSON_GetObjectItem(err, "code")->valuestring, "TraceTruncated");
    cJSON *proc = cJSON_GetObjectItem(j, "process");
    assert_int_equal(cJSON_GetObjectItem(proc, "pid")->valuedouble, 42);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "tags")), 2);
    const char *ts = cJSON_GetObjectItem(j, "createdDateTime")->valuestring;
    assert_int_equal(strlen(ts), 24);
    assert_int_equal(ts[23], 'Z');
    cJSON_Delete(j);
    op_registry_fini(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_operations_limit_per_kind),
        cmocka_unit_test(test_operations_history_is_bounded),
        cmocka_unit_test(test_operations_json_and_tags),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
