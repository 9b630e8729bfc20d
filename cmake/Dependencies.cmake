# Optional dependencies of gradgraph. Each option defaults to ON when the dependency is found.
# NCCL ships no CMake config: look in the CUDA toolkit, the system directories and Python's nvidia-nccl wheel.

set(_gg_nccl_hints ${CUDAToolkit_LIBRARY_ROOT} ${CUDAToolkit_INCLUDE_DIRS}/..)
find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_FOUND)
  execute_process(COMMAND ${Python3_EXECUTABLE} -c
      "import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))"
    OUTPUT_VARIABLE _gg_nccl_wheel OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(_gg_nccl_wheel)
    list(APPEND _gg_nccl_hints ${_gg_nccl_wheel})
  endif()
endif()
find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${_gg_nccl_hints} PATH_SUFFIXES include)
find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${_gg_nccl_hints} PATH_SUFFIXES lib lib64)
if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
  set(_gg_nccl_found ON)
else()
  set(_gg_nccl_found OFF)
endif()
option(GG_WITH_NCCL "Build the NCCL data-parallel support" ${_gg_nccl_found})
if(GG_WITH_NCCL AND NOT _gg_nccl_found)
  message(FATAL_ERROR "GG_WITH_NCCL=ON but NCCL was not found (set NCCL_INCLUDE_DIR and NCCL_LIBRARY)")
endif()
if(GG_WITH_NCCL)
  # An imported target, so that a static libgradgraph's export can name it; gradgraphConfig.cmake makes it again.
  add_library(gradgraph::nccl UNKNOWN IMPORTED)
  set_target_properties(gradgraph::nccl PROPERTIES IMPORTED_LOCATION ${NCCL_LIBRARY}
                                                   INTERFACE_INCLUDE_DIRECTORIES ${NCCL_INCLUDE_DIR})
  add_library(gg_nccl ALIAS gradgraph::nccl) # the tests and examples that call NCCL themselves
  message(STATUS "gradgraph: NCCL found: ${NCCL_LIBRARY}")
else()
  message(STATUS "gradgraph: NCCL not used")
endif()

find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(HWLOC QUIET IMPORTED_TARGET hwloc)
endif()
option(GG_WITH_HWLOC "Bind host threads near their GPU with hwloc" ${HWLOC_FOUND})
if(GG_WITH_HWLOC AND NOT HWLOC_FOUND)
  message(FATAL_ERROR "GG_WITH_HWLOC=ON but hwloc was not found (apt-get install libhwloc-dev pkg-config)")
endif()
message(STATUS "gradgraph: hwloc ${GG_WITH_HWLOC}")

find_package(MPI COMPONENTS C QUIET)
option(GG_WITH_MPI "gg_dist_init_mpi: NCCL's unique id broadcast over MPI" ${MPI_C_FOUND})
if(GG_WITH_MPI AND NOT MPI_C_FOUND)
  message(FATAL_ERROR "GG_WITH_MPI=ON but MPI was not found (apt-get install libopenmpi-dev openmpi-bin)")
endif()
message(STATUS "gradgraph: MPI ${GG_WITH_MPI}")
