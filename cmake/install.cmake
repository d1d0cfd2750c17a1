# How netvm is installed (make install PREFIX=..., cmake --install): the
# versioned shared library exporting only the public API, the static library,
# the headers, the docs, a pkg-config file and a CMake package. docs/install.md
# explains each. The netvm tool installs itself from tools/.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The SONAME carries the ABI: the major version from 1.0 on; before 1.0 any
# minor release may change the ABI, so it carries major.minor (libnetvm.so.0.1).
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(NETVM_SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
  set(NETVM_PACKAGE_COMPAT SameMinorVersion)
else()
  set(NETVM_SOVERSION ${PROJECT_VERSION_MAJOR})
  set(NETVM_PACKAGE_COMPAT SameMajorVersion)
endif()
set_target_properties(netvm PROPERTIES
  VERSION ${PROJECT_VERSION} SOVERSION ${NETVM_SOVERSION}
  LINK_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/netvm.map)
# Only netvm_* leaves the shared library (the pattern, not a list, so a new
# public function is exported by being named so).
target_link_options(netvm PRIVATE "LINKER:--version-script=${CMAKE_CURRENT_LIST_DIR}/netvm.map")

install(TARGETS netvm netvm_static EXPORT netvmTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# The whole directory, so a header added later is installed with the others.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/netvm DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}
  FILES_MATCHING PATTERN "*.md" PATTERN "*.png")
# netvm memd's systemd unit and example config, for the administrator to copy
# into /etc (docs/memd.md): installing into /etc from a build is not ours to do
# into /etc (docs/memd.md): installing into /etc from a build is not ours to do.
# The unit names the installed tool, whose prefix is known only at install
# time: made in two steps, as netvm.pc below.
install(FILES ${PROJECT_SOURCE_DIR}/dist/memd.conf DESTINATION ${CMAKE_INSTALL_DATADIR}/netvm/dist)

# pkg-config: the prefix is the one installed to, known only at install time
# (cmake --install --prefix may differ from CMAKE_INSTALL_PREFIX), so the file
# is made in two steps: the build's values now, the prefix when installing.
function(netvm_pc_path out dir)
  if(IS_ABSOLUTE "${dir}")
    set(${out} "${dir}" PARENT_SCOPE)
  else()
    set(${out} "\${prefix}/${dir}" PARENT_SCOPE)
  endif()
endfunction()
set(NETVM_PC_PREFIX "@CMAKE_INSTALL_PREFIX@")
set(NETVM_PC_REQUIRES_PRIVATE "libcrypto")
if(NETVM_HAVE_PMIX)
  string(APPEND NETVM_PC_REQUIRES_PRIVATE " pmix")
endif()
netvm_pc_path(NETVM_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
netvm_pc_path(NETVM_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
netvm_pc_path(NETVM_PC_BINDIR "${CMAKE_INSTALL_BINDIR}")
netvm_pc_path(NETVM_PC_DOCDIR "${CMAKE_INSTALL_DOCDIR}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/netvm.pc.in ${PROJECT_BINARY_DIR}/netvm.pc.in @ONLY)
install(CODE "configure_file(\"${PROJECT_BINARY_DIR}/netvm.pc.in\" \"${PROJECT_BINARY_DIR}/netvm.pc\" @ONLY)")
install(FILES ${PROJECT_BINARY_DIR}/netvm.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
string(REPLACE "\${prefix}" "@CMAKE_INSTALL_PREFIX@" NETVM_UNIT_BINDIR "${NETVM_PC_BINDIR}")
string(REPLACE "\${prefix}" "@CMAKE_INSTALL_PREFIX@" NETVM_UNIT_DOCDIR "${NETVM_PC_DOCDIR}")
configure_file(${PROJECT_SOURCE_DIR}/dist/netvm-memd.service.in ${PROJECT_BINARY_DIR}/netvm-memd.service.in @ONLY)
install(CODE "configure_file(\"${PROJECT_BINARY_DIR}/netvm-memd.service.in\" \"${PROJECT_BINARY_DIR}/netvm-memd.service\" @ONLY)")
install(FILES ${PROJECT_BINARY_DIR}/netvm-memd.service DESTINATION ${CMAKE_INSTALL_DATADIR}/netvm/dist)

# CMake package: find_package(netvm) gives netvm::netvm and netvm::netvm_static.
set(NETVM_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/netvm)
install(EXPORT netvmTargets NAMESPACE netvm:: DESTINATION ${NETVM_CMAKE_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/netvmConfig.cmake.in
  ${PROJECT_BINARY_DIR}/netvmConfig.cmake INSTALL_DESTINATION ${NETVM_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/netvmConfigVersion.cmake
  COMPATIBILITY ${NETVM_PACKAGE_COMPAT})
install(FILES ${PROJECT_BINARY_DIR}/netvmConfig.cmake ${PROJECT_BINARY_DIR}/netvmConfigVersion.cmake
  DESTINATION ${NETVM_CMAKE_DIR})
