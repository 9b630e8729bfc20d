/*
 * bootstrap.h - what one-process-per-GPU launches need before NCCL exists: this process's rank and the world size
 * (from the launcher's environment, or from an MPI communicator), and NCCL's unique id handed from rank 0 to the
 * others (through a file on a shared path, or an MPI broadcast). Plain C (no NCCL), tested on the CPU.
 */
#ifndef GG_BOOTSTRAP_H
#define GG_BOOTSTRAP_H

#include <stddef.h>

#include "internal.h"

/* RANK / WORLD_SIZE, else OMPI_COMM_WORLD_RANK / _SIZE, else SLURM_PROCID / SLURM_NTASKS. Returns GG_SUCCESS or
 * GG_ERROR_INVALID_ARGUMENT (message names the variables) when no valid pair is set. */
gg_status gg_bootstrap_rank_size(gg_ctx *ctx, const char *fn, int *rank, int *size);

/* Rank 0 writes the `bytes` of id to path (a temporary file, then an atomic rename); every other rank waits until
 * it can read them, polling every 50 ms, within the init deadline (GG_DIST_INIT_TIMEOUT_S, waiting.h; its notices
 * in ctx's log). */
gg_status gg_bootstrap_share_id(gg_ctx *ctx, const char *fn, int rank, const char *path, void *id, size_t bytes);

/* MPI (builds with GG_WITH_MPI): rank and size of *comm (comm points at an MPI_Comm; NULL: MPI_COMM_WORLD), and
 * `bytes` at data broadcast from rank 0 of it to every rank. MPI must be initialized and not finalized, else
 * GG_ERROR_INVALID_ARGUMENT saying so; built without MPI: GG_ERROR_UNSUPPORTED. */
gg_status gg_bootstrap_mpi_rank_size(gg_ctx *ctx, const char *fn, const void *comm, int *rank, int *size);
gg_status gg_bootstrap_mpi_broadcast(gg_ctx *ctx, const char *fn, const void *comm, void *data, size_t bytes);

#endif
