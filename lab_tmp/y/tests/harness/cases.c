/* cases.c - reading tests/data/cases.csv and the spec's speed-of-light formula. */
#include "cases.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *gg_case_block_short(int block_id) {
    switch (block_id) {
    case 1: return "tanh_gate";
    case 2: return "gelu_ffn";
    case 3: return "mlp";
    case 4: return "ssm_gate";
    }
    return "unknown";
}

int gg_cases_load(const char *path, gg_case *cases, int max, char *err, size_t err_bytes) {
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, err_bytes, "cannot open %s", path);
        return -1;
    }
    char line[512];
    int count = 0, line_no = 0;
    while (fgets(line, sizeof line, f)) {
        ++line_no;
        if (line_no == 1 || line[0] == '\n') continue; /* header */
        if (count == max) {
            snprintf(err, err_bytes, "%s: more than %d cases", path, max);
            fclose(f);
            return -1;
        }
        gg_case *c = &cases[count];
        memset(c, 0, sizeof *c);
        long long b, s, m, d0, d1;
        int n = sscanf(line, "%d,%95[^,],%d,%lld,%lld,%lld,%lld,%lld,%lf,%lf,%d,%lf", &c->block_id, c->block, &c->index,
                       &b, &s, &m, &d0, &d1, &c->atol, &c->rtol, &c->use_silu_gate, &c->sol_us_b200);
        if (n != 12 || c->block_id < 1 || c->block_id > 4 || b * s != m || m <= 0) {
            snprintf(err, err_bytes, "%s:%d: malformed case line", path, line_no);
            fclose(f);
            return -1;
        }
        c->batch_size = b;
        c->seq_len = s;
        c->tokens = m;
        c->dim0 = d0;
        c->dim1 = d1;
        ++count;
    }
    fclose(f);
    return count;
}

double gg_case_sol_us_h200(const gg_case *c) {
    const double M = (double)c->tokens, a = (double)c->dim0, b = (double)c->dim1;
    double flop = 0.0, elems = 0.0;
    switch (c->block_id) {
    case 1: elems = 2 * M * a + 1 + M + 2 * M * a + 1; break;                   /* go, gate, hs, mask; 2 outs + gate */
    case 2: flop = 8 * M * a * b; elems = 2 * M * a + 2 * a * b + 3 * M * b + M * a + 2 * a * b; break;
    case 3: flop = 8 * M * a * b; elems = 2 * M * a + 2 * a * b + b + a + 2 * M * b + M * a + 2 * a * b + b + a; break;
    case 4: flop = 4 * M * a * b; elems = M * a + 4 * M * b + a * b + a + 2 * M * b + a * b + a; break;
    }
    const double t_flop = flop / 989.4e12, t_bytes = 2.0 * elems / 4.8e12;
    return 1e6 * (t_flop > t_bytes ? t_flop : t_bytes);
}
