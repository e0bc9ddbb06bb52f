# Install rules: the headers, the exported target with its package config
# and version files, and a pkg-config file. Included from the top-level
# CMakeLists.txt with DLBRIDGE_INSTALL_INCLUDEDIR and DLBRIDGE_INSTALL_CMAKEDIR
# set (a GNU layout, or the wheel's dlbridge/include and dlbridge/cmake).
include(CMakePackageConfigHelpers)

install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/dlbridge"
        DESTINATION "${DLBRIDGE_INSTALL_INCLUDEDIR}")
install(TARGETS dlbridge EXPORT dlbridgeTargets)
install(EXPORT dlbridgeTargets NAMESPACE dlbridge::
        DESTINATION "${DLBRIDGE_INSTALL_CMAKEDIR}")
configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/dlbridgeConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/dlbridgeConfig.cmake"
  INSTALL_DESTINATION "${DLBRIDGE_INSTALL_CMAKEDIR}")
# Header-only: any compiler and word size may consume it.
write_basic_package_version_file("${PROJECT_BINARY_DIR}/dlbridgeConfigVersion.cmake"
  VERSION "${PROJECT_VERSION}" COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES "${PROJECT_BINARY_DIR}/dlbridgeConfig.cmake"
              "${PROJECT_BINARY_DIR}/dlbridgeConfigVersion.cmake"
        DESTINATION "${DLBRIDGE_INSTALL_CMAKEDIR}")

# pkg-config: the prefix is found from the .pc file's own place, so the
# installed tree can be moved. Header-only and arch-independent, hence datadir.
if(SKBUILD)
  set(DLBRIDGE_INSTALL_PKGCONFIGDIR dlbridge/pkgconfig)
else()
  set(DLBRIDGE_INSTALL_PKGCONFIGDIR "${CMAKE_INSTALL_DATADIR}/pkgconfig")
endif()
file(RELATIVE_PATH DLBRIDGE_PC_TO_PREFIX
     "/prefix/${DLBRIDGE_INSTALL_PKGCONFIGDIR}" "/prefix")
string(REGEX REPLACE "/$" "" DLBRIDGE_PC_TO_PREFIX "${DLBRIDGE_PC_TO_PREFIX}")
set(DLBRIDGE_PC_LIBS "-pthread")
foreach(lib IN LISTS CMAKE_DL_LIBS)
  string(APPEND DLBRIDGE_PC_LIBS " -l${lib}")
endforeach()
configure_file("${PROJECT_SOURCE_DIR}/cmake/dlbridge.pc.in"
               "${PROJECT_BINARY_DIR}/dlbridge.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/dlbridge.pc"
        DESTINATION "${DLBRIDGE_INSTALL_PKGCONFIGDIR}")
