# gradgraph as an installed package (tests/consumer/check.sh, tests/abi/check_exports.sh), all labelled cpu except
# running the programs. The install is a fixture: the checks that use it wait for it and are not run if it fails.
# Not in sanitizer builds: an instrumented library is not what users link, and their programs are not instrumented.
if(GG_SANITIZE)
  return()
endif()

set(_gg_work ${CMAKE_CURRENT_BINARY_DIR}/consumer)
get_filename_component(_gg_cuda_root ${CUDAToolkit_BIN_DIR} DIRECTORY)
set(_gg_consumer_env
  GG_BUILD_DIR=${PROJECT_BINARY_DIR} GG_SOURCE_DIR=${PROJECT_SOURCE_DIR} GG_WORK_DIR=${_gg_work}
  GG_CMAKE=${CMAKE_COMMAND} GG_GENERATOR=${CMAKE_GENERATOR} GG_MAKE_PROGRAM=${CMAKE_MAKE_PROGRAM}
  CC=${CMAKE_C_COMPILER} GG_CUDA_COMPILER=${CMAKE_CUDA_COMPILER} GG_CUDA_ROOT=${_gg_cuda_root}
  GG_C_LAUNCHER=${CMAKE_C_COMPILER_LAUNCHER} GG_CUDA_LAUNCHER=${CMAKE_CUDA_COMPILER_LAUNCHER})
# The subproject build is about packaging, not code generation: one architecture is enough.
list(GET CMAKE_CUDA_ARCHITECTURES 0 _gg_first_arch)
list(APPEND _gg_consumer_env GG_CUDA_ARCHITECTURES=${_gg_first_arch})
set(_gg_check ${CMAKE_CURRENT_SOURCE_DIR}/consumer/check.sh)

add_test(NAME consumer_install COMMAND ${_gg_check} install)
set_tests_properties(consumer_install PROPERTIES FIXTURES_SETUP gg_installed)
foreach(way find_package pkg_config subdirectory)
  add_test(NAME consumer_${way} COMMAND ${_gg_check} ${way})
  set_tests_properties(consumer_${way} PROPERTIES FIXTURES_SETUP gg_consumer_built SKIP_RETURN_CODE 77)
endforeach()
set_tests_properties(consumer_find_package consumer_pkg_config PROPERTIES FIXTURES_REQUIRED gg_installed)
set_tests_properties(consumer_subdirectory PROPERTIES TIMEOUT 900) # builds the library again
add_test(NAME consumer_run COMMAND ${_gg_check} run)
set_tests_properties(consumer_run PROPERTIES FIXTURES_REQUIRED gg_consumer_built SKIP_RETURN_CODE 77 LABELS gpu)
set_tests_properties(consumer_install consumer_find_package consumer_pkg_config consumer_subdirectory
                     PROPERTIES LABELS cpu)
set_tests_properties(consumer_install consumer_find_package consumer_pkg_config consumer_subdirectory consumer_run
                     PROPERTIES ENVIRONMENT "${_gg_consumer_env}")

# The exported symbols of the installed shared library are exactly the header's functions.
get_target_property(_gg_type gradgraph TYPE)
if(_gg_type STREQUAL "SHARED_LIBRARY")
  set(_gg_include ${_gg_work}/prefix/${CMAKE_INSTALL_INCLUDEDIR})
  add_test(NAME abi_exports
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/abi/check_exports.sh ${CMAKE_NM} ${CMAKE_C_COMPILER}
                   ${_gg_work}/prefix/${CMAKE_INSTALL_LIBDIR}/$<TARGET_FILE_NAME:gradgraph> ${_gg_include}/gradgraph.h
                   ${_gg_include})
  set_tests_properties(abi_exports PROPERTIES FIXTURES_REQUIRED gg_installed LABELS cpu)
endif()
