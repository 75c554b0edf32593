# Install + export: a consumer does find_package(ingrid) and links ingrid::ingrid (or a module,
# ingrid::grid / ingrid::processors / ingrid::limiters / ingrid::cluster), and its tests
# ingrid::testing (the test kit). Public headers install to include/ingrid/.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(INGRID_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/ingrid)

install(TARGETS ingrid-node ingrid-cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS ingrid_grid ingrid_processors ingrid_limiters ingrid_wire ingrid_control ingrid_shard ingrid_cluster ingrid_client ingrid ingrid_asio ingrid_raft
                ingrid_sim ingrid_testing
        EXPORT ingridTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# Only the public headers (include/ingrid/); internal ones stay in the source tree.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ingrid DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")

install(EXPORT ingridTargets NAMESPACE ingrid:: DESTINATION ${INGRID_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ingridConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/ingridConfig.cmake
                              INSTALL_DESTINATION ${INGRID_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/ingridConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/ingridConfig.cmake ${PROJECT_BINARY_DIR}/ingridConfigVersion.cmake
        DESTINATION ${INGRID_CMAKE_DIR})

# pkg-config: `pkg-config --cflags --libs ingrid` (packaging/ingrid.pc.in), relocatable.
file(RELATIVE_PATH INGRID_PC_TO_PREFIX "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
string(REGEX REPLACE "/$" "" INGRID_PC_TO_PREFIX "${INGRID_PC_TO_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/packaging/ingrid.pc.in ${PROJECT_BINARY_DIR}/ingrid.pc @ONLY)
# The test kit: `pkg-config --cflags --libs ingrid-testing` (it requires ingrid).
configure_file(${PROJECT_SOURCE_DIR}/packaging/ingrid-testing.pc.in
               ${PROJECT_BINARY_DIR}/ingrid-testing.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/ingrid.pc ${PROJECT_BINARY_DIR}/ingrid-testing.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The service: a systemd unit (its flags in INGRID_ARGS of /etc/default/ingrid-node), and the
# operator's docs.
install(FILES ${PROJECT_SOURCE_DIR}/packaging/ingrid-node.service
        DESTINATION lib/systemd/system)
# (The defaults file is an example: copy it to /etc/default/ingrid-node.)
install(FILES ${PROJECT_SOURCE_DIR}/packaging/ingrid-node.default
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/CHANGELOG.md
              ${PROJECT_SOURCE_DIR}/docs/operations.md ${PROJECT_SOURCE_DIR}/docs/wire-format.md
              ${PROJECT_SOURCE_DIR}/docs/testing.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR})

# A Debian package of all of it (`cpack -G DEB` in a build folder): the programs, the libraries,
# headers and CMake package for find_package(ingrid), the unit. It depends on the Debian packages
# the headers and libraries need.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ingrid)
set(CPACK_PACKAGE_VENDOR ingrid)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "embeddable in-memory data grid for distributed rate limiting")
set(CPACK_PACKAGE_CONTACT "ingrid developers <ingrid@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "libasio-dev, libcereal-dev, libxxhash-dev, libraft-dev, libabsl-dev, libssl-dev, prometheus-cpp-dev, libcpp-httplib-dev")
# ingrid-node with --rls links gRPC, protobuf and yaml-cpp (INGRID_RLS_GATEWAY).
if(INGRID_RLS_GATEWAY)
  string(APPEND CPACK_DEBIAN_PACKAGE_DEPENDS ", libgrpc++-dev, libprotobuf-dev, libyaml-cpp-dev")
endif()
include(CPack)
