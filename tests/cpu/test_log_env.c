/*
 * test_log_env.c - GG_LOG_LEVEL (src/core/log_env.c): the names it takes, what it does to a config, and the stderr
 * log it turns on when the config has no callback. (test_api checks its effect on gg_ctx_create.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "log_env.h"

static void names_any_case_and_trace(void **state) {
    (void)state;
    const struct {
        const char *text;
        gg_log_level level;
    } ok[] = {{"ERROR", GG_LOG_ERROR}, {"warn", GG_LOG_WARN}, {"Info", GG_LOG_INFO}, {"DEBUG", GG_LOG_DEBUG},
              {"trace", GG_LOG_DEBUG}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; ++i) {
        gg_log_level level = (gg_log_level)-1;
        assert_int_equal(gg_log_level_parse(ok[i].text, &level), 0);
        assert_int_equal(level, ok[i].level);
    }
    const char *bad[] = {"", "2", "WARNING", "info ", "VERSION", NULL};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        gg_log_level level = GG_LOG_WARN;
        assert_int_equal(gg_log_level_parse(bad[i], &level), -1);
        assert_int_equal(level, GG_LOG_WARN); /* untouched */
    }
}

static void user_callback(void *user_data, gg_log_level level, const char *message) {
    (void)user_data, (void)level, (void)message;
}

static void applies_level_and_stderr_only_without_callback(void **state) {
    (void)state;
    gg_config c = GG_CONFIG_INIT;
    unsetenv("GG_LOG_LEVEL");
    assert_int_equal(gg_log_env_apply(&c), GG_SUCCESS);
    assert_int_equal(c.log_level, GG_LOG_WARN);
    assert_null(c.log_fn);

    setenv("GG_LOG_LEVEL", "TRACE", 1);
    assert_int_equal(gg_log_env_apply(&c), GG_SUCCESS);
    assert_int_equal(c.log_level, GG_LOG_DEBUG);
    assert_ptr_equal(c.log_fn, gg_log_to_stderr);

    int mine = 0;
    c = (gg_config)GG_CONFIG_INIT;
    c.log_fn = user_callback;
    c.log_user_data = &mine;
    setenv("GG_LOG_LEVEL", "error", 1);
    assert_int_equal(gg_log_env_apply(&c), GG_SUCCESS);
    assert_int_equal(c.log_level, GG_LOG_ERROR);
    assert_ptr_equal(c.log_fn, user_callback); /* the caller's callback stays, with its user data */
    assert_ptr_equal(c.log_user_data, &mine);

    setenv("GG_LOG_LEVEL", "loud", 1);
    c = (gg_config)GG_CONFIG_INIT;
    assert_int_equal(gg_log_env_apply(&c), GG_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(gg_last_error(NULL), "GG_LOG_LEVEL=\"loud\""));
    assert_null(c.log_fn);
    unsetenv("GG_LOG_LEVEL");
}

static void stderr_line_names_process_and_level(void **state) {
    (void)state;
    char path[] = "/tmp/gg_log_env_XXXXXX";
    const int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stderr);
    const int saved = dup(STDERR_FILENO);
    assert_true(dup2(fd, STDERR_FILENO) >= 0);
    gg_log_to_stderr(NULL, GG_LOG_INFO, "plan built");
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    char line[256] = "", expected[256];
    FILE *f = fdopen(fd, "r");
    rewind(f);
    assert_non_null(fgets(line, sizeof line, f));
    fclose(f);
    unlink(path);
    snprintf(expected, sizeof expected, "gradgraph[%ld] INFO: plan built\n", (long)getpid());
    assert_string_equal(line, expected);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(names_any_case_and_trace),
        cmocka_unit_test(applies_level_and_stderr_only_without_callback),
        cmocka_unit_test(stderr_line_names_process_and_level),
    };
    return cmocka_run_group_tests_name("log_env", tests, NULL, NULL);
}
