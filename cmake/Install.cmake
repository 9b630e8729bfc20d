# What `cmake --install` puts under the prefix: the library, its two headers, a CMake package (find_package(gradgraph)
# and the imported target gradgraph::gradgraph) and a pkg-config file.
include(CMakePackageConfigHelpers)
set(GG_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/gradgraph CACHE STRING
    "Where gradgraphConfig.cmake is installed, relative to the prefix")
mark_as_advanced(GG_INSTALL_CMAKEDIR)

# cuBLASLt and NCCL often live outside the loader's path (the CUDA toolkit, a Python wheel): the installed library
# keeps the directories it was linked against them from, as the build tree's library does. CMake leaves out of those
# the directories it counts as a compiler's own, the CUDA toolkit's among them (nvcc's implicit link directory),
# though the loader searches it only where ldconfig was told of it (not after a runfile install that skipped it):
# the toolkit's library directory is added unless it is one the C compiler links from too (the system's).
set_target_properties(gradgraph PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
if(CUDAToolkit_LIBRARY_DIR AND NOT CUDAToolkit_LIBRARY_DIR IN_LIST CMAKE_C_IMPLICIT_LINK_DIRECTORIES)
  set_property(TARGET gradgraph APPEND PROPERTY INSTALL_RPATH "${CUDAToolkit_LIBRARY_DIR}")
endif()

install(TARGETS gradgraph EXPORT gradgraphTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/gradgraph.h ${GG_GENERATED_INCLUDE_DIR}/gradgraph_version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE ${PROJECT_SOURCE_DIR}/CHANGELOG.md DESTINATION ${CMAKE_INSTALL_DOCDIR})

# ---- CMake package ----
get_target_property(GG_LIBRARY_TYPE gradgraph TYPE)
if(GG_WITH_NCCL)
  get_filename_component(GG_NCCL_LIBRARY_DIR ${NCCL_LIBRARY} DIRECTORY)
endif()
install(EXPORT gradgraphTargets NAMESPACE gradgraph:: DESTINATION ${GG_INSTALL_CMAKEDIR})
configure_package_config_file(cmake/gradgraphConfig.cmake.in ${PROJECT_BINARY_DIR}/gradgraphConfig.cmake
                              INSTALL_DESTINATION ${GG_INSTALL_CMAKEDIR})
# SameMajorVersion: find_package(gradgraph 0.1) accepts any 0.x from 0.1 on, never 1.x.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/gradgraphConfigVersion.cmake VERSION ${PROJECT_VERSION}
                                 COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/gradgraphConfig.cmake ${PROJECT_BINARY_DIR}/gradgraphConfigVersion.cmake
        DESTINATION ${GG_INSTALL_CMAKEDIR})

# ---- pkg-config ----
include(${CMAKE_CURRENT_LIST_DIR}/PkgConfigFile.cmake)
