# gradgraph.pc: `cc app.c $(pkg-config --cflags --libs gradgraph)` compiles and links a program that calls gradgraph
# and the CUDA runtime. The prefix is found from the file's own place (${pcfiledir}), so `cmake --install --prefix`
# anywhere gives a working file.

# Paths relative to the prefix, or absolute ones kept as they are.
foreach(dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
    set(GG_PC_${dir} "${CMAKE_INSTALL_${dir}}")
  else()
    set(GG_PC_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
  endif()
endforeach()
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(GG_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH _gg_up /gg/${CMAKE_INSTALL_LIBDIR}/pkgconfig /gg)
  string(REGEX REPLACE "/$" "" _gg_up "${_gg_up}")
  set(GG_PC_PREFIX "\${pcfiledir}/${_gg_up}")
endif()

# The CUDA runtime is public: NVIDIA's own cudart-X.Y module when pkg-config knows it, else its paths directly.
set(GG_PC_REQUIRES "")
set(GG_PC_CFLAGS "")
set(GG_PC_LIBS "")
set(_gg_cudart_pc cudart-${CUDAToolkit_VERSION_MAJOR}.${CUDAToolkit_VERSION_MINOR})
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(_GG_CUDART_PC QUIET ${_gg_cudart_pc})
endif()
if(_GG_CUDART_PC_FOUND)
  set(GG_PC_REQUIRES ${_gg_cudart_pc})
else()
  foreach(inc IN LISTS CUDAToolkit_INCLUDE_DIRS)
    string(APPEND GG_PC_CFLAGS " -I${inc}")
  endforeach()
  string(APPEND GG_PC_LIBS " -L${CUDAToolkit_LIBRARY_DIR} -lcudart")
endif()

# What only a static libgradgraph.a makes the user's link need (pkg-config --static): cuBLASLt, the optional
# libraries, and the C++ runtime the CUDA kernels' host code uses.
set(GG_PC_LIBS_PRIVATE "-L${CUDAToolkit_LIBRARY_DIR} -lcublasLt")
set(_gg_private_files)
if(GG_WITH_NCCL)
  list(APPEND _gg_private_files ${NCCL_LIBRARY})
endif()
if(GG_WITH_HWLOC)
  list(APPEND _gg_private_files ${HWLOC_LINK_LIBRARIES})
endif()
if(GG_WITH_MPI)
  list(APPEND _gg_private_files ${MPI_C_LIBRARIES})
endif()
foreach(lib IN LISTS _gg_private_files)
  string(APPEND GG_PC_LIBS_PRIVATE " ${lib}")
endforeach()
string(APPEND GG_PC_LIBS_PRIVATE " -lstdc++ -lm")

configure_file(${CMAKE_CURRENT_LIST_DIR}/gradgraph.pc.in ${PROJECT_BINARY_DIR}/gradgraph.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/gradgraph.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
