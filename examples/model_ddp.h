/*
 * model_ddp.h - model_backward --gpus N: the same model's step graph data-parallel, one thread and one context per
 * GPU (gg_dist_init_threads), checked and timed (model_ddp.c).
 */
#ifndef GG_MODEL_DDP_H
#define GG_MODEL_DDP_H

#include "step_model.h"

/* Runs c on gpus GPUs (rank r's inputs from seed c->seed + r): checks that every rank's parameter gradients after a
 * step equal the mean of the ranks' eager gradients and are bitwise equal across ranks, then times `rounds` rounds
 * of `steps` steps of the step with reduction, without it, and the reduction alone; prints them and, with json,
 * writes them there. Returns the exit code: 0 when the checks pass, 1 otherwise, 77 with fewer GPUs or no NCCL. */
int md_run(const sm_config *c, int gpus, int steps, int rounds, const char *json);

#endif
