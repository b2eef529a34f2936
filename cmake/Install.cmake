# What `cmake --install build --prefix P` puts under P: the tools, the
# shared libraries (runtime, compiler, the fdemu driver), the headers those
# libraries' users include, and a CMake package, so that a project outside
# this tree does
#   find_package(flashdecode CONFIG REQUIRED)   # CMAKE_PREFIX_PATH=P
#   target_link_libraries(app PRIVATE flashdecode::compiler flashdecode::runtime)
# and runs its kernels on fdemu through ${flashdecode_EMULATOR_LIBRARY}.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(FD_INSTALLED_TARGETS fd-compile fd-opt fd-plan fd-bench fd-demo fdemu
  flashdecode_runtime flashdecode_compiler)
# Installed binaries keep the paths of the libraries they link from outside
# the build tree (LLVM's and MLIR's under /usr/lib/llvm-22/lib), as the
# build's do.
set_target_properties(${FD_INSTALLED_TARGETS} PROPERTIES
  INSTALL_RPATH_USE_LINK_PATH ON)
install(TARGETS fd-compile fd-opt fd-plan fd-bench fd-demo
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS fdemu LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS flashdecode_runtime flashdecode_compiler
  EXPORT flashdecodeTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})

# The public headers: the runtime's, the compiler's and what they include
# (planning, the dialect's enums, generated from TableGen into the build
# tree). The emulator's internals and the test support stay out.
foreach(directory Compiler Dialect Planning Reference Runtime)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/fd/${directory}
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/fd
    FILES_MATCHING PATTERN "*.h")
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/include/fd/Namespace.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/fd)
install(DIRECTORY ${PROJECT_BINARY_DIR}/include/fd/Dialect
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/fd
  FILES_MATCHING PATTERN "*.h.inc" PATTERN "CMakeFiles" EXCLUDE)

set(FD_PACKAGE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/flashdecode)
install(EXPORT flashdecodeTargets NAMESPACE flashdecode::
  DESTINATION ${FD_PACKAGE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/flashdecodeConfig.cmake.in
  ${PROJECT_BINARY_DIR}/flashdecodeConfig.cmake
  INSTALL_DESTINATION ${FD_PACKAGE_DIR}
  PATH_VARS CMAKE_INSTALL_LIBDIR CMAKE_INSTALL_BINDIR)
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/flashdecodeConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/flashdecodeConfig.cmake
  ${PROJECT_BINARY_DIR}/flashdecodeConfigVersion.cmake
  DESTINATION ${FD_PACKAGE_DIR})
