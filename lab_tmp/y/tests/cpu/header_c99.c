/* header_c99.c - gradgraph.h must stay plain C99 (built with -std=c99 -pedantic -Werror; nothing to run). */
#include "gradgraph.h"

int gg_header_c99_check(void);

int gg_header_c99_check(void) {
    const gg_config c = GG_CONFIG_INIT;
    const gg_graph_config g = GG_GRAPH_CONFIG_INIT;
    const gg_dist_config d = GG_DIST_CONFIG_INIT;
    return (int)(c.struct_size + g.struct_size + d.struct_size > 0);
}
