# The data-parallel sources (src/ddp): what every build compiles, then for each optional dependency either its files
# or its stub, so that no source walls its body off with #ifdef. Included by the top-level CMakeLists.txt after
# cmake/Dependencies.cmake has set GG_WITH_NCCL, GG_WITH_HWLOC and GG_WITH_MPI.
set(_gg_ddp ${CMAKE_CURRENT_LIST_DIR})
set(GG_DDP_SOURCES ${_gg_ddp}/state.c ${_gg_ddp}/bootstrap.c ${_gg_ddp}/ce_layout.c ${_gg_ddp}/fingerprint.c
    ${_gg_ddp}/step_layout.c ${_gg_ddp}/waiting.c)
if(GG_WITH_NCCL)
  list(APPEND GG_DDP_SOURCES ${_gg_ddp}/comm.c ${_gg_ddp}/comm_init.c ${_gg_ddp}/warmup.c ${_gg_ddp}/grad_hooks.c ${_gg_ddp}/pair_split.c
       ${_gg_ddp}/agree.c ${_gg_ddp}/copy_engine.c ${_gg_ddp}/deadline.c ${_gg_ddp}/watchdog.c ${_gg_ddp}/step_reduce.c)
else()
  list(APPEND GG_DDP_SOURCES ${_gg_ddp}/nccl_stub.c)
endif()
if(GG_WITH_HWLOC)
  list(APPEND GG_DDP_SOURCES ${_gg_ddp}/affinity.c)
else()
  list(APPEND GG_DDP_SOURCES ${_gg_ddp}/affinity_stub.c)
endif()
if(GG_WITH_MPI)
  list(APPEND GG_DDP_SOURCES ${_gg_ddp}/bootstrap_mpi.c)
else()
  list(APPEND GG_DDP_SOURCES ${_gg_ddp}/bootstrap_mpi_stub.c)
endif()
