# Installs headers, the library and a CMake package so that other projects can
# find_package(shellsim) and link shellsim::shellsim.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS shellsim EXPORT shellsimTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/shellsim DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT shellsimTargets NAMESPACE shellsim:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/shellsim)

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
