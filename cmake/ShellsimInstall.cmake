# Installs headers, the library and a CMake package so that other projects can
# find_package(shellsim) and link shellsim::shellsim (and shellsim::render, when built).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(_shellsim_targets shellsim)
if(TARGET shellsim_render)
  list(APPEND _shellsim_targets shellsim_render)
endif()
install(TARGETS ${_shellsim_targets} EXPORT shellsimTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/shellsim DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT shellsimTargets NAMESPACE shellsim:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/shellsim)

if(TARGET shellsim_render)
  set(SHELLSIM_WITH_RENDER ON)
else()
  set(SHELLSIM_WITH_RENDER OFF)
endif()
configure_package_config_file(cmake/shellsimConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/shellsimConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/shellsim)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/shellsimConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/shellsimConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/shellsimConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/shellsim)
if(SHELLSIM_BUILD_APPS)
  install(TARGETS shellsim_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
