/* share_thread.h - the coordinator's own share of a coded call, computed on
   a helper thread while the calling thread dispatches the shards, collects
   and decodes (engine.c). One per context, started at the first call
   that takes a share; the thread is kept so its scratch buffers (scratch.h)
   are kept too. */
#ifndef CDC_SHARE_THREAD_H_INCLUDED
#define CDC_SHARE_THREAD_H_INCLUDED

typedef struct cdc_share_thread cdc_share_thread_t;

/* Start the thread. CDC_OK, or CDC_ENOMEM when it could not start. */
int cdc__share_thread_new(cdc_share_thread_t **thread_p);

/* Run job(arg) on the thread; it must not be running another (calls on a
   context are serialised). */
void cdc__share_thread_post(cdc_share_thread_t *thread, int (*job)(void *arg), void *arg);

/* Wait for the posted job; its return value. */
int cdc__share_thread_wait(cdc_share_thread_t *thread);

/* Stop and join the thread (no job may be running). Accepts NULL and *NULL. */
void cdc__share_thread_free(cdc_share_thread_t **thread_p);

#endif
