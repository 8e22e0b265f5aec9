/*
 * progress_private.h - what progress/engine.c and progress/completion.c
 * share; nothing outside progress/ includes it.
 */
#ifndef WEFT_PROGRESS_PRIVATE_H
#define WEFT_PROGRESS_PRIVATE_H

#include "progress.h"

/** The settings given to weft__progress_init. */
extern weft__progress_params_t weft__pp;

/**
 * Engine side, as t finishes (progress lock held): store the status and
 * publish t, unless a completion callback is registered: then return true
 * and leave it unpublished, to be published by weft__task_run_callback once
 * the progress lock is released, so that the callback never runs under it.
 * A task with on_finish is handed to it first.
 */
bool weft__task_finish(weft__task_t *t, weft_status_t status);
/** Publish t and run its callback. Progress lock not held. */
void weft__task_run_callback(weft__task_t *t);

#endif /* WEFT_PROGRESS_PRIVATE_H */
