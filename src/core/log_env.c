/* log_env.c - GG_LOG_LEVEL and the stderr log it turns on (log_env.h). */
#include "log_env.h"

#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <unistd.h>

#include "internal.h"

static const char *const level_names[] = {"ERROR", "WARN", "INFO", "DEBUG"}; /* gg_log_level's order */

int gg_log_level_parse(const char *text, gg_log_level *out) {
    if (!text) return -1;
    for (int l = GG_LOG_ERROR; l <= GG_LOG_DEBUG; ++l)
        if (!strcasecmp(text, level_names[l])) {
            *out = (gg_log_level)l;
            return 0;
        }
    if (!strcasecmp(text, "TRACE")) {
        *out = GG_LOG_DEBUG;
        return 0;
    }
    return -1;
}

void gg_log_to_stderr(void *user_data, gg_log_level level, const char *message) {
    (void)user_data;
    const char *name = (int)level >= GG_LOG_ERROR && level <= GG_LOG_DEBUG ? level_names[level] : "LOG";
    /* One fprintf per message: lines from several threads or ranks do not interleave within a line. */
    fprintf(stderr, "gradgraph[%ld] %s: %s\n", (long)getpid(), name, message);
}

gg_status gg_log_env_apply(gg_config *config) {
    const char *text = getenv("GG_LOG_LEVEL");
    if (!text || !*text) return GG_SUCCESS;
    gg_log_level level;
    if (gg_log_level_parse(text, &level) != 0)
        return gg_fail(NULL, GG_ERROR_INVALID_ARGUMENT,
                       "gg_ctx_create: GG_LOG_LEVEL=\"%.64s\" is not ERROR, WARN, INFO, DEBUG or TRACE", text);
    config->log_level = level;
    if (!config->log_fn) {
        config->log_fn = gg_log_to_stderr;
        config->log_user_data = NULL;
    }
    return GG_SUCCESS;
}
