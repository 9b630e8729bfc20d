/*
 * log_env.h - GG_LOG_LEVEL: the log level from the environment, read by gg_ctx_create as NCCL reads NCCL_DEBUG, for
 * users who cannot add a log callback. Without a callback the messages then go to stderr.
 */
#ifndef GG_LOG_ENV_H
#define GG_LOG_ENV_H

#include "gradgraph.h"

/* "ERROR", "WARN", "INFO", "DEBUG" or "TRACE" (DEBUG, NCCL's name for its most verbose level), in any case, to a
 * level. Returns 0, or -1 for anything else (NULL included). */
int gg_log_level_parse(const char *text, gg_log_level *out);

/* Applies GG_LOG_LEVEL, when set and not empty, to a context's config: the level replaces config->log_level, and a
 * config without log_fn gets one that writes to stderr. A value gg_log_level_parse refuses fails with
 * GG_ERROR_INVALID_ARGUMENT and a message for gg_last_error(NULL). */
gg_status gg_log_env_apply(gg_config *config);

/* The stderr log: "gradgraph[<pid>] WARN: <message>", one line per message. */
void gg_log_to_stderr(void *user_data, gg_log_level level, const char *message);

#endif
