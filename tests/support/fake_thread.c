/* SPDX-License-Identifier: MIT */
#include "fake_thread.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "testenv.h"

struct fake_thread {
    uv_loop_t loop;
    uv_async_t async;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct fake_runtime_config cfg;
    char dir[TESTENV_DIR_SIZE];
    struct fake_runtime *f; /* loop thread only */
    int start_rc;
    bool started;
    fake_thread_fn fn; /* the call to run on the loop thread; NULL: stop */
    void *arg;
    bool pending;
    bool done;
};

static void on_async(uv_async_t *a)
{
    struct fake_thread *ft = a->data;
    pthread_mutex_lock(&ft->mu);
    if (ft->pending) {
        ft->pending = false;
        if (ft->fn != NULL) {
            ft->fn(ft->f, ft->arg);
        } else {
            fake_runtime_close(ft->f, NULL, NULL);
            ft->f = NULL;
            uv_close((uv_handle_t *)&ft->async, NULL);
        }
        ft->done = true;
        pthread_cond_broadcast(&ft->cv);
    }
    pthread_mutex_unlock(&ft->mu);
}

static void *thread_main(void *arg)
{
    struct fake_thread *ft = arg;
    int rc = uv_loop_init(&ft->loop);
    bool loop_ok = rc == 0;
    if (rc == 0) {
        rc = uv_async_init(&ft->loop, &ft->async, on_async);
        ft->async.data = ft;
        if (rc == 0) {
            rc = fake_runtime_start(&ft->loop, ft->dir, &ft->cfg, &ft->f);
            if (rc != 0) {
                uv_close((uv_handle_t *)&ft->async, NULL);
            }
        }
    }
    pthread_mutex_lock(&ft->mu);
    ft->start_rc = rc;
    ft->started = true;
    pthread_cond_broadcast(&ft->cv);
    pthread_mutex_unlock(&ft->mu);
    if (loop_ok) {
        uv_run(&ft->loop, UV_RUN_DEFAULT);
        int crc = uv_loop_close(&ft->loop);
        if (crc != 0) {
            fprintf(stderr, "fake runtime loop: handles left open (%s)\n", uv_strerror(crc));
        }
    }
    return NULL;
}

static void destroy(struct fake_thread *ft)
{
    pthread_join(ft->th, NULL);
    pthread_mutex_destroy(&ft->mu);
    pthread_cond_destroy(&ft->cv);
    free(ft);
}

int fake_thread_start(const char *dir, const struct fake_runtime_config *cfg,
                      struct fake_thread **out)
{
    *out = NULL;
    struct fake_thread *ft = calloc(1, sizeof(*ft));
    if (ft == NULL) {
        return UV_ENOMEM;
    }
    pthread_mutex_init(&ft->mu, NULL);
    pthread_cond_init(&ft->cv, NULL);
    snprintf(ft->dir, sizeof(ft->dir), "%s", dir);
    ft->cfg = *cfg;
    if (pthread_create(&ft->th, NULL, thread_main, ft) != 0) {
        pthread_mutex_destroy(&ft->mu);
        pthread_cond_destroy(&ft->cv);
        free(ft);
        return UV_EAGAIN;
    }
    pthread_mutex_lock(&ft->mu);
    while (!ft->started) {
        pthread_cond_wait(&ft->cv, &ft->mu);
    }
    pthread_mutex_unlock(&ft->mu);
    int rc = ft->start_rc;
    if (rc != 0) {
        destroy(ft);
        return rc;
    }
    *out = ft;
    return 0;
}

void fake_thread_call(struct fake_thread *ft, fake_thread_fn fn, void *arg)
{
    pthread_mutex_lock(&ft->mu);
    ft->fn = fn;
    ft->arg = arg;
    ft->pending = true;
    ft->done = false;
    pthread_mutex_unlock(&ft->mu);
    if (uv_async_send(&ft->async) != 0) {
        fprintf(stderr, "fake runtime thread: uv_async_send failed\n");
        abort();
    }
    pthread_mutex_lock(&ft->mu);
    while (!ft->done) {
        pthread_cond_wait(&ft->cv, &ft->mu);
    }
    pthread_mutex_unlock(&ft->mu);
}

void fake_thread_stop(struct fake_thread *ft)
{
    if (ft == NULL) {
        return;
    }
    fake_thread_call(ft, NULL, NULL);
    destroy(ft);
}
